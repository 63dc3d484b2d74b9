"""``gpulib collect`` end to end in a subprocess, on this GPU-less machine: the bundle, verify,
a hung tool, and fan-out into one shared folder (distinct hosts, and two writers racing)."""

from __future__ import annotations

import json
import os
import platform
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib.collect.capture import bundle_path
from gpulib.errors import BundleError
from gpulib.evidence.bundle import Bundle, verify
from tests.processes import process_gone

HAS_NVIDIA_DRIVER = Path("/dev/nvidiactl").exists()


def gpulib(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpulib", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def _records(root) -> dict:
    return {c.name: c for c in Bundle.open(root).collectors}


def test_collect_on_a_host_without_gpu_marks_nvml_unavailable_and_collects_the_rest(tmp_path):
    out = tmp_path / "b"
    done = gpulib("collect", "--out", str(out), "--checkpoints", str(tmp_path))
    assert done.returncode == 0, done.stderr
    records = _records(out)
    if not HAS_NVIDIA_DRIVER:
        assert records["nvml"].status == "unavailable" and records["nvml"].reason.startswith("no NVIDIA driver")
        for name in ("nvidia-smi-q-xml", "nvidia-smi-q", "nvidia-smi-topo", "nvidia-smi-nvlink"):
            assert records[name].status == "unavailable", records[name]
    assert records["versions"].status == "ok"
    assert platform.uname().release in (out / "versions" / "uname.txt").read_text()
    assert records["checkpoints"].status == "ok"
    assert all(c.status in ("ok", "unavailable", "failed") for c in records.values()), "nothing may time out here"
    assert all(c.reason for c in records.values() if c.status != "ok"), "every non-ok collector says why"
    commands = json.loads((out / "commands.json").read_text())
    assert {"collector": "versions", "argv": ["uname", "-a"]}.items() <= next(
        c for c in commands if c["argv"][0] == "uname").items()
    assert "versions" in done.stdout and "unavailable" in done.stdout  # the printed summary
    assert verify(out).ok


def test_verify_catches_a_changed_byte_in_a_collected_bundle(tmp_path):
    out = tmp_path / "b"
    assert gpulib("collect", "--out", str(out)).returncode == 0
    ok = gpulib("verify", str(out))
    assert ok.returncode == 0 and "OK" in ok.stdout
    target = out / "versions" / "uname.txt"
    data = bytearray(target.read_bytes())
    data[0] ^= 0x20
    target.write_bytes(bytes(data))
    bad = gpulib("verify", str(out))
    assert bad.returncode == 1 and "changed:    versions/uname.txt" in bad.stdout


def test_a_hung_tool_is_cut_at_its_timeout_while_the_others_finish(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    pidfile = tmp_path / "sleep.pid"
    ibstat = fake_bin / "ibstat"
    ibstat.write_text(f"#!/bin/sh\necho 'CA mlx5_0'\nsleep 60 &\necho $! > {pidfile}\nwait\n")
    ibstat.chmod(ibstat.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"}
    out = tmp_path / "b"
    done = gpulib("collect", "--out", str(out), "--collector-timeout", "ibstat=2", env=env, timeout=50)
    assert done.returncode == 0, done.stderr
    records = _records(out)
    assert records["ibstat"].status == "timeout" and "within 2 s" in records["ibstat"].reason
    assert (out / "infiniband" / "ibstat.txt").read_text() == "CA mlx5_0\n", "output before the hang is kept"
    assert records["versions"].status == "ok" and records["kernel-log"].status != "timeout"
    assert process_gone(int(pidfile.read_text())), "the hung tool's child (sleep) is killed with its group"


def test_bad_arguments_give_a_clear_error_and_no_bundle(tmp_path):
    done = gpulib("collect", "--out", str(tmp_path / "b"), "--prometheus", "http://127.0.0.1:9", "--since", "yesterday-ish")
    assert done.returncode == 2 and "cannot read the time 'yesterday-ish'" in done.stderr
    assert not (tmp_path / "b").exists()


def test_fan_out_rule(tmp_path):
    assert bundle_path(tmp_path / "inc" / "%h", "node-a") == tmp_path / "inc" / "node-a"
    assert bundle_path(tmp_path, "node-a") == tmp_path / "node-a"  # an existing folder is the shared parent
    assert bundle_path(tmp_path / "new", "node-a") == tmp_path / "new"
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "manifest.json").write_text("{}")
    with pytest.raises(BundleError, match="never overwritten"):
        bundle_path(tmp_path / "done", "node-a")


def test_many_hosts_write_into_one_shared_folder_at_once(tmp_path):
    shared = tmp_path / "incident-42"
    shared.mkdir()
    hosts = [f"node-{i:02d}" for i in range(6)]
    procs = [subprocess.Popen([sys.executable, "-m", "gpulib", "collect", "--out", f"{shared}/%h", "--host", host],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for host in hosts]
    for proc in procs:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    assert sorted(p.name for p in shared.iterdir()) == hosts, "no temporary .partial folder may remain"
    for host in hosts:
        bundle = Bundle.open(shared / host)
        assert bundle.host == host and verify(bundle.root).ok


def test_two_writers_racing_for_one_host_exactly_one_wins(tmp_path):
    shared = tmp_path / "incident-43"
    shared.mkdir()
    procs = [subprocess.Popen([sys.executable, "-m", "gpulib", "collect", "--out", str(shared), "--host", "node-a"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(proc.wait(timeout=120), proc.communicate()[1]) for proc in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert "nothing was overwritten" in loser or "never overwritten" in loser
    assert verify(shared / "node-a").ok
    first_manifest = (shared / "node-a" / "manifest.json").read_bytes()
    assert gpulib("collect", "--out", str(shared / "%h"), "--host", "node-a").returncode == 2
    assert (shared / "node-a" / "manifest.json").read_bytes() == first_manifest


def test_collect_digest_writes_the_nodes_digest_and_the_bundle_still_verifies(tmp_path):
    from gpulib.evidence import digest  # noqa: PLC0415

    out = tmp_path / "b"
    done = gpulib("collect", "--out", str(out), "--digest", timeout=180)
    assert done.returncode == 0, done.stderr
    assert f"digest {out / 'digest.json'}" in done.stdout
    assert digest.load(out, None) is not None  # current: the central diagnosis will read it
    assert verify(out).ok
