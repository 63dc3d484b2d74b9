"""The BMC history collectors, file-system usage and the opt-in nvidia-bug-report: real commands
where they run here (df, stat -f, ip), fake ipmitool / nvidia-bug-report.sh scripts on PATH where
the real tool cannot exist on this machine (no BMC, no NVIDIA driver)."""

from __future__ import annotations

import gzip
import os
import stat
import subprocess
import sys

from gpulib.collect import bmc, bugreport
from gpulib.collect.core import run_collectors
from gpulib.collect.filesystems import filesystems_collector
from gpulib.evidence.bundle import Bundle, BundleWriter, verify
from gpulib.parsers import df, ipmi_sel, statfs
from tests.processes import process_gone


def _tool(folder, name: str, body: str):
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _run(tmp_path, collectors, monkeypatch=None, fake_bin=None):
    if fake_bin is not None:
        monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    writer = BundleWriter(tmp_path / "bundle", host="node-a", command_line=["test"])
    run_collectors(writer, collectors)
    bundle = Bundle.open(writer.finish())
    assert verify(bundle.root).ok
    return bundle, {c.name: c for c in bundle.collectors}


def test_bmc_collectors_each_on_its_own_terms(tmp_path, monkeypatch):
    fake_bin = tmp_path / "bin"
    pidfile = tmp_path / "sleep.pid"
    # one fake ipmitool answering per sub-command: SEL entries, a failing chassis read, a hung sensor read
    _tool(fake_bin, "ipmitool", f"""case "$1 $2" in
  "sel elist") echo '  1a | 03/15/2025 | 02:11:58 | Power Supply PS2 Status | Power Supply AC lost | Asserted'
               echo "args: $*" >&2 ;;
  "sel time") echo '03/15/2025 02:14:07' ;;
  "chassis status") echo 'Get Chassis Power Status failed: Invalid command' >&2; exit 1 ;;
  "sensor ") sleep 60 & echo $! > {pidfile}; wait ;;
esac
""")
    collectors = bmc.bmc_collectors(sel_entries=50)
    next(c for c in collectors if c.name == "ipmitool-sensor").timeout_s = 1.5
    bundle, records = _run(tmp_path, collectors, monkeypatch, fake_bin)
    assert records["ipmitool-sel"].status == "ok"
    assert (bundle.root / "ipmi" / "sel-elist.txt.stderr").read_text() == "args: sel elist last 50\n"
    events = ipmi_sel.parse((bundle.root / "ipmi" / "sel-elist.txt").read_text()).records
    assert [e.is_power_loss for e in events] == [True]
    assert records["ipmitool-sel-time"].status == "ok"
    assert records["ipmitool-chassis"].status == "failed" and "Invalid command" in records["ipmitool-chassis"].reason
    assert records["ipmitool-sensor"].status == "timeout" and "within 1.5 s" in records["ipmitool-sensor"].reason
    assert process_gone(int(pidfile.read_text())), "the hung ipmitool's child is killed with its group"


def test_bmc_collectors_without_a_bmc_or_without_ipmitool(tmp_path, monkeypatch):
    fake_bin = tmp_path / "bin"
    _tool(fake_bin, "ipmitool", "echo 'Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: "
                                "No such file or directory' >&2\nexit 1\n")
    _, records = _run(tmp_path, bmc.bmc_collectors(), monkeypatch, fake_bin)
    for name in ("ipmitool-sel", "ipmitool-sel-time", "ipmitool-chassis", "ipmitool-sensor"):
        assert records[name].status == "unavailable" and records[name].reason.startswith("no IPMI device"), records[name]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    _, records = _run(tmp_path / "again", bmc.bmc_collectors())
    assert records["ipmitool-sel"].status == "unavailable" and "not found on PATH" in records["ipmitool-sel"].reason


def test_filesystems_of_shm_data_and_a_missing_checkpoint_folder(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    missing = tmp_path / "no-ckpt"
    bundle, records = _run(tmp_path, [filesystems_collector([data, missing])])
    rec = records["filesystems"]
    assert rec.status == "failed" and str(missing) in rec.reason, "the missing path is named"
    rows = df.parse((bundle.root / "filesystems" / "df-h.txt").read_text()).records
    assert "/dev/shm" in {r.mount for r in rows}, "the paths that exist are still measured"
    blocks = statfs.parse((bundle.root / "filesystems" / "stat-f.txt").read_text()).records
    assert [b.path for b in blocks] == ["/dev/shm", str(data)]


def test_bug_report_success_partial_hang_and_absent(tmp_path, monkeypatch):
    fake_bin = tmp_path / "bin"
    # the real script's interface: --output-file FILE, writes FILE.gz
    _tool(fake_bin, bugreport.SCRIPT, 'echo "nvidia-bug-report.sh will now collect information"\n'
                                      'echo "Start of NVIDIA bug report log file" > "$2"\ngzip "$2"\n')
    bundle, records = _run(tmp_path / "ok", [bugreport.bug_report_collector()], monkeypatch, fake_bin)
    assert records["nvidia-bug-report"].status == "ok"
    with gzip.open(bundle.root / "vendor" / "nvidia-bug-report.log.gz", "rt") as handle:
        assert handle.read().startswith("Start of NVIDIA bug report log file")

    pidfile = tmp_path / "sleep.pid"
    _tool(fake_bin, bugreport.SCRIPT, f'echo "Start of NVIDIA bug report log file" > "$2"\n'
                                      f"sleep 60 & echo $! > {pidfile}\nwait\n")
    hung = bugreport.bug_report_collector()
    hung.timeout_s = 1.5
    bundle, records = _run(tmp_path / "hung", [hung], monkeypatch)
    rec = records["nvidia-bug-report"]
    assert rec.status == "timeout" and "kept the partial nvidia-bug-report.log" in rec.reason
    assert (bundle.root / "vendor" / "nvidia-bug-report.log").read_text().startswith("Start of NVIDIA")
    assert process_gone(int(pidfile.read_text()))

    _tool(fake_bin, bugreport.SCRIPT, "exit 0\n")
    _, records = _run(tmp_path / "empty", [bugreport.bug_report_collector()], monkeypatch)
    assert records["nvidia-bug-report"].status == "failed" and "wrote no" in records["nvidia-bug-report"].reason

    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    _, records = _run(tmp_path / "absent", [bugreport.bug_report_collector()])
    assert records["nvidia-bug-report"].status == "unavailable"


def test_cli_bug_report_is_opt_in_and_data_is_measured(tmp_path):
    fake_bin = tmp_path / "bin"
    _tool(fake_bin, bugreport.SCRIPT, "sleep 60\n")
    env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"}
    out = tmp_path / "b"
    done = subprocess.run([sys.executable, "-m", "gpulib", "collect", "--out", str(out), "--data", str(tmp_path),
                           "--only", "filesystems", "ip-link"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert {c.name for c in Bundle.open(out).collectors} == {"filesystems", "ip-link"}
    assert str(tmp_path) in (out / "filesystems" / "stat-f.txt").read_text()
    out2 = tmp_path / "b2"
    done = subprocess.run([sys.executable, "-m", "gpulib", "collect", "--out", str(out2), "--bug-report",
                           "--only", "nvidia-bug-report", "--collector-timeout", "nvidia-bug-report=2"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    rec = Bundle.open(out2).collectors[0]
    assert (rec.name, rec.status) == ("nvidia-bug-report", "timeout") and "nvidia-bug-report" in done.stdout
