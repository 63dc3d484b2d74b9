"""Every incident case of the shared corpus, diagnosed through the CLI, against its answer.

Cases are discovered by glob, so a new ``case-NN-*`` folder is tested without touching this file.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpulib.cli import main
from tests.conftest import INCIDENTS, REPO

CASES = sorted(p.name for p in INCIDENTS.glob("case-*") if (p / "expected.json").is_file()) or ["<no corpus>"]
FIELDS = ("interruption", "category", "host", "gpu_index", "gpu_pci", "rank", "first_event_utc", "resume_from")


def answer(doc: dict) -> dict:
    """The fields of expected.json, read from a gpulib.diagnosis/1 document."""
    rc = doc["root_cause"] or {}
    return {
        "interruption": doc["verdict"]["interruption"], "category": doc["verdict"]["category"],
        "host": rc.get("host"), "gpu_index": rc.get("gpu_index"), "gpu_pci": rc.get("gpu_pci"),
        "rank": rc.get("rank"), "first_event_utc": rc.get("time"), "resume_from": doc["checkpoints"]["resume_from"],
    }


def expected_of(case: str) -> dict:
    exp = json.loads((INCIDENTS / case / "expected.json").read_text())
    return {k: exp.get(k) for k in FIELDS}


@pytest.mark.parametrize("case", CASES)
def test_case_in_process(case, incidents, capsys):
    code = main(["diagnose", str(incidents / case / "input"), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpulib.diagnosis/1"
    assert answer(doc) == expected_of(case)
    assert code == {"none": 0, "soft": 1, "hard": 3}[doc["verdict"]["interruption"]]
    if doc["root_cause"]:
        assert doc["root_cause"]["evidence"], "a root cause must quote its lines"
        cascade = [f for f in doc["findings"] if f["caused_by"] == doc["root_cause"]["finding"]]
        assert all(f["id"] != doc["root_cause"]["finding"] for f in cascade)


@pytest.mark.parametrize("case", CASES)
def test_case_via_subprocess(case, incidents):
    proc = subprocess.run([sys.executable, "-m", "gpulib", "diagnose", str(incidents / case / "input"),
                           "--format", "json"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.stderr == "" or "Traceback" not in proc.stderr
    assert answer(json.loads(proc.stdout)) == expected_of(case)


def test_timeouts_are_never_the_root_cause(incidents):
    """In every failed case the watchdog-timeout finding is discounted as cascade."""
    from gpulib.diagnose import diagnose
    for case in CASES:
        d = diagnose([incidents / case / "input"])
        for f in d.findings:
            if f.id.startswith("nccl-timeout"):
                assert d.root_cause is not None and f is not d.root_cause and f.caused_by == d.root_cause.id


@pytest.mark.parametrize("case", CASES)
def test_no_loose_alarms(case, incidents):
    """Every warning or worse in a corpus case is the root cause or chained to it: no false alarms
    (the healthy control has none at all)."""
    from gpulib.diagnose import diagnose
    d = diagnose([incidents / case / "input"])
    loose = [f.title for f in d.findings
             if f is not d.root_cause and not f.caused_by and f.severity in ("critical", "error", "warning")]
    assert loose == []
