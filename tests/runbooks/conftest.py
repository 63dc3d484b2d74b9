"""Fixtures for the runbook engine: runbook files over the scenario notebooks in ./notebooks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"


@pytest.fixture
def write_runbook(tmp_path):
    """``write_runbook(steps, **top)`` -> path of a runbook YAML over the scenario notebooks."""

    def write(steps, name="scenario", **top) -> Path:
        doc = {"description": "engine test", "notebook_dir": str(NOTEBOOKS),
               "timeouts": {"start_s": 60, "cell_s": 60}, **top, "steps": steps}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path

    return write


@pytest.fixture(scope="session")
def mixed_run(tmp_path_factory):
    """One real run shared by the archive and report tests: a healthy step with a figure, a step
    with two warnings and a step that raises, the last two in parallel. Exit code 3."""
    from gpulib.runbooks import run_runbook

    base = tmp_path_factory.mktemp("mixed")
    doc = {"notebook_dir": str(NOTEBOOKS), "timeouts": {"start_s": 60, "cell_s": 60},
           "steps": ["ok", {"parallel": ["writes_findings", "raises"]}]}
    (base / "mixed.yaml").write_text(yaml.safe_dump(doc))
    return run_runbook(str(base / "mixed.yaml"), archive_root=base / "archive", jobs=2, cwd=base)
