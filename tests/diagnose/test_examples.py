"""Every bundled example incident (examples/) is diagnosed right: its answer lies beside the
folder, in examples/<name>.answer.json, and `gpulib diagnose` must find it from the evidence alone."""

from __future__ import annotations

import json

import pytest

from gpulib import exit_codes
from gpulib.cli import main
from tests.conftest import REPO

EXAMPLES = REPO / "examples"
ANSWERS = sorted(EXAMPLES.glob("*.answer.json"))
EXIT = {"hard": exit_codes.HARD, "soft": exit_codes.SOFT, "none": exit_codes.OK, "unknown": exit_codes.UNKNOWN}


def _name(answer) -> str:
    return answer.name.removesuffix(".answer.json")


def _diagnose(name: str, capsys) -> tuple[int, dict]:
    code = main(["diagnose", str(EXAMPLES / name), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_every_example_has_an_answer_and_every_answer_an_example():
    folders = {p.name for p in EXAMPLES.iterdir() if p.is_dir() and p.name.startswith("incident-")}
    assert folders == {_name(p) for p in ANSWERS} and len(folders) >= 5


@pytest.mark.parametrize("answer", ANSWERS, ids=_name)
def test_example_is_diagnosed_right(answer, capsys):
    want = json.loads(answer.read_text())
    code, doc = _diagnose(_name(answer), capsys)
    rc = doc["root_cause"]
    assert (doc["verdict"]["interruption"], doc["verdict"]["category"]) == (want["interruption"], want["category"])
    got = {k: rc.get(k) for k in ("category", "host", "gpu_index", "gpu_pci", "rank")}
    assert got == {k: want[k] for k in got}
    assert code == EXIT[want["interruption"]]
    assert doc["checkpoints"]["resume_from"] == want["resume_from"]


@pytest.mark.parametrize("answer", ANSWERS, ids=_name)
def test_example_first_event_time(answer, capsys):
    want = json.loads(answer.read_text())
    _code, doc = _diagnose(_name(answer), capsys)
    assert doc["root_cause"]["time"] == want["first_event_utc"]


def test_the_truncated_checkpoint_is_rejected_with_its_reason(capsys):
    _code, doc = _diagnose("incident-ecc-truncated-checkpoint", capsys)
    rejected = {r["path"]: r["reason"] for r in doc["checkpoints"]["rejected"]}
    assert "no zip end record" in rejected["checkpoints/step_003000.pt"]
    assert doc["checkpoints"]["resume_command"].endswith("incident-ecc-truncated-checkpoint/checkpoints/step_002000.pt")
