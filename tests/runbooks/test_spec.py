"""Runbook files and parameter validation: every mistake is caught before a kernel starts."""

from __future__ import annotations

import json
import shutil

import pytest

from gpulib.runbooks.spec import (
    RunbookError,
    _alternatives,
    find_runbook,
    load_runbook,
    parse_assignments,
    resolve_parameters,
)
from tests.conftest import REPO
from tests.runbooks.conftest import NOTEBOOKS


def test_stages_keep_order_and_parallel_groups(write_runbook):
    spec = load_runbook(write_runbook(["ok", {"parallel": ["writes_findings", {"notebook": "slow", "cell_timeout_s": 5}]}]))
    assert [[s.id for s in stage] for stage in spec.stages] == [["ok"], ["writes_findings", "slow"]]
    assert spec.stages[1][1].cell_timeout_s == 5.0
    assert spec.cell_timeout_s == 60.0 and spec.name == "scenario"


def test_values_are_converted_to_the_declared_types(write_runbook):
    spec = load_runbook(write_runbook(["ok", "writes_findings"], parameters={"label": "nightly"}))
    plan = resolve_parameters(spec, cli={"count": "3", "threshold_gbps": "180.5", "severity": "critical"})
    assert plan["writes_findings"] == {"count": 3, "threshold_gbps": 180.5, "severity": "critical"}
    assert plan["ok"] == {"label": "nightly"}  # each step gets only what its notebook declares


def test_unknown_parameter_is_named_with_a_suggestion(write_runbook):
    spec = load_runbook(write_runbook(["ok", "writes_findings"]))
    with pytest.raises(RunbookError) as err:
        resolve_parameters(spec, cli={"cuont": "3"})
    assert "unknown parameter 'cuont'" in str(err.value) and "did you mean 'count'" in str(err.value)


def test_ill_typed_values_are_rejected(write_runbook):
    spec = load_runbook(write_runbook(["writes_findings"]))
    with pytest.raises(RunbookError, match=r"count=abc: not a valid int .*how many findings to record"):
        resolve_parameters(spec, cli={"count": "abc"})
    with pytest.raises(RunbookError, match="declares int"):
        resolve_parameters(load_runbook(write_runbook(["writes_findings"], parameters={"count": "two"})))
    with pytest.raises(RunbookError, match="declares float"):
        resolve_parameters(spec, values={"threshold_gbps": True})  # a bool is not a number here


def test_runner_owned_parameters_cannot_be_set(write_runbook):
    spec = load_runbook(write_runbook(["ok"]))
    with pytest.raises(RunbookError, match="'interactive' is set by the runner"):
        resolve_parameters(spec, cli={"interactive": "true"})


def test_step_parameter_unknown_to_its_notebook(write_runbook):
    spec = load_runbook(write_runbook([{"notebook": "ok", "parameters": {"count": 2}}, "writes_findings"]))
    with pytest.raises(RunbookError, match="step ok: 'count' is not a parameter of ok.ipynb"):
        resolve_parameters(spec)


def test_notebook_without_findings_path_is_refused(tmp_path, write_runbook):
    nb = json.loads((NOTEBOOKS / "ok.ipynb").read_text())
    nb["cells"][1]["source"] = "interactive: bool = True\n"
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "bare.ipynb").write_text(json.dumps(nb))
    spec = load_runbook(write_runbook(["bare"], notebook_dir=str(tmp_path / "nb")))
    with pytest.raises(RunbookError, match=r"bare.ipynb: the parameters cell does not declare \['findings_path'\]"):
        resolve_parameters(spec)


def test_damaged_notebook_names_the_file(tmp_path, write_runbook):
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "junk.ipynb").write_bytes(b"\x00\x01PK\x03\x04 not a notebook")
    spec = load_runbook(write_runbook(["junk"], notebook_dir=str(tmp_path / "nb")))
    with pytest.raises(RunbookError, match="junk.ipynb: cannot read the notebook's parameters"):
        resolve_parameters(spec)


@pytest.mark.parametrize(
    ("steps", "message"),
    [(["missing_step"], "missing_step.ipynb does not exist"),
     (["ok", "ok"], r"step ids \['ok'\] repeat"),
     ([{"notebook": "ok", "retries": 2}], "a step is a notebook name or a mapping"),
     ([], "'steps' must be a non-empty list")],
)
def test_malformed_runbooks(write_runbook, steps, message):
    with pytest.raises(RunbookError, match=message):
        load_runbook(write_runbook(steps))


def test_timeouts_must_be_positive_seconds(write_runbook):
    with pytest.raises(RunbookError, match="timeouts.cell_s must be a positive number of seconds, got 'ten'"):
        load_runbook(write_runbook(["ok"], timeouts={"cell_s": "ten"}))
    with pytest.raises(RunbookError, match="step slow: cell_timeout_s must be a positive number of seconds, got 0"):
        load_runbook(write_runbook([{"notebook": "slow", "cell_timeout_s": 0}]))


def test_yaml_errors_and_unknown_keys(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [ok\n")
    with pytest.raises(RunbookError, match="bad.yaml: not valid YAML"):
        load_runbook(bad)
    bad.write_text("steps: [ok]\nschedule: nightly\n")
    with pytest.raises(RunbookError, match=r"unknown keys \['schedule'\]"):
        load_runbook(bad)
    bad.write_bytes(b"steps: [ok]\n\xff\xfe\x00junk")
    with pytest.raises(RunbookError, match="bad.yaml: not a UTF-8 text file .invalid start byte at byte 12."):
        load_runbook(bad)


def test_find_runbook_by_name_and_unknown_name(tmp_path, monkeypatch):
    shutil.copy(REPO / "runbooks" / "incident.yaml", tmp_path / "incident.yaml")
    monkeypatch.setenv("GPULIB_RUNBOOKS", str(tmp_path))
    assert find_runbook("incident") == tmp_path / "incident.yaml"
    with pytest.raises(RunbookError, match="no runbook named 'nightly'") as err:
        find_runbook("nightly")
    assert "health-report" in str(err.value)  # the message lists what exists


@pytest.mark.parametrize(
    ("declared", "accepted"),
    [("int", ("int",)), ("str | None", ("str", "None")), ("Optional[float]", ("float", "None")),
     ("typing.Union[int, str]", ("int", "str")), ("list[str]", ("list",)), ("Path", None), ("Literal['a']", None)],
)
def test_type_names_papermill_reports(declared, accepted):
    assert _alternatives(declared) == accepted


def test_assignments_need_an_equals_sign():
    assert parse_assignments(["evidence=/a=b", "n=1"]) == {"evidence": "/a=b", "n": "1"}
    with pytest.raises(RunbookError, match="expected key=value"):
        parse_assignments(["count"])


def test_a_parameter_papermill_cannot_parse_is_explained(tmp_path, write_runbook):
    nb = json.loads((NOTEBOOKS / "ok.ipynb").read_text())
    nb["cells"][1]["source"] += 'host: str = ""  # only this host (empty = all)\n'
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "hosts.ipynb").write_text(json.dumps(nb))
    spec = load_runbook(write_runbook(["hosts"], notebook_dir=str(tmp_path / "nb")))
    with pytest.raises(RunbookError, match="'host' is declared, but papermill cannot parse its line") as err:
        resolve_parameters(spec, cli={"host": "node-b"})
    assert "more than one '='" in str(err.value)


def test_cli_lists_each_steps_parameters_without_running(write_runbook, capsys):
    from gpulib.cli import main

    book = write_runbook(["ok", {"parallel": ["writes_findings", "slow"]}], parameters={"label": "nightly"})
    assert main(["run", str(book), "--parameters"]) == 0
    out = capsys.readouterr().out
    assert "stage 2 (parallel): writes_findings" in out
    assert "-p count=  (int, default 2)  how many findings to record" in out
    assert "-p label=  (str, default nightly)" in out and "findings_path" not in out
