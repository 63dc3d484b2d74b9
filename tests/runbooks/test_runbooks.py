"""The shipped runbooks (runbooks/*.yaml) run headless: incident on the bundled example,
preflight and health-report on recorded incidents (read in place).

Slow by nature (one kernel per notebook), so each runbook runs once per session and every
assertion reads that one archive.
"""

from __future__ import annotations

import json

import pytest

from gpulib.cli import main
from gpulib.runbooks import run_runbook
from gpulib.runbooks.archive import ArchivedRun
from gpulib.runbooks.spec import runbook_steps
from tests.conftest import REPO

pytestmark = pytest.mark.notebook


@pytest.fixture(scope="module")
def incident_run(tmp_path_factory):
    """`make demo`'s run: the bundled example incident (Xid 79 on gx-a800-102, GPU 0000:4f:00.0)."""
    evidence = REPO / "examples" / "incident-gpu-fell-off-bus"
    return run_runbook("incident", values={"evidence": str(evidence)},
                       archive_root=tmp_path_factory.mktemp("incident"), cwd=REPO)


def test_incident_runs_every_step_and_names_the_culprit(incident_run):
    failed = {s.id: s.error for s in incident_run.steps if s.status != "ok"}
    assert failed == {}
    assert [s.id for s in incident_run.steps] == runbook_steps("incident")  # tests/test_steps.py: which those are
    fell_off = [f for f in incident_run.findings
                if f["category"] == "gpu_fell_off_bus" and f["severity"] == "critical"]
    assert {f.get("host") for f in fell_off} == {"gx-a800-102"}
    assert {f.get("gpu_pci") for f in fell_off if f.get("xid") == 79} == {"0000:4f:00.0"}
    assert incident_run.exit_code == 3  # critical findings: no-go


def test_incident_archive_is_complete_and_offline(incident_run):
    run = ArchivedRun.open(incident_run.path)
    assert run.verify().ok
    assert sorted(p.name for p in (incident_run.path / "notebooks").iterdir()) == [
        f"{s.id}.ipynb" for s in incident_run.steps]
    report = (incident_run.path / "report.html").read_text(encoding="utf-8")
    assert report.count("* plotly.js v") == 1 and "<script src" not in report
    assert report.count('class="plotly-graph-div"') >= 3  # Xid events, thermal, data loading ...
    findings = json.loads((incident_run.path / "findings.json").read_text())["findings"]
    assert {f["step"] for f in findings} <= {s.id for s in incident_run.steps}


def test_archived_notebooks_hold_figures_as_json_without_plotly_js(incident_run):
    """The report draws the figures; each archived notebook keeps only their JSON (no 4.8 MB copy
    of plotly.js per step), and every step read the evidence from the runner's one reading."""
    for path in (incident_run.path / "notebooks").iterdir():
        text = path.read_text(encoding="utf-8")
        assert "window.PlotlyConfig" not in text and len(text) < 1_000_000, path.name
    xid = (incident_run.path / "notebooks" / "01_kernel_xid.ipynb").read_text(encoding="utf-8")
    assert "application/vnd.plotly.v1+json" in xid
    manifest = json.loads((incident_run.path / "manifest.json").read_text())
    assert manifest["kernel"]["environment"] == {"GPULIB_FIGURES_AS_JSON": "1", "GPULIB_EVIDENCE_CACHE": "<run scratch>"}


def test_preflight_is_no_go_on_a_gpu_with_uncorrectable_ecc(incidents, tmp_path):
    evidence = incidents / "case-06-ecc-dbe-truncated-ckpt" / "input"
    outcome = run_runbook("preflight", values={"evidence": str(evidence)}, cli={"run_fabric_test": "false"},
                          archive_root=tmp_path, cwd=REPO)
    verdict = [f for f in outcome.findings if f["id"] == "preflight-verdict"]
    assert [f["severity"] for f in verdict] == ["critical"] and verdict[0]["title"].startswith("NO-GO")
    assert outcome.exit_code == 3


@pytest.fixture(scope="module")
def health_archive(incidents, tmp_path_factory):
    """Two nightly health reports into one archive: a healthy fleet, then a node with ECC errors."""
    root = tmp_path_factory.mktemp("health")
    runs = [run_runbook("health-report", values={"evidence": str(incidents / case / "input")},
                        archive_root=root, cwd=REPO)
            for case in ("case-07-healthy-run", "case-06-ecc-dbe-truncated-ckpt")]
    return root, runs


def test_health_report_of_a_healthy_fleet(health_archive):
    healthy = health_archive[1][0]
    assert [s.status for s in healthy.steps] == ["ok"]
    assert [f["title"] for f in healthy.findings if f["severity"] in ("critical", "error")] == []
    assert healthy.exit_code == 0


def test_archive_diff_of_two_nights_names_the_new_xids(health_archive, capsys):
    root, (healthy, ecc) = health_archive
    assert ecc.exit_code == 3
    # the two "nights" are two different corpora (different hosts): refused without --force ...
    assert main(["archive", "diff", "health-report~1", "health-report~0", "--archive", str(root)]) == 2
    err = capsys.readouterr().err
    assert "different evidence of different hosts" in err and "case-07-healthy-run" in err and "--force" in err
    # ... and compared with a warning on top with it
    assert main(["archive", "diff", "health-report~1", "health-report~0", "--archive", str(root), "--force"]) == 1
    captured = capsys.readouterr()
    out = captured.out
    assert out.startswith("WARNING: the runs read different evidence") and "WARNING" in captured.err
    new_xids = out.split("new Xids:")[1].split(":\n")[0]
    assert "Xid 48 on" in new_xids and "h100-sxm-c05" in new_xids  # the DBE on GPU 0000:bb:00.0
    assert main(["archive", "diff", "health-report~0", "health-report~0", "--archive", str(root)]) == 0
