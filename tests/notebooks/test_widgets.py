"""Notebook helpers without a kernel: pickers rebuild figures, findings are recorded, destructive
commands never run without interactive confirmation."""

from __future__ import annotations

import json
import re
import socket
import sys

import pandas as pd
import plotly.io as pio
import pytest

from gpulib.notebook import face as nbk
from gpulib.notebook import figures as plots
from gpulib.notebook import display as display_mod
from gpulib.notebook import widgets as widgets_mod
from gpulib.notebook.remediation import Command
from gpulib.notebook.steps import FINDING_MIME, finding
from tests.notebooks.test_plots import _samples


def test_setup_selects_the_renderer_that_survives_html_export():
    nbk.setup()
    assert pio.renderers.default == "plotly_mimetype+notebook"


def test_gpu_picker_changes_the_figure_traces():
    panel = nbk.FigurePanel(plots.thermal_power, _samples(), pickers=("host", "gpu", "time"))
    assert {t.name for t in panel.figure.data} == {"GPU 0", "GPU 3"}
    colour = {t.name: t.line.color for t in panel.figure.data}
    panel.controls["gpu"].value = "3"
    assert {t.name for t in panel.figure.data} == {"GPU 3"}
    assert {t.line.color for t in panel.figure.data} == {colour["GPU 3"]}  # picking a GPU does not recolour it
    assert panel.figure.layout.showlegend is True  # one trace left: the legend stays
    panel.controls["gpu"].value = "0"
    assert {t.name for t in panel.figure.data} == {"GPU 0"}
    assert {t.line.color for t in panel.figure.data} == {colour["GPU 0"]}
    assert not [s for s in panel.figure.layout.shapes if s.type == "rect"]  # GPU 0 never throttled


def test_time_window_and_threshold_slider_rebuild_the_figure():
    panel = nbk.FigurePanel(plots.thermal_power, _samples(), pickers=("time",),
                            thresholds={"temp_limit_c": (85.0, 60.0, 100.0)})
    panel.controls["time"].index = (0, 1)  # the first minute, before the throttle period
    assert len(panel.figure.data[0].x) == 2
    assert not [s for s in panel.figure.layout.shapes if s.type == "rect"]
    panel.controls["temp_limit_c"].value = 70.0
    assert "70 C" in " ".join(a.text for a in panel.figure.layout.annotations)


def test_initial_picker_values_come_from_parameters_and_unknown_values_fall_back_to_all():
    panel = nbk.FigurePanel(plots.thermal_power, _samples(), pickers=("gpu", "rank"), initial={"gpu": "3"})
    assert panel.controls["gpu"].value == "3"
    assert "rank" not in panel.controls  # no such column: no picker
    assert {t.name for t in panel.figure.data} == {"GPU 3"}
    other = nbk.FigurePanel(plots.thermal_power, _samples(), pickers=("gpu",), initial={"gpu": "7"})
    assert other.controls["gpu"].value == widgets_mod.ALL


def test_widget_view_holds_controls_and_current_figure():
    panel = nbk.FigurePanel(plots.thermal_power, _samples(), pickers=("gpu",))
    box = panel.widget()
    assert box.children[0].children[0] is panel.controls["gpu"]
    panel.controls["gpu"].value = "3"  # the output area is re-rendered without error
    assert {t.name for t in panel.figure.data} == {"GPU 3"}


def test_tables_show_missing_values_as_empty_cells_and_numbers_as_people_read_them(monkeypatch):
    shown = []
    monkeypatch.setattr(display_mod, "display", lambda obj, **kw: shown.append(obj))
    frame = pd.DataFrame({"file": ["README.md", "n1/dmesg.txt"], "host": [None, "n1"], "records": [0, 6],
                          "problems": [None, "truncated"], "gpu_index": [float("nan"), 2.0],
                          "xid": [79.0, None], "temp_c": [35.0, 88.5],
                          "start": [pd.Timestamp("2025-04-22 12:51:30.270000+00:00"), pd.NaT],
                          "took": [pd.Timedelta("0.27s"), pd.Timedelta(minutes=3)]})
    nbk.table(frame)
    html = shown[0]["text/html"]
    assert "NaN" not in html and "None" not in html and "n1/<wbr>dmesg.txt" in html and "truncated" in html
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert {"79", "2", "35 °C", "88.5 °C", "2025-04-22T12:51:30.27Z", "0.27 s", "3 min"} <= set(cells), cells
    assert not any(c.endswith(".0") or "000000" in c or "days" in c for c in cells), cells
    assert not re.search(r"<th[^>]*></th>|<th[^>]*>0</th>", html)  # no pandas row numbers
    assert "79" in shown[0]["text/plain"]


def test_record_writes_the_json_sidecar_and_returns_normalised_findings(tmp_path, capsys):
    path = tmp_path / "out" / "findings-04.json"
    items = nbk.record([finding("b", "warning", "thermal_throttling", "hot", host="n1", gpu_index=3),
                        finding("a", "critical", "gpu_fell_off_bus", "gone", time=pd.Timestamp("2025-03-11T03:12:07Z"))],
                       path, step="04_thermal_power")
    on_disk = json.loads(path.read_text())
    assert on_disk == items
    assert [f["id"] for f in on_disk] == ["a", "b"]  # most severe first
    assert on_disk[0]["time"] == "2025-03-11T03:12:07Z" and on_disk[1]["gpu_index"] == 3
    assert set(on_disk[0]) >= {"id", "severity", "category", "title", "host", "gpu_index", "rank", "time",
                               "evidence", "actions"}
    out = capsys.readouterr().out
    assert "2 finding(s): 1 critical, 1 warning" in out


def test_record_emits_the_finding_mime_bundle(monkeypatch, tmp_path):
    shown = []
    monkeypatch.setattr(nbk, "display", lambda obj, **kw: shown.append((obj, kw)))
    nbk.record([finding("x", "info", "none", "fine")], tmp_path / "f.json", step="00_triage")
    bundle, kwargs = shown[0]
    assert kwargs["raw"] is True
    assert bundle[FINDING_MIME]["findings"][0]["id"] == "x"
    assert "fine" in bundle["text/plain"]


def test_unknown_category_or_severity_is_refused():
    with pytest.raises(ValueError, match="vocabulary"):
        finding("x", "error", "gpu_on_fire", "nope")
    with pytest.raises(ValueError, match="severity"):
        finding("x", "fatal", "none", "nope")


def _touch_command(path) -> Command:
    return Command((sys.executable, "-c", f"open({str(path)!r}, 'w').write('ran')"), "test", socket.gethostname())


def test_headless_remediation_shows_commands_and_never_runs_them(tmp_path, capsys):
    marker = tmp_path / "ran"
    remediation = nbk.Remediation([_touch_command(marker)], interactive=False)
    remediation.display()
    assert remediation.button is None and remediation.confirm is None
    with pytest.raises(Exception, match="only interactively"):
        remediation.run_confirmed()
    assert not marker.exists()
    assert "Headless run: nothing was executed" in capsys.readouterr().out


def test_interactive_remediation_runs_only_after_confirmation(tmp_path):
    marker = tmp_path / "ran"
    remediation = nbk.Remediation([_touch_command(marker)], interactive=True)
    assert remediation.button.disabled
    with pytest.raises(Exception, match="confirmation"):
        remediation.run_confirmed()
    remediation.button.click()  # a click on the disabled button's handler still refuses
    assert not marker.exists()
    remediation.confirm.value = True
    assert not remediation.button.disabled
    remediation.button.click()
    assert marker.read_text() == "ran"
    assert remediation.confirm.value is False and remediation.button.disabled  # one confirmation, one run


def test_commands_for_another_host_are_skipped_even_when_confirmed(tmp_path):
    marker, here = tmp_path / "ran", tmp_path / "ran-here"
    command = Command(_touch_command(marker).argv, "test", "some-other-node")
    remediation = nbk.Remediation([command, _touch_command(here)], interactive=True)
    assert remediation.runnable == remediation.commands[1:]  # the button exists for the command of this host
    remediation.confirm.value = True
    [(_, outcome), _] = remediation.run_confirmed()
    assert "skipped: meant for some-other-node" in outcome and not marker.exists() and here.read_text() == "ran"
    assert nbk.Remediation([command], interactive=True).button is None  # nothing runnable here: no button at all


def test_bad_evidence_path_stops_with_a_short_clear_message(tmp_path):
    with pytest.raises(nbk.NotebookStop) as info:
        nbk.open_evidence(str(tmp_path / "no-such-incident"))
    lines = info.value._render_traceback_()
    assert lines[0] == "gpulib: evidence path not found"
    assert any("what to do:" in line for line in lines)
    (tmp_path / "empty").mkdir()
    with pytest.raises(nbk.NotebookStop, match="empty"):
        nbk.open_evidence(str(tmp_path / "empty"))


def test_widget_figure_is_sent_as_serialisable_plotly_json(monkeypatch):
    """Timestamps must survive the kernel's JSON packer (numpy datetime64 does not)."""
    shown = []
    monkeypatch.setattr(widgets_mod, "display", lambda obj, **kw: shown.append(obj))
    panel = nbk.FigurePanel(plots.thermal_power, _samples(), pickers=("gpu",))
    panel.widget()
    panel.controls["gpu"].value = "3"
    assert len(shown) == 2
    for bundle in shown:
        assert set(bundle) == {"application/vnd.plotly.v1+json", "text/plain"}  # no 5 MB embedded JS
        text = json.dumps(bundle)
        assert "2025-04-22" in text


def test_record_result_is_not_echoed_again_as_cell_output(tmp_path, monkeypatch):
    monkeypatch.setattr(nbk, "display", lambda *a, **k: None)
    items = nbk.record([finding("x", "critical", "gpu_fell_off_bus", "answer")], tmp_path / "f.json", step="00",
                       hide=True)
    assert items[0]["id"] == "x"
    assert items._ipython_display_() is None  # IPython shows nothing for the returned list (drill stays hidden)


def test_fabric_test_with_a_cut_result_file_is_a_fail_naming_the_file(monkeypatch, capsys):
    """A torchrun killed while writing its JSON leaves a cut file: a FAIL naming it, not a traceback."""
    import subprocess

    def killed_while_writing(argv, cwd, **_):
        (cwd / "nccl-test.json").write_text('{"verdict": {"status": "PA')
        return subprocess.CompletedProcess(argv, -9, "", "Killed\n")

    monkeypatch.setattr(nbk.subprocess, "run", killed_while_writing)
    summary = nbk.fabric_test(nproc=2, timeout_s=60)
    assert summary["verdict"] == "FAIL" and summary["returncode"] == -9
    assert summary["summary"].startswith(summary["results_path"] + " is unreadable (")
    assert "killed while writing" in summary["summary"]


@pytest.mark.parametrize("host", [None, "gx-a800;reboot", "node b"], ids=["unknown", "semicolon", "space"])
def test_commands_of_an_unknown_or_unverified_host_are_shown_never_runnable(tmp_path, host):
    """Evidence read on the analyst's machine: a command without a checked host must not run there
    (the host is dropped or unclear, so `[on HOST]` cannot say where the confirmation sends it)."""
    marker = tmp_path / "ran"
    command = Command(_touch_command(marker).argv, "test", host, verified=host is None or " " not in host and ";" not in host)
    remediation = nbk.Remediation([command], interactive=True)
    assert remediation.runnable == [] and remediation.button is None and remediation.confirm is None
    assert "shown only" in remediation.text() and "0 of 1 can run here" in remediation.text()
    with pytest.raises(Exception, match="confirmation"):
        remediation.run_confirmed()
    assert not marker.exists()


def test_xid79_of_a_host_that_fails_the_name_check_still_gets_its_suggestions(tmp_path):
    """Notebook 01's remediation cell on a kernel log whose host field is not a plain name: the
    drain and power-cycle of an Xid 79 are suggested (quoted, unverified), and none can run."""
    from gpulib.diagnose import diagnose
    from gpulib.notebook import steps as checks

    (tmp_path / "journal.txt").write_text("2026-03-04T05:06:07+0000 gx-b17;reboot kernel: NVRM: Xid (PCI:0000:4f:00): "
                                          "79, pid=5151, name=python3, GPU has fallen off the bus.\n")
    findings = checks.kernel_findings(diagnose([tmp_path]).to_dict())
    remediation = nbk.Remediation(nbk.remediation_commands(findings), interactive=True)
    text = remediation.text()
    assert "No remediation command is suggested" not in text, text
    assert "'nodename=gx-b17;reboot'" in text and "ipmitool chassis power cycle" in text, text
    assert "unverified host name, shown only" in text and remediation.runnable == [] and remediation.button is None



def test_a_picker_that_hides_every_row_says_filtered_out_not_healthy():
    events = pd.DataFrame({"time": pd.to_datetime(["2026-01-17T04:51:12Z", "2026-01-17T04:52:00Z"]),
                           "host": ["gx-102", "gx-101"], "gpu": ["2", "5"], "xid": [79, 13],
                           "name": ["fell off", "SM exception"], "interruption": ["hard", "soft"], "text": ["a", "b"]})
    panel = nbk.FigurePanel(plots.xid_events, events, pickers=("host", "gpu"))
    panel.controls["host"].value = "gx-101"
    panel.controls["gpu"].value = "2"
    assert panel.selection().empty
    [note] = [a.text for a in panel.figure.layout.annotations]
    assert "2 row(s) in this evidence, all filtered out by host=gx-101, gpu=2" in note and "healthy" not in note
    panel.controls["gpu"].value = "5"
    assert not panel.figure.layout.annotations and len(panel.figure.data) == 1


def test_an_empty_figure_is_one_line(monkeypatch):
    shown = []
    monkeypatch.setattr(nbk, "display", lambda obj, **kw: shown.append(obj))
    nbk.show(plots.thermal_power(pd.DataFrame()), interactive=False)
    [line] = shown
    assert "no GPU time series in this evidence" in line.data and line.data.startswith("*Temperature")
