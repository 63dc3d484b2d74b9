"""`gpulib run incident --evidence examples/<x>` in a terminal: the report's headline on top, for
every bundled example, and an exit status that says what `gpulib diagnose` says.

Over SSH at 03:00 there is no browser: the run must print the root cause itself, in the same
lines as the report and as `gpulib diagnose` (one function, :func:`headline_lines`), and
`gpulib archive show` must print them again later from the archive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from gpulib.diagnose.headline import headline_lines
from gpulib.runbooks.archive import list_runs
from tests.conftest import REPO

pytestmark = pytest.mark.notebook

EXAMPLES = sorted(p.name for p in (REPO / "examples").iterdir() if p.is_dir() and p.name.startswith("incident-"))
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def gpulib(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpulib", *args], capture_output=True, text=True, cwd=REPO,
                          env=ENV, timeout=600)


@cache
def diagnosed(example: str) -> tuple[int, dict]:
    proc = gpulib("diagnose", str(REPO / "examples" / example), "--format", "json")  # as `run` resolves it
    return proc.returncode, json.loads(proc.stdout)


@cache
def ran(example: str, archive: Path) -> subprocess.CompletedProcess:
    return gpulib("run", "incident", "--evidence", f"examples/{example}", "--archive", str(archive / example))


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("archive")


def test_six_examples_are_bundled():
    assert len(EXAMPLES) == 6, EXAMPLES


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_run_prints_the_diagnosis_headline_and_archive_show_repeats_it(example, archive):
    proc = ran(example, archive)
    assert proc.returncode in (0, 1, 3, 4), proc.stdout[-2000:] + proc.stderr[-2000:]
    _, diagnosis = diagnosed(example)
    head = headline_lines(diagnosis)
    printed = proc.stdout.splitlines()
    assert printed[:len(head)] == head, proc.stdout[:3000]
    assert head[0].startswith(("HARD", "SOFT", "NO interruption", "UNKNOWN"))
    culprit = diagnosis["root_cause"] or {}
    if culprit.get("gpu_pci"):  # the culprit GPU by PCI id with the index nvidia-smi showed at capture
        assert any(line.startswith("  culprit: ") and culprit["gpu_pci"] in line and "(GPU " in line for line in head)
    assert any(line.startswith("  first action: ") for line in head)
    assert any(line.startswith("  resume from: ") for line in head)
    [run] = list_runs(archive / example)
    shown = gpulib("archive", "show", str(run.path))
    assert shown.returncode == 0 and shown.stdout.splitlines()[:len(head)] == head


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_run_exits_as_the_diagnosis_decides(example, archive):
    """One verdict per incident: a soft root cause is not a no-go (exit 1), a hard one is (3)."""
    code, _ = diagnosed(example)
    assert ran(example, archive).returncode == code
