"""Browser fixtures: one Chromium per module, a fresh page per test, one JupyterLab per module."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gpulib.notebook.tables import DEFAULT_EVIDENCE
from tests.browser.chromium import VIEWPORT, launched
from tests.browser.lab import JupyterLab
from tests.conftest import REPO

NOTEBOOKS = REPO / "notebooks"
#: The bundled example incident (the notebooks' default evidence) and what its README says a
#: correct diagnosis shows.
EXAMPLE = REPO / DEFAULT_EVIDENCE
EXAMPLE_ANSWER = {"interruption": "HARD", "category": "gpu_fell_off_bus", "host": "gx-a800-102", "gpu": "0000:4f:00.0 (GPU 2)"}


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


@pytest.fixture
def fresh_kernels(lab):
    """Shut down the kernels a test's notebooks started, so they do not pile up in the server."""
    yield
    lab.shutdown_kernels()


def set_parameters(lab: JupyterLab, name: str, save_as: str | None = None, **values) -> str:
    """Copy notebook ``name`` from ``notebooks/`` into the server root as ``save_as`` with some
    parameters edited (e.g. ``evidence`` pointed at an incident), as an engineer does before
    running it; returns the path relative to the server root. Each test uses its own file name:
    JupyterLab reattaches a notebook path to its running kernel, with the previous test's state."""
    nb = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    [cell] = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    source = "".join(cell["source"])
    for key, value in values.items():
        value = str(value) if isinstance(value, Path) else value
        source, count = re.subn(rf"^({key}: \w+ = ).*$", lambda m, v=value: f"{m[1]}{v!r}  # set by the test",
                                source, flags=re.MULTILINE)
        assert count == 1, f"{name}: no `{key}: <type> = ...` line in the parameters cell:\n{source}"
    cell["source"] = source
    target = save_as or name
    (lab.root / target).write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return target
