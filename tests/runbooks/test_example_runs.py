"""One of the new example incidents end to end through `gpulib run incident` (the CLI, as a user
types it): every step completes, the steps name the answer, and notebook 07 has a checkpoint
folder to judge (the truncated save is rejected, the resume is from the newest complete one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpulib import exit_codes
from gpulib.runbooks.archive import ArchivedRun, list_runs
from tests.conftest import REPO

pytestmark = pytest.mark.notebook

EXAMPLE = REPO / "examples" / "incident-ecc-truncated-checkpoint"


def test_ecc_example_runs_cleanly_and_shows_the_resume_step(tmp_path):
    answer = json.loads((REPO / "examples" / f"{EXAMPLE.name}.answer.json").read_text())
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "gpulib", "run", "incident", "--evidence", str(EXAMPLE),
                           "--archive", str(tmp_path)], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert proc.returncode == exit_codes.HARD, proc.stdout[-2000:] + proc.stderr[-2000:]  # critical findings: no-go
    assert "runbook incident: 8/8 steps completed" in proc.stdout
    assert [line for line in proc.stderr.splitlines() if line.startswith("[")][-1].startswith("[8/8] ")
    [run] = list_runs(tmp_path)
    assert run.verify().ok and run.evidence == [str(EXAMPLE)]
    assert all(step["status"] == "ok" for step in run.manifest["steps"])
    findings = ArchivedRun.open(run.path).findings
    culprit = [f for f in findings if f.get("category") == answer["category"] and f.get("severity") == "critical"]
    assert {f.get("host") for f in culprit} == {answer["host"]}
    resume = [f for f in findings if f["step"] == "07_checkpoint_resume"]
    titles = " | ".join(f["title"] for f in resume)
    assert f"resume from {EXAMPLE / answer['resume_from']}" in titles, titles
    assert "step_003000.pt" in titles and "truncated" in titles, titles


def test_a_soft_incident_exits_as_its_diagnosis_does(tmp_path):
    """One incident, one verdict: the CUDA OOM example is soft for `gpulib diagnose` (exit 1), so the
    incident runbook exits 1 too, though its steps record the OOM finding as critical."""
    oom = REPO / "examples" / "incident-cuda-oom"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    diag = subprocess.run([sys.executable, "-m", "gpulib", "diagnose", str(oom)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)
    proc = subprocess.run([sys.executable, "-m", "gpulib", "run", "incident", "--evidence", str(oom),
                           "--archive", str(tmp_path)], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert diag.returncode == exit_codes.SOFT, diag.stdout[-2000:]
    assert proc.returncode == diag.returncode, proc.stdout[-2000:] + proc.stderr[-2000:]
    [run] = list_runs(tmp_path)
    assert run.manifest["exit_basis"] == "diagnosis" and run.manifest["blocking"] == []
