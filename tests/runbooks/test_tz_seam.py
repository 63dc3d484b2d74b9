"""``--tz`` places zone-less times the same way in the CLI, the notebooks and the runbook's report.

The evidence is a ``dmesg -T`` capture (local wall-clock times, no zone) of a GPU that fell off the
bus. Read as UTC the Xid is at 03:12:44Z; read in New York (EDT, UTC-4, in March 2026) it is at
07:12:44Z. Every face must say the same one.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from gpulib.notebook.tables import open_evidence
from gpulib.runbooks import run_runbook
from tests.conftest import REPO

ZONE = "America/New_York"
AS_UTC, IN_ZONE = "2026-03-10T03:12:44Z", "2026-03-10T07:12:44Z"
DMESG_T = (
    "[Tue Mar 10 03:12:40 2026] pcieport 0000:4e:00.0: AER: Uncorrected (Fatal) error received: 0000:4f:00.0\n"
    "[Tue Mar 10 03:12:44 2026] NVRM: Xid (PCI:0000:4f:00): 79, pid=2211, name=python, GPU has fallen off the bus.\n"
    "[Tue Mar 10 03:12:44 2026] NVRM: GPU 0000:4f:00.0: GPU has fallen off the bus.\n"
)


@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    root = tmp_path_factory.mktemp("tz") / "incident"
    (root / "tzhost-01").mkdir(parents=True)
    (root / "tzhost-01" / "dmesg-T.txt").write_text(DMESG_T)
    return root


def _cli_root_time(evidence, *tz) -> str:
    done = subprocess.run([sys.executable, "-m", "gpulib", "diagnose", "--format", "json", *tz, str(evidence)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    return json.loads(done.stdout)["root_cause"]["time"]


def _xid_time(findings: list[dict]) -> str:
    [time] = {f["time"] for f in findings if f["id"].startswith("xid79")}
    return time


def test_the_cli_reads_the_zone(evidence):
    assert _cli_root_time(evidence) == AS_UTC
    assert _cli_root_time(evidence, "--tz", ZONE) == IN_ZONE


def test_the_notebook_tables_read_the_zone(evidence, monkeypatch):
    ev = open_evidence(evidence, tz=ZONE)
    assert ev.diagnosis["root_cause"]["time"] == IN_ZONE
    assert ev.diagnosis_at(temp_limit_c=80.0)["root_cause"]["time"] == IN_ZONE  # re-judged in the same zone
    assert ev.kernel_events()["time"].min().isoformat().replace("+00:00", "Z") == "2026-03-10T07:12:40Z"
    monkeypatch.setenv("GPULIB_TZ", ZONE)  # what `gpulib run --tz` sets in its kernels
    assert open_evidence(evidence).diagnosis["root_cause"]["time"] == IN_ZONE


def test_the_runbook_steps_and_report_read_the_zone(evidence, tmp_path):
    """Two steps on one evidence: the runner's evidence cache is read in the zone too."""
    book = tmp_path / "two.yaml"
    book.write_text(yaml.safe_dump({"description": "tz seam", "notebook_dir": str(REPO / "notebooks"),
                                    "steps": [{"parallel": ["00_triage", "01_kernel_xid"]}]}))
    outcome = run_runbook(str(book), values={"evidence": str(evidence)}, archive_root=tmp_path / "archive",
                          jobs=2, cwd=tmp_path, tz=ZONE)
    assert [s.status for s in outcome.steps] == ["ok", "ok"], [s.error for s in outcome.steps]
    assert _xid_time(outcome.findings) == IN_ZONE
    manifest = json.loads((outcome.path / "manifest.json").read_text())
    assert manifest["kernel"]["environment"]["GPULIB_TZ"] == ZONE
    report = outcome.report.read_text(encoding="utf-8")
    assert IN_ZONE in report and AS_UTC not in report
