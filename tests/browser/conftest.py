"""Browser fixtures: one Chromium per module, a fresh page per test, one JupyterLab per module."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.browser.chromium import VIEWPORT, launched
from tests.browser.lab import JupyterLab
from tests.conftest import REPO

NOTEBOOKS = REPO / "notebooks"


@pytest.fixture(scope="module")
def browser():
    with launched() as chromium:
        yield chromium


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(30_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a temporary copy of ``notebooks/`` (the checkout stays untouched)."""
    base = tmp_path_factory.mktemp("lab")
    root, state = base / "root", base / "state"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "findings-*.json"))
    state.mkdir()
    server = JupyterLab(root, state).start()
    yield server
    server.stop()


def set_evidence(lab: JupyterLab, name: str, evidence: Path) -> str:
    """Point the copy of notebook ``name`` at ``evidence`` by editing its parameters cell, as an
    engineer does before running it; returns the notebook's path relative to the server root."""
    path = lab.root / name
    nb = json.loads(path.read_text(encoding="utf-8"))
    [cell] = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    source = "".join(cell["source"])
    edited, count = re.subn(r"^evidence: str = .*$", f"evidence: str = {str(evidence)!r}  # set by the browser test",
                            source, flags=re.MULTILINE)
    assert count == 1, f"{name}: no `evidence: str = ...` line in the parameters cell:\n{source}"
    cell["source"] = edited
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return name
