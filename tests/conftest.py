"""Shared fixtures: where the recorded corpus is, and isolated Jupyter directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPULIB_SHARED", REPO.parent / "shared"))
RECORDED = SHARED / "corpus" / "recorded"
INCIDENTS = SHARED / "corpus" / "incidents"


@pytest.fixture(scope="session")
def recorded() -> Path:
    """The real recorded outputs (../shared/corpus/recorded); skipped when absent."""
    if not RECORDED.is_dir():
        pytest.skip(f"recorded corpus not found at {RECORDED} (clone with ../shared beside the repo)")
    return RECORDED


@pytest.fixture(scope="session")
def incidents() -> Path:
    if not INCIDENTS.is_dir():
        pytest.skip(f"incident corpus not found at {INCIDENTS} (clone with ../shared beside the repo)")
    return INCIDENTS


@pytest.fixture(autouse=True, scope="session")
def isolated_jupyter_dirs(tmp_path_factory):
    """Keep every test's Jupyter/IPython state out of the user's home."""
    base = tmp_path_factory.mktemp("jupyter-env")
    saved = {}
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        saved[var] = os.environ.get(var)
        path = base / var.lower()
        path.mkdir()
        os.environ[var] = str(path)
    yield base
    for var, value in saved.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
