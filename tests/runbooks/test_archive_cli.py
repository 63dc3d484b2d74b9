"""`gpulib archive list|show|diff` as an engineer reads them: a header, the evidence each run read,
a loud word (or a refusal) before comparing runs that read different evidence, and no traceback
into a closed pipe. Archives are written with the real ArchiveWriter; no notebook runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpulib import exit_codes
from gpulib.cli import main
from gpulib.runbooks.archive import ArchivedRun, ArchiveWriter
from gpulib.runbooks.provenance import compare_evidence
from tests.conftest import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def xid(host: str, code: int = 79) -> dict:
    return {"step": "01_kernel_xid", "id": f"xid-{code}-{host}", "severity": "critical", "category": "gpu_fell_off_bus",
            "title": f"Xid {code} on {host}", "host": host, "xid": code, "pci_bus_id": "0000:4f:00.0"}


def archived(root, evidence: str | None, findings: list[dict], runbook: str = "incident",
             **manifest) -> ArchivedRun:
    writer = ArchiveWriter(root, runbook)
    writer.write_json("findings.json", {"format": "gpulib.runbook-findings/1", "findings": findings})
    steps = [{"id": "00_triage", "status": "ok", "duration_s": 1.0, "findings": len(findings),
              "parameters": {"interactive": False, **({"evidence": evidence} if evidence else {})}}]
    path = writer.finish({"format": "gpulib.runbook-run/1", "runbook": runbook, "started_at": writer.started.isoformat(),
                          "started_unix_s": writer.started.timestamp(), "exit_code": 3, "steps": steps,
                          "findings": {"critical": len(findings)},
                          "parameters": {"values": {"evidence": evidence} if evidence else {}}, **manifest})
    return ArchivedRun.open(path)


def test_list_has_a_header_and_the_evidence_each_run_read(tmp_path, capsys):
    archived(tmp_path, "/shared/inc-42", [xid("node-b")])
    archived(tmp_path, None, [], runbook="preflight")
    assert main(["archive", "list", "--archive", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RUNBOOK", "RUN", "EXIT", "FINDINGS", "EVIDENCE"]
    assert lines[1].startswith("incident ") and lines[1].endswith("  /shared/inc-42") and "critical=1" in lines[1]
    assert lines[2].startswith("preflight") and lines[2].endswith("(live capture)")
    assert lines[0].index("EVIDENCE") == lines[1].index("/shared/inc-42")  # columns line up


def test_show_names_the_evidence(tmp_path, capsys):
    run = archived(tmp_path, "/shared/inc-42", [xid("node-b")])
    assert main(["archive", "show", str(run.path), "--archive", str(tmp_path)]) == 0
    assert "evidence: /shared/inc-42" in capsys.readouterr().out


def test_show_opens_with_the_headline_and_lists_each_event_once(tmp_path, capsys):
    """The Xid 79 that steps 00, 01 and 06 each recorded is one line naming the three steps."""
    head = ["HARD failure - gpu_fell_off_bus", "  culprit: host node-b, 0000:4f:00.0 (GPU 2), rank 10",
            "  first action: power-cycle node-b", "  resume from: ckpt/step_900"]
    same = [{**xid("node-b"), "step": step} for step in ("00_triage", "01_kernel_xid", "06_driver_cuda_ecc_topology")]
    cascade = {"step": "00_triage", "id": "nccl-watchdog", "severity": "error", "category": "network_fabric",
               "title": "NCCL watchdog timeout on 15 rank(s)", "caused_by": "xid-79-node-b"}
    run = archived(tmp_path, "/shared/inc-42", [*same, cascade], headline=head, root_finding="xid-79-node-b")
    assert main(["archive", "show", str(run.path), "--archive", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == head
    rows = [line for line in out if "Xid 79" in line]
    assert rows == ["  [CRITICAL] gpu_fell_off_bus [root cause]: Xid 79 on node-b (host node-b, 0000:4f:00.0)  - step(s) "
                    "00_triage, 01_kernel_xid, 06_driver_cuda_ecc_topology"]
    assert any(line.startswith("  [ERROR] network_fabric [cascade]: NCCL watchdog") for line in out)
    assert "facts: 2, one line per event" in "\n".join(out)


def test_show_of_a_run_without_a_recorded_headline_says_so(tmp_path, capsys):
    run = archived(tmp_path, "/shared/inc-42", [xid("node-b")])
    assert main(["archive", "show", str(run.path), "--archive", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("(no headline recorded")


def test_diff_of_two_incidents_on_different_hosts_is_refused_without_force(tmp_path, capsys):
    archived(tmp_path, "/shared/inc-41", [xid("node-a")])
    archived(tmp_path, "/shared/inc-42", [xid("node-b")])
    args = ["archive", "diff", "incident~1", "incident~0", "--archive", str(tmp_path)]
    assert main(args) == exit_codes.USAGE
    err = capsys.readouterr().err
    assert "not compared" in err and "/shared/inc-41" in err and "/shared/inc-42" in err and "--force" in err
    assert main([*args, "--force"]) == exit_codes.SOFT  # Xid 79 on node-b is "new"
    captured = capsys.readouterr()
    assert captured.out.startswith("WARNING: the runs read different evidence of different hosts")
    assert "gpulib archive diff: WARNING" in captured.err
    assert main([*args, "--force", "--format", "json"]) == exit_codes.SOFT
    doc = json.loads(capsys.readouterr().out)
    assert doc["evidence"]["level"] == "refuse" and doc["evidence"]["a"] == ["/shared/inc-41"]


def test_diff_across_runbooks_is_refused_without_force(tmp_path, capsys):
    a = archived(tmp_path, "/shared/inc-42", [xid("node-b")])
    b = archived(tmp_path, "/shared/inc-42", [xid("node-b")], runbook="health-report")
    assert main(["archive", "diff", str(a.path), str(b.path), "--archive", str(tmp_path)]) == exit_codes.USAGE
    assert "different runbooks (incident vs health-report)" in capsys.readouterr().err


def test_two_captures_of_the_same_hosts_are_a_trend_with_a_note(tmp_path, capsys):
    archived(tmp_path, "/var/lib/gpulib/evidence/20260209T023000Z", [xid("node-b", 48)], runbook="health-report")
    archived(tmp_path, "/var/lib/gpulib/evidence/20260210T023000Z", [xid("node-b", 48), xid("node-b", 79)],
             runbook="health-report")
    assert main(["archive", "diff", "health-report~1", "health-report~0", "--archive", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "WARNING" not in captured.out + captured.err
    assert "different captures of the same hosts (node-b)" in captured.out and "Xid 79" in captured.out


def test_hosts_in_common_but_not_the_same_is_a_warning(tmp_path):
    a = archived(tmp_path, "/e/1", [xid("node-a"), xid("node-b")])
    b = archived(tmp_path, "/e/2", [xid("node-b")])
    check = compare_evidence(a, b)
    assert check.level == "warning" and check.hosts_a == ["node-a", "node-b"]
    same = compare_evidence(a, a)
    assert same.level == "same" and same.message is None


@pytest.mark.parametrize("argv", [["archive", "show", "{run}"], ["archive", "list"], ["archive", "diff", "{run}", "{run}"],
                                  ["ckpt", "latest", "--format", "json", "{empty}"]],
                         ids=lambda a: " ".join(a[:2]))
def test_closed_pipe_gives_no_traceback(tmp_path, argv):
    run = archived(tmp_path / "archive", "/shared/inc-42", [xid("node-b")])
    (tmp_path / "empty").mkdir()
    args = [a.format(run=run.path, empty=tmp_path / "empty") for a in argv]
    proc = subprocess.Popen([sys.executable, "-m", "gpulib", *args, *(["--archive", str(tmp_path / "archive")]
                                                                      if args[0] == "archive" else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == exit_codes.PIPE_CLOSED and err == ""
