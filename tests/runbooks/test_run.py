"""Real papermill executions: exit codes, the archive's contents and its immutability."""

from __future__ import annotations

import json
import signal
import stat
import threading
import time
from pathlib import Path

import nbformat
import pytest

from gpulib.cli import main
from gpulib.evidence.bundle import sha256_file
from gpulib.runbooks import RunbookError, run_runbook
from gpulib.runbooks.archive import ArchivedRun, list_runs
from gpulib.runbooks.execute import check_kernel

pytestmark = pytest.mark.notebook


def test_archive_holds_every_step_even_when_one_fails(mixed_run):
    run = mixed_run.path
    assert mixed_run.exit_code == 5  # the run itself failed (gpulib.exit_codes.RUN_FAILED)
    files = sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file())
    assert files == ["findings.json", "manifest.json", "notebooks/ok.ipynb", "notebooks/raises.ipynb",
                     "notebooks/writes_findings.ipynb", "report.html"]
    assert not [p for p in run.parent.iterdir() if p.name.startswith(".")]  # no partial left behind
    manifest = json.loads((run / "manifest.json").read_text())
    steps = {s["id"]: s for s in manifest["steps"]}
    assert [s["id"] for s in manifest["steps"]] == ["ok", "writes_findings", "raises"]
    assert steps["raises"]["status"] == "failed"
    assert steps["raises"]["error"]["type"] == "RuntimeError"
    assert "scenario failure" in steps["raises"]["error"]["message"]
    assert steps["writes_findings"]["findings"] == 2 and steps["ok"]["status"] == "ok"
    assert manifest["exit_code"] == 5 and manifest["findings"] == {"critical": 0, "error": 0, "warning": 2, "info": 1}
    assert manifest["versions"]["papermill"] and manifest["kernel"]["name"] == "python3"


def test_findings_json_gathers_every_step(mixed_run):
    doc = json.loads((mixed_run.path / "findings.json").read_text())
    assert doc["format"] == "gpulib.runbook-findings/1" and doc["runbook"] == "mixed"
    assert sorted((f["step"], f["severity"], f["title"]) for f in doc["findings"]) == [
        ("ok", "info", "step ok saw nothing wrong"),
        ("writes_findings", "warning", "GPU 0 throttled"),
        ("writes_findings", "warning", "GPU 1 throttled"),
    ]


def test_executed_notebooks_ran_headless_with_injected_parameters(mixed_run):
    nb = nbformat.read(mixed_run.path / "notebooks" / "ok.ipynb", as_version=4)
    injected = nb.metadata.papermill.parameters
    assert injected["interactive"] is False and injected["findings_path"].endswith("ok.findings.json")
    failed = nbformat.read(mixed_run.path / "notebooks" / "raises.ipynb", as_version=4)
    assert failed.metadata.papermill.exception is True
    assert "never reached" not in json.dumps([c.get("outputs") for c in failed.cells])


def test_archive_is_read_only_and_hashed(mixed_run):
    run = ArchivedRun.open(mixed_run.path)
    for path in mixed_run.path.rglob("*"):
        if path.is_file():
            assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path
    for rel, meta in run.manifest["files"].items():
        assert sha256_file(mixed_run.path / rel) == meta["sha256"]
    assert "manifest.json" not in run.manifest["files"] and run.verify().ok


@pytest.mark.parametrize(("severity", "code"), [("info", 0), ("warning", 1), ("error", 3), ("critical", 3)])
def test_exit_code_follows_the_worst_finding(write_runbook, tmp_path, severity, code):
    outcome = run_runbook(str(write_runbook(["writes_findings"])), cli={"severity": severity, "count": "1"},
                          archive_root=tmp_path / "archive", cwd=tmp_path)
    assert outcome.exit_code == code
    assert [f["severity"] for f in outcome.findings] == [severity]


def test_a_notebook_that_records_nothing_fails_the_run(write_runbook, tmp_path):
    outcome = run_runbook(str(write_runbook(["no_findings"])), archive_root=tmp_path / "a", cwd=tmp_path)
    assert outcome.exit_code == 5
    assert "recorded no findings" in outcome.steps[0].error["message"]


def test_a_hung_cell_is_stopped_by_the_cell_timeout(write_runbook, tmp_path):
    outcome = run_runbook(str(write_runbook(["slow"])), cli={"seconds": "120"}, cell_timeout_s=2,
                          archive_root=tmp_path / "a", cwd=tmp_path)
    assert outcome.exit_code == 5
    assert "Timeout" in outcome.steps[0].error["type"] or "timed out" in outcome.steps[0].error["message"]
    nb = nbformat.read(outcome.path / "notebooks" / "slow.ipynb", as_version=4)
    hung, after = [c for c in nb.cells if c.cell_type == "code"][2:]
    assert [o.get("ename") for o in hung.outputs] == ["KeyboardInterrupt"]  # nbclient interrupted it
    assert after.metadata.papermill.start_time is None  # the record cell never ran


def test_rerun_makes_a_new_directory_and_leaves_the_first_untouched(write_runbook, tmp_path):
    book = str(write_runbook(["ok"], name="twice"))
    first = run_runbook(book, archive_root=tmp_path / "a", cwd=tmp_path)
    before = {p: sha256_file(p) for p in first.path.rglob("*") if p.is_file()}
    second = run_runbook(book, archive_root=tmp_path / "a", cwd=tmp_path)
    assert second.path != first.path and second.path.parent == first.path.parent
    assert {p: sha256_file(p) for p in first.path.rglob("*") if p.is_file()} == before
    assert [r.path for r in list_runs(tmp_path / "a")] == [first.path, second.path]
    # tampering is detected by `gpulib archive show`
    findings = first.path / "findings.json"
    findings.chmod(0o644)
    findings.write_text('{"findings": []}')
    assert ArchivedRun.open(first.path).verify().changed == ["findings.json"]
    assert main(["archive", "show", str(first.path), "--archive", str(tmp_path / "a")]) == 1


def test_cli_refuses_bad_parameters_before_anything_runs(write_runbook, tmp_path, capsys):
    book = str(write_runbook(["writes_findings"]))
    archive = tmp_path / "archive"
    assert main(["run", book, "-p", "severty=critical", "--archive", str(archive)]) == 2  # usage error
    assert "unknown parameter 'severty'" in capsys.readouterr().err
    assert main(["run", book, "-p", "count=many", "--archive", str(archive)]) == 2
    assert main(["run", book, "--evidence", str(tmp_path / "nowhere"), "--archive", str(archive)]) == 2
    assert f"{tmp_path / 'nowhere'}: no such file or folder" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "no-such-book.yaml"), "--archive", str(archive)]) == 2
    assert not archive.exists()  # nothing was executed or archived


def test_cli_run_prints_where_the_report_is(write_runbook, tmp_path, capsys):
    book = str(write_runbook(["writes_findings"]))
    code = main(["run", book, "-p", "severity=error", "--archive", str(tmp_path / "archive"), "--jobs", "1"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 3 and "exit 3: no-go: a hard root cause, or a blocking finding of a step" in out
    assert "No incident diagnosed" in out  # the exit comes from the finding's severity, not a diagnosis
    progress = captured.err.splitlines()  # not a terminal: plain lines, no bar
    assert progress[0].startswith("gpulib run ") and "1 step(s)" in progress[0]
    assert any(line.startswith("[1/1] writes_findings") and line.endswith(" s") for line in progress), progress
    assert "\r" not in captured.err
    report = Path(next(line.split(None, 1)[1] for line in out.splitlines() if line.startswith("report:")))
    assert report.name == "report.html" and report.parent.parent == tmp_path / "archive" / "scenario"


def test_a_foreign_python3_kernelspec_is_refused(tmp_path, monkeypatch):
    spec_dir = tmp_path / "data" / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": ["/opt/other-env/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
         "display_name": "other", "language": "python"}))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")  # the user's kernels dir now wins, as outside a venv
    with pytest.raises(RunbookError, match="runs /opt/other-env/bin/python, not this environment's"):
        check_kernel("python3")


def test_an_interrupt_stops_the_kernels_and_still_archives(write_runbook, tmp_path):
    """Ctrl-C (or the CLI's SIGTERM) mid-run: running cells die at once, pending steps never
    start, and the archive records what happened (exit 3) instead of waiting out the cells."""
    book = str(write_runbook([{"parallel": ["slow", {"notebook": "slow", "id": "slow_queued"}]}]))
    main_thread = threading.main_thread().ident

    def interrupt_once_the_first_step_runs():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((tmp_path / "archive").rglob("slow.ipynb")):
            time.sleep(0.2)
        time.sleep(2)  # kernel starting or cell sleeping: either way it must be stopped
        signal.pthread_kill(main_thread, signal.SIGINT)

    threading.Thread(target=interrupt_once_the_first_step_runs, daemon=True).start()
    outcome = run_runbook(book, cli={"seconds": "300"}, jobs=1, archive_root=tmp_path / "archive", cwd=tmp_path)
    assert outcome.exit_code == 5
    by_id = {s.id: s for s in outcome.steps}
    assert by_id["slow"].error["type"] == "Interrupted"
    assert by_id["slow_queued"].error["message"] == "not started: the run was interrupted"
    assert ArchivedRun.open(outcome.path).verify().ok
    nb = nbformat.read(outcome.path / "notebooks" / "slow.ipynb", as_version=4)
    assert nb.cells[-1].metadata.papermill.start_time is None  # the record cell never ran
