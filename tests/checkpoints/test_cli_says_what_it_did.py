"""`ckpt verify --deep` and `ckpt latest [--deep]` say what they checked, and `ckpt latest` says
when it searched below the folders it was given (a broad folder holds other jobs' checkpoints)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulib.cli import main
from tests.checkpoints.conftest import training_state

torch = pytest.importorskip("torch")


def _save(step: int, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(training_state(step), path)
    return path


def test_verify_deep_counts_the_crcs(tmp_path, capsys):
    files = [_save(100, tmp_path / "step-100.pt"), _save(200, tmp_path / "step-200.pt")]
    assert main(["ckpt", "verify", "--deep", *map(str, files)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    members = sum(len(__import__("zipfile").ZipFile(f).namelist()) for f in files)
    assert last == f"deep: CRC-32 of {members} of {members} zip members checked in 2 file(s)"


def test_latest_deep_says_how_many_crcs_it_checked(tmp_path, capsys):
    chosen = _save(200, tmp_path / "step-200.pt")
    _save(100, tmp_path / "step-100.pt")
    assert main(["ckpt", "latest", "--deep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    members = len(__import__("zipfile").ZipFile(chosen).namelist())
    assert f"checked: step-200.pt: CRC-32 of {members} of {members} zip members checked in 1 file(s) - passed" in out
    assert "searched:" not in out  # the checkpoints lie in the folder given: nothing to say


def test_latest_without_deep_says_crcs_were_not_checked(tmp_path, capsys):
    _save(200, tmp_path / "step-200.pt")
    assert main(["ckpt", "latest", "--format", "json", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["checked"] == ["step-200.pt: structure, sizes and pickle safety of every file; "
                              "CRC-32 not checked (--deep reads every byte)"]
    assert doc["searched"] == []


def test_latest_says_when_it_recursed_and_into_how_many_series(tmp_path, capsys):
    _save(200, tmp_path / "job-a" / "ckpt" / "step-200.pt")
    _save(900, tmp_path / "job-b" / "run" / "checkpoints" / "step-900.pt")
    assert main(["ckpt", "latest", str(tmp_path)]) == 0
    searched = [line for line in capsys.readouterr().out.splitlines() if line.startswith("searched:")]
    assert searched == [
        f"searched: {tmp_path}: looked into its sub-folders (up to 5 levels): 2 candidate(s), found up to 3 "
        "level(s) down, in 2 series: job-a/ckpt, job-b/run/checkpoints; the newest step across ALL these series "
        "is chosen - if they are different jobs, pass this job's checkpoint folder instead"]
