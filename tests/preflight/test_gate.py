"""The go / no-go gate below the faces: notebook 08 and the Slurm health check decide the same way,
and the Slurm hook runs without the notebook face."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpulib.notebook import steps
from gpulib.notebook.tables import open_evidence
from gpulib.preflight import gate
from gpulib.slurm.healthcheck import self_check
from tests.conftest import REPO

EXAMPLES = REPO / "examples"


@pytest.mark.parametrize("example", ["incident-gpu-fell-off-bus", "incident-thermal-straggler", "incident-cuda-oom"])
def test_slurm_and_notebook_08_reach_the_same_verdict_on_the_same_findings(example):
    ev = open_evidence(EXAMPLES / example)
    states = ev.gpu_states()
    notebook = steps.self_check(ev.diagnosis, states)
    slurm = self_check(EXAMPLES / example, None)
    assert [f.to_dict() for f in slurm.findings] == notebook
    assert slurm.verdict == steps.go_no_go(notebook)["verdict"]
    assert slurm.gpus_seen == steps.gpus_seen(states)


def test_gpu_fell_off_the_bus_is_no_go_with_the_bus_finding_first():
    check = self_check(EXAMPLES / "incident-gpu-fell-off-bus", None)
    assert check.verdict == "NO-GO" and check.cause and check.gpus_seen > 0
    assert any(f.category == "gpu_fell_off_bus" and f.severity == "critical" for f in check.findings)


def test_presence_against_the_expected_count():
    [missing] = gate.presence_findings(3, expected=4)
    assert (missing["id"], missing["severity"], missing["title"]) == ("gpu-count", "critical", "3 of 4 GPUs visible")
    assert gate.presence_findings(4, expected=4) == [] and gate.presence_findings(0, expected=0) == []
    [none] = gate.presence_findings(0)
    assert none["id"] == "no-gpu-visible" and gate.go_no_go([none])["verdict"] == "NO-GO"
    assert gate.presence_findings(1) == []


def test_warnings_alone_are_go():
    warning = gate.presence_findings(0)[0] | {"severity": "warning", "id": "w"}
    assert gate.go_no_go([warning])["verdict"] == "GO" and gate.go_no_go([])["verdict"] == "GO"


def test_gpus_seen_counts_each_gpu_of_each_host_once():
    snaps = [{"host": "n1", "index": 0, "pci_bus_id": "0000:1a:00.0"}, {"host": "n1", "index": 0},
             {"host": "n2", "index": 0}, {"host": "n2", "index": None, "pci_bus_id": "0000:3b:00.0"}]
    assert gate.gpus_seen(snaps) == 3


def test_the_slurm_health_check_never_imports_the_notebook_face():
    code = ("import json, sys; from pathlib import Path; from gpulib.slurm.healthcheck import self_check; "
            f"c = self_check(Path({str(EXAMPLES / 'incident-cuda-oom')!r}), None); "
            "print(json.dumps([c.verdict, sorted(m for m in sys.modules if m.startswith(('gpulib.notebook', "
            "'ipywidgets', 'plotly')))]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    verdict, face = json.loads(done.stdout.splitlines()[-1])
    assert verdict in ("GO", "NO-GO") and face == []
