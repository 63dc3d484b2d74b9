"""The wheel runs the product: built from this checkout, installed into a fresh venv outside it,
and driven from an empty folder, with no checkout on any path.

What an editable install hides: code that finds ``notebooks/``, ``runbooks/`` or ``examples/``
next to the source tree, and data files missing from ``package-data``. The test therefore
builds the wheel from a copy of the sources, installs it (no dependencies, no index) into a new
venv whose ``sys.path`` reaches this environment's installed dependencies through a ``.pth`` file
(the site folder itself, not its ``.pth`` files: the editable gpulib's path is never added), and
runs ``gpulib run incident``, ``gpulib drill``, ``gpulib diagnose`` and one notebook copied out
by ``gpulib notebooks`` in a kernel of that venv. Offline; about a minute.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib import exit_codes
from gpulib.resources import FOLDERS
from gpulib.vocabulary import SEVERITIES
from tests.conftest import REPO

pytestmark = pytest.mark.notebook

#: What a wheel is built from (the rest of the checkout - tests, benchmarks, docs - is not shipped).
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "gpulib", *FOLDERS)
EXAMPLE = "incident-gpu-fell-off-bus"


def _run(argv: list, env: dict, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _must(done: subprocess.CompletedProcess, *codes: int) -> subprocess.CompletedProcess:
    assert done.returncode in (codes or (0,)), f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A venv with only the wheel installed, its environment, and an empty working folder."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc",
                                                                                 ".ipynb_checkpoints"))
        else:
            shutil.copy2(REPO / name, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPULIB_RUNBOOKS", "GPULIB_ARCHIVE",
                                                            "VIRTUAL_ENV", "PYTHONHOME")}
    _must(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                "-w", base / "dist", src], env, base))
    [wheel] = (base / "dist").glob("gpulib-*.whl")
    venv = base / "venv"
    _must(_run([sys.executable, "-m", "venv", "--without-pip", venv], env, base))
    python = venv / "bin" / "python"
    purelib = Path(_must(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              env, base)).stdout.strip())
    # this environment's dependencies (and pip) as plain path entries: their .pth files - the
    # editable gpulib's among them - are not read, and the venv's own site-packages comes first
    (purelib / "zz_dependencies.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    _must(_run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel], env, base))
    jupyter = base / "jupyter"
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[var] = str(jupyter / var.lower())
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    _must(_run([python, "-m", "ipykernel", "install", "--prefix", venv, "--name", "python3"], env, base))
    empty = base / "work"
    empty.mkdir()
    return {"venv": venv, "python": python, "gpulib": venv / "bin" / "gpulib", "env": env, "cwd": empty,
            "purelib": purelib}


def test_the_wheel_is_what_runs(installed):
    """The gpulib imported in the venv is the wheel's, and it carries the shipped folders."""
    done = _must(_run([installed["python"], "-c", "import gpulib, gpulib.resources as r; "
                       "print(gpulib.__file__); print(r.data_root())"], installed["env"], installed["cwd"]))
    module, root = done.stdout.split()
    assert Path(module).is_relative_to(installed["purelib"]) and not Path(module).is_relative_to(REPO)
    assert Path(root) == installed["purelib"] / "gpulib" / "_data"
    for folder in FOLDERS:
        shipped = sorted(p.relative_to(REPO / folder) for p in (REPO / folder).rglob("*")
                         if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts)
        assert sorted(p.relative_to(Path(root) / folder) for p in (Path(root) / folder).rglob("*") if p.is_file()) \
            == shipped, folder


def test_run_incident_drill_and_diagnose_from_an_empty_folder(installed):
    cwd, env, gpulib = installed["cwd"], installed["env"], installed["gpulib"]
    evidence = cwd / "evidence"
    shutil.copytree(REPO / "examples" / EXAMPLE, evidence)
    answer = json.loads((REPO / "examples" / f"{EXAMPLE}.answer.json").read_text())

    diagnosed = _must(_run([gpulib, "diagnose", "--format", "json", evidence], env, cwd), exit_codes.HARD)
    assert json.loads(diagnosed.stdout)["root_cause"]["category"] == answer["category"]

    ran = _must(_run([gpulib, "run", "incident", "--evidence", evidence, "--archive", cwd / "archive"], env, cwd),
                exit_codes.HARD)
    [report] = (cwd / "archive").rglob("report.html")
    assert answer["category"] in report.read_text(encoding="utf-8"), ran.stdout

    _must(_run([gpulib, "drill", "--out", cwd / "drill"], env, cwd))
    assert (cwd / "drill" / "00_triage-drill.ipynb").is_file() and (cwd / "drill" / "evidence").is_dir()


def test_a_copied_out_notebook_runs_in_a_kernel_of_the_venv(installed):
    cwd, env = installed["cwd"], installed["env"]
    _must(_run([installed["gpulib"], "notebooks", cwd / "notebooks"], env, cwd))
    notebook = cwd / "notebooks" / "00_triage.ipynb"
    # the notebook's own default evidence: a bundled example, found through gpulib.resources
    _must(_run([installed["python"], "-m", "papermill", notebook, cwd / "notebooks" / "00_triage.out.ipynb",
                "-k", "python3", "-p", "interactive", "False", "--cwd", cwd / "notebooks"], env, cwd))
    findings = json.loads((cwd / "notebooks" / "findings-00.json").read_text())
    assert findings and {f["severity"] for f in findings} <= set(SEVERITIES)
