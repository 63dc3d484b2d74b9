"""`gpulib run preflight` checks THIS host (a live capture) unless --evidence names what to check."""

from __future__ import annotations

import json
import re
import shutil
import socket
from pathlib import Path

import pytest

from gpulib.evidence.bundle import Bundle
from gpulib.runbooks import run_runbook
from gpulib.runbooks.run import prepare
from tests.conftest import REPO

pytestmark = pytest.mark.notebook


def test_capture_live_by_default_and_not_with_evidence():
    _, plan = prepare("preflight")
    assert plan["08_preflight"]["capture_live"] is True
    _, plan = prepare("preflight", values={"evidence": "/some/bundle"})
    assert plan["08_preflight"]["capture_live"] is False
    _, plan = prepare("preflight", cli={"evidence": "/some/bundle", "capture_live": "true"})
    assert plan["08_preflight"]["capture_live"] is True  # an explicit -p still wins


def test_preflight_without_evidence_checks_this_host(tmp_path):
    outcome = run_runbook("preflight", cli={"run_fabric_test": "false"}, archive_root=tmp_path, cwd=REPO)
    assert [s.status for s in outcome.steps] == ["ok"]
    notebook = (outcome.path / "notebooks" / "08_preflight.ipynb").read_text(encoding="utf-8")
    captured = re.search(r"Captured this host into `([^`]+)`", notebook)
    assert captured, "the preflight did not capture this host"
    assert Bundle.open(Path(captured[1])).host == socket.gethostname()
    assert f"Evidence: `{captured[1]}` (evidence bundle" in notebook  # what was checked: not the bundled example
    if shutil.which("nvidia-smi") is None:  # this machine: no GPU can be seen, so no relaunch here
        ids = [f["id"] for f in outcome.findings]
        assert "no-gpu-visible" in ids
        verdict = next(f for f in outcome.findings if f["id"] == "preflight-verdict")
        assert verdict["title"].startswith("NO-GO") and outcome.exit_code == 3
    manifest = json.loads((outcome.path / "manifest.json").read_text())
    assert manifest["steps"][0]["parameters"]["capture_live"] is True
