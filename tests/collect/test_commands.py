"""Command runner and file collectors: missing tool, permission, non-zero exit, hang, logs, checkpoints."""

from __future__ import annotations

import json
import os
import stat
import time

from gpulib.collect import files
from gpulib.collect.core import run_collectors
from gpulib.collect.runner import run_command
from gpulib.evidence.bundle import Bundle, BundleWriter
from tests.processes import process_gone


def _script(path, body: str):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_missing_tool_is_unavailable():
    result = run_command(["gpulib-no-such-tool-xyz", "-v"], 5)
    assert (result.status, result.reason) == ("unavailable", "gpulib-no-such-tool-xyz not found on PATH")


def test_not_executable_is_failed_with_permission(tmp_path):
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\necho hi\n")
    result = run_command([str(tool)], 5)
    assert result.status == "failed" and result.reason == f"permission denied running {tool}"


def test_nonzero_exit_keeps_output_and_names_the_code(tmp_path):
    tool = _script(tmp_path / "tool", "echo partial\necho 'dmesg: read kernel buffer failed: Operation not permitted' "
                                      ">&2\nexit 1\n")
    result = run_command([str(tool)], 5)
    assert result.status == "failed" and result.returncode == 1
    assert result.reason.endswith("exited with code 1: dmesg: read kernel buffer failed: Operation not permitted")
    assert result.stdout == b"partial\n"


def test_hang_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    tool = _script(tmp_path / "tool", f"echo started\nsleep 60 &\necho $! > {pidfile}\nwait\n")
    started = time.monotonic()
    result = run_command([str(tool)], 1.0)
    assert result.status == "timeout" and "no answer within 1 s" in result.reason
    assert result.stdout == b"started\n", "output written before the hang is kept"
    assert time.monotonic() - started < 30
    assert process_gone(int(pidfile.read_text())), "the grandchild (sleep) must be killed with its group"


def test_merged_streams_keep_fuser_style_stderr(tmp_path):
    tool = _script(tmp_path / "tool", "echo ' 1234' \necho '/dev/nvidia0: USER PID ACCESS COMMAND' >&2\n")
    result = run_command([str(tool)], 5, merge_stderr=True)
    assert b"/dev/nvidia0: USER" in result.stdout and result.stderr == b""


def _run(tmp_path, *collectors):
    writer = BundleWriter(tmp_path / "bundle", host="node-a", command_line=["test"])
    run_collectors(writer, list(collectors))
    bundle = Bundle.open(writer.finish())
    return bundle, {c.name: c for c in bundle.collectors}


def test_logs_are_copied_tail_capped_and_missing_ones_named(tmp_path):
    logs = tmp_path / "job"
    logs.mkdir()
    big = logs / "rank0.log"
    big.write_bytes(b"".join(b"step %06d loss 1.0\n" % i for i in range(5000)))
    (logs / "rank1.log").write_text("NCCL WARN Timeout\n")
    missing = tmp_path / "nope.log"
    bundle, records = _run(tmp_path, files.logs_collector([logs, missing], cap_bytes=1000))
    assert records["logs"].status == "failed" and f"{missing}: no such file or folder" in records["logs"].reason
    copied = bundle.root / files.bundle_name(big)
    assert copied.read_bytes() == big.read_bytes()[-1000:] and copied.read_bytes().endswith(b"step 004999 loss 1.0\n")
    assert (bundle.root / files.bundle_name(logs / "rank1.log")).read_text() == "NCCL WARN Timeout\n"
    index = {e["source"]: e for e in json.loads((bundle.root / "logs" / "index.json").read_text())}
    assert index[str(big)]["truncated_to_last_bytes"] == 1000 and index[str(big)]["bytes_original"] == big.stat().st_size
    assert index[str(logs / "rank1.log")]["truncated_to_last_bytes"] is None


def test_unreadable_log_is_named_and_the_rest_copied(tmp_path, run_without_root_read):
    secret, fine = tmp_path / "secret.log", tmp_path / "fine.log"
    secret.write_text("x")
    secret.chmod(0)
    fine.write_text("ok\n")
    code = (
        "import json; from pathlib import Path; from gpulib.collect import files;"
        "from gpulib.collect.core import run_collectors;"
        "from gpulib.evidence.bundle import Bundle, BundleWriter;"
        f"w = BundleWriter({str(tmp_path / 'bundle')!r}, host='node-a', command_line=['test']);"
        f"run_collectors(w, [files.logs_collector([Path({str(secret)!r}), Path({str(fine)!r})])]);"
        "c = Bundle.open(w.finish()).collectors[0]; print(json.dumps({'reason': c.reason, 'files': c.files}))"
    )
    done = run_without_root_read(code)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert f"{secret}: permission denied" in record["reason"]
    assert record["files"] == [files.bundle_name(fine), "logs/index.json"]


def test_checkpoint_listing_records_sizes_mtimes_and_symlinks(tmp_path):
    root = tmp_path / "ckpt"
    (root / "step_100").mkdir(parents=True)
    (root / "step_100" / "model.pt").write_bytes(b"\0" * 1234)
    (root / "step_200").mkdir()
    (root / "latest").symlink_to("step_200")
    os.utime(root / "step_100" / "model.pt", (1_700_000_000, 1_700_000_000))
    bundle, records = _run(tmp_path, files.checkpoint_listing_collector(root))
    assert records["checkpoints"].status == "ok"
    listing = json.loads((bundle.root / "checkpoints" / "listing.json").read_text())
    entries = {e["path"]: e for e in listing["entries"]}
    assert entries["step_100/model.pt"]["bytes"] == 1234
    assert entries["step_100/model.pt"]["mtime_utc"] == "2023-11-14T22:13:20Z"
    assert entries["latest"]["type"] == "symlink" and entries["latest"]["target"] == "step_200"


def test_checkpoint_listing_of_a_missing_folder_fails_with_its_name(tmp_path):
    _, records = _run(tmp_path, files.checkpoint_listing_collector(tmp_path / "gone"))
    assert records["checkpoints"].status == "failed" and records["checkpoints"].reason == f"{tmp_path / 'gone'}: not found"


def test_python_stack_reads_the_installed_torch_without_importing_it(tmp_path):
    from importlib.metadata import version

    from gpulib.collect.commands import python_stack
    from gpulib.collect.core import Collector

    bundle, records = _run(tmp_path, Collector("python-stack", 30, python_stack))
    info = json.loads((bundle.root / "versions" / "python-stack.json").read_text())
    assert info["torch"] == version("torch")
    if info["torch_cuda"] is None:
        assert records["python-stack"].reason == "NCCL version unknown: this torch is built without CUDA, so without NCCL"


def test_python_stack_names_the_nccl_of_a_cuda_torch_from_package_metadata(tmp_path, monkeypatch):
    """A CUDA wheel of torch pulls NCCL in as the nvidia-nccl-cu12 package: its version is the
    NCCL the job ran with. Laid out here as on a GPU machine's site-packages."""
    from gpulib.collect.commands import python_stack
    from gpulib.collect.core import Collector

    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise RuntimeError('the probe must not import torch')\n")
    (site / "torch" / "version.py").write_text("__version__ = '2.5.1+cu124'\ncuda = '12.4'\nhip = None\n")
    dist = site / "nvidia_nccl_cu12-2.21.5.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.21.5\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    bundle, records = _run(tmp_path, Collector("python-stack", 30, python_stack))
    assert records["python-stack"].status == "ok" and records["python-stack"].reason is None
    info = json.loads((bundle.root / "versions" / "python-stack.json").read_text())
    assert (info["torch"], info["torch_cuda"], info["nccl"]) == ("2.5.1+cu124", "12.4", "2.21.5")


def test_kernel_log_falls_back_to_the_journal_when_dmesg_is_restricted(tmp_path, recorded, monkeypatch):
    """``kernel.dmesg_restrict=1`` refuses dmesg to non-root users; the journal still has the
    kernel lines. (This test runs as root here, so the refusal is replayed by a stand-in dmesg.)"""
    from gpulib.collect.commands import kernel_log
    from gpulib.collect.core import Collector

    journal = recorded / "kernel" / "gpud" / "journalctl-time-format-short-iso-2.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
    _script(bin_dir / "journalctl", f"cat '{journal}'\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    bundle, records = _run(tmp_path, Collector("kernel-log", 10, kernel_log))
    record = records["kernel-log"]
    assert record.status == "ok"
    assert record.reason == ("dmesg -T: dmesg exited with code 1: dmesg: read kernel buffer failed: Operation not "
                             "permitted; used journalctl -k instead")
    assert (bundle.root / "kernel" / "journal.txt").read_bytes() == journal.read_bytes()
    assert record.files == ["kernel/dmesg.txt.stderr", "kernel/journal.txt"]


def test_nvidia_smi_without_driver_is_unavailable_not_failed(tmp_path, monkeypatch):
    """nvidia-smi installed but the kernel module not loaded: exit 9 and this message."""
    from gpulib.collect.commands import nvidia_smi_collectors

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "nvidia-smi", "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                                    "Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    _, records = _run(tmp_path, *nvidia_smi_collectors())
    for record in records.values():
        assert record.status == "unavailable" and record.reason.startswith("no NVIDIA driver: nvidia-smi exited with code 9")


def test_boot_history_is_recorded_and_a_missing_wtmp_is_unavailable(tmp_path, monkeypatch):
    """``last -x -F``: full dates, so the boot/shutdown/crash rows carry their year; a container
    without /var/log/wtmp has no history to give, which is not a fault."""
    from gpulib.collect.commands import host_collectors

    boot_history = next(c for c in host_collectors(prev_boot=False) if c.name == "boot-history")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    _script(bin_dir / "last", 'echo "reboot   system boot  6.8.0-51-generic Tue Jan 13 04:10:22 2026   still running"\n')
    bundle, records = _run(tmp_path / "a", boot_history)
    assert records["boot-history"].status == "ok"
    assert (bundle.root / "system" / "last-x.txt").read_text().startswith("reboot   system boot")
    _script(bin_dir / "last", 'echo "last: cannot open /var/log/wtmp: No such file or directory" >&2\nexit 1\n')
    _, records = _run(tmp_path / "b", boot_history)
    assert records["boot-history"].status == "unavailable" and records["boot-history"].reason.startswith("no login records")
