"""``gpulib drill``: a new folder with notebook 00 in drill mode, the evidence under a neutral
name without the files that hold its answer, and the command that opens it."""

from __future__ import annotations

import json

import papermill as pm
import pytest

from gpulib.cli import main
from gpulib.notebook import cli as drill_cli
from tests.conftest import INCIDENTS, REPO

CASE_06 = INCIDENTS / "case-06-ecc-dbe-truncated-ckpt"


def injected(notebook) -> dict:
    """The defaults of the notebook's parameters cell (what the trainee reads and papermill overrides)."""
    return {name: json.loads(p["default"]) if p["default"] not in ("True", "False") else p["default"] == "True"
            for name, p in pm.inspect_notebook(str(notebook)).items() if name in ("evidence", "interactive", "drill")}


def test_drill_on_an_incident_folder(tmp_path, capsys):
    if not CASE_06.is_dir():
        pytest.skip(f"incident not found at {CASE_06}")
    out = tmp_path / "drill"
    assert main(["drill", str(CASE_06), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    notebook = out / "00_triage-drill.ipynb"
    assert f"jupyter lab {notebook}" in printed and "left out, they hold the answer: expected.json" in printed
    assert injected(notebook) == {"evidence": str(out / "evidence"), "interactive": True, "drill": True}
    assert "incident-" not in notebook.read_text()  # no default pointing at another incident
    assert (out / "evidence" / "input" / "train.log").is_file() and not (out / "evidence" / "expected.json").exists()
    assert "case-06" not in notebook.read_text()  # the folder name is not shown to the trainee
    assert not list(out.glob("findings*")), "no answer in the drill folder before the trainee commits"
    assert [p.name for p in out.iterdir() if p.suffix == ".ipynb"] == [notebook.name]  # only 00 until the reveal
    nxt = out / ".gpulib-drill-next-steps" / "07_checkpoint_resume.ipynb"  # held back, same evidence, no drill
    assert injected(nxt) == {"evidence": str(out / "evidence"), "interactive": True}


def test_without_evidence_a_bundled_example_is_drilled_unnamed(tmp_path, capsys):
    examples = drill_cli.bundled_examples()
    if not examples:
        pytest.skip("no bundled example")
    assert all(p.parent == REPO / "examples" and p.name != "answers" for p in examples)
    assert main(["drill", "--out", str(tmp_path / "d")]) == 0
    printed = capsys.readouterr().out
    assert "a bundled example (not named" in printed
    assert not any(p.name in printed for p in examples)
    copied = tmp_path / "d" / "evidence"
    assert not list(copied.rglob("README*")), "the example's README tells the story (culprit GPU and rank)"
    assert any(copied.rglob("*.log")) or any(copied.rglob("*.out")) or any(copied.rglob("*.txt"))


def test_large_evidence_is_read_in_place_and_answer_files_are_named(tmp_path, capsys):
    incident = tmp_path / "incident-host-oom"
    (incident / "n1").mkdir(parents=True)
    (incident / "n1" / "kern.log").write_text("Out of memory: Killed process 4242 (python)\n")
    (incident / "expected.json").write_text('{"category": "host_oom"}')
    assert main(["drill", str(incident), "--out", str(tmp_path / "d"), "--copy-limit-mib", "0"]) == 0
    printed = capsys.readouterr().out
    assert "read in place" in printed and "WARNING: answer files inside it, visible to the trainee: expected.json" in printed
    assert injected(tmp_path / "d" / "00_triage-drill.ipynb")["evidence"] == str(incident)


def test_a_drill_never_reuses_a_folder_and_a_missing_path_is_exit_2(tmp_path, capsys):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "findings-00.json").write_text("[]")
    assert main(["drill", str(REPO / "examples"), "--out", str(tmp_path / "old")]) == 2
    assert "exists already" in capsys.readouterr().err
    assert main(["drill", str(tmp_path / "no-such-incident"), "--out", str(tmp_path / "new")]) == 2
    assert "no such file or folder" in capsys.readouterr().err and not (tmp_path / "new").exists()


def test_a_relative_path_is_read_from_here_and_a_folder_of_answered_incidents_is_refused(tmp_path, capsys,
                                                                                         monkeypatch):
    """`gpulib drill examples` where no examples folder exists must not drill the repo's (copying
    its answer-named folders and *.answer.json into evidence/)."""
    monkeypatch.chdir(tmp_path)
    assert main(["drill", "examples", "--out", str(tmp_path / "d")]) == 2
    assert "examples: no such file or folder" in capsys.readouterr().err and not (tmp_path / "d").exists()
    assert main(["drill", str(REPO / "examples"), "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    bundled = len(list((REPO / "examples").glob("*.answer.json")))
    assert f"holds {bundled} incidents with their answer keys" in err and not (tmp_path / "d").exists()
    incident = tmp_path / "examples" / "mine"
    (incident / "n1").mkdir(parents=True)
    (incident / "n1" / "kern.log").write_text("Out of memory: Killed process 4242 (python)\n")
    (incident / "n1" / "mine.answer.json").write_text('{"category": "host_oom"}')
    assert main(["drill", "examples/mine", "--out", str(tmp_path / "d")]) == 0
    assert "left out, they hold the answer: n1/mine.answer.json" in capsys.readouterr().out
    assert not list((tmp_path / "d").rglob("*answer*"))
