"""Shared fixtures: where the recorded corpus is, and isolated Jupyter directories."""

from __future__ import annotations

import contextlib
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


@pytest.fixture
def run_without_root_read():
    """Run Python in a child that cannot read files it has no permission for.

    The suite runs as root (CI does), and root reads chmod-000 files, so "permission denied"
    can only be exercised in a child whose capabilities to bypass file permissions
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) are dropped with util-linux ``setpriv``. As a normal
    user the child simply runs as that user.
    """
    import shutil
    import subprocess
    import sys

    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            pytest.skip("running as root without util-linux setpriv: cannot drop the permission-bypass capabilities")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120)

    return run


@contextlib.contextmanager
def locked_folder(path: Path, files: dict[str, str]):
    """A folder holding ``files`` whose listing is refused (mode 000) while the block runs."""
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    path.chmod(0)
    try:
        yield path
    finally:
        path.chmod(0o755)
