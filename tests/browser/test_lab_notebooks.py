"""The runbook notebooks as an engineer sees them in JupyterLab (Chromium via Playwright).

Headless papermill runs cannot see what only a browser shows: a widget whose JavaScript model
never renders, a plotly figure that stays blank, a picker whose callback never reaches the
screen, a cell that fails only because the frontend sent it before the kernel was ready. Each
test opens a notebook through the JupyterLab UI, runs it from the Run menu, and checks what is
on the screen, saving a screenshot of every check under ``test-output/browser/``.
"""

from __future__ import annotations

import json
import re
import socket
import time
from datetime import datetime

import pytest
from playwright.sync_api import expect

from gpulib.notebook.drill_grading import category_label
from gpulib.notebook.tables import open_evidence
from gpulib.resources import step_names
from tests.browser.chromium import screenshot_check
from tests.browser.conftest import EXAMPLE, EXAMPLE_ANSWER, set_parameters
from tests.browser.lab import NotebookPage
from tests.conftest import INCIDENTS

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240), pytest.mark.usefixtures("fresh_kernels")]

#: The corpus incident with checkpoints: a truncated async save after an ECC error (read in place).
CASE_06 = INCIDENTS / "case-06-ecc-dbe-truncated-ckpt"

#: Per plotly trace of a rendered graph: its name and y values as plotly.js drew them. ``_fullData``
#: holds the decoded arrays (plotly.py sends numeric columns base64-encoded: {dtype, bdata}).
FIGURE_DATA = """el => el._fullData.map(t => ({name: t.name, x: Array.from(t.x || [], String),
                                                y: Array.from(t.y || [], String)}))"""


def run_notebook(page, lab, name: str, shot: str) -> NotebookPage:
    """Open ``name``, wait for an idle kernel, Run All Cells, and check every cell ran cleanly."""
    nb = NotebookPage(page, lab, name)
    with screenshot_check(page, f"{shot}-1-opened"):
        nb.open()
    with screenshot_check(page, f"{shot}-2-ran"):
        prompts = nb.run_all()
        assert all(p[1:-2].isdigit() for p in prompts), f"cells that did not run: {prompts}"
        assert nb.errors() == []
        echoed = [c["source"] for c in nb.cells() if "nbk.record(" in c["source"]
                  and any(o["output_type"] == "execute_result" for o in c["outputs"])]
        assert echoed == [], "the findings list is echoed as Out[n] under the recorded result"
    return nb


def options(select) -> list[str]:
    """Option labels of a widget's ``<select>`` (ipywidgets renders spaces as no-break spaces)."""
    return [t.replace("\xa0", " ") for t in select.locator("option").all_inner_texts()]


def pick(select, label: str) -> None:
    """Choose ``label`` in a dropdown, as a person does with the mouse or keyboard."""
    labels = options(select)
    assert label in labels, labels
    select.select_option(index=labels.index(label))


def plot_in(page, scope):
    """The first plotly graph under ``scope``, once plotly has drawn at least one data trace."""
    graph = scope.locator(".js-plotly-plot").first
    graph.locator(".main-svg .trace").first.wait_for(timeout=30_000)
    graph.scroll_into_view_if_needed()
    return graph


def test_triage_notebook_runs_renders_and_reacts_to_its_pickers(lab, page):
    assert EXAMPLE.is_dir(), f"the notebooks' default evidence, the bundled example, is missing: {EXAMPLE}"
    # As an engineer opens it: the parameters cell's defaults (the bundled example), nothing edited.
    nb = run_notebook(page, lab, set_parameters(lab, "00_triage.ipynb"), "00-triage")

    with screenshot_check(page, "00-triage-3-verdict"):
        verdict = page.locator(".jp-OutputArea-output", has_text="Verdict:").first
        verdict.scroll_into_view_if_needed()
        text = verdict.inner_text()
        assert (f"Verdict: {EXAMPLE_ANSWER['interruption']} interruption, category "
                f"{EXAMPLE_ANSWER['category']}") in text, text
        assert f"host {EXAMPLE_ANSWER['host']}, {EXAMPLE_ANSWER['gpu']}" in text, text
        assert "Xid" in text and "79" in text, text  # the quoted line is shown, not just a label

    # The timeline panel: a host picker and a time window above the live figure.
    panel = page.locator(".jupyter-widgets.widget-vbox", has=page.locator(".js-plotly-plot")).first
    with screenshot_check(page, "00-triage-4-widgets"):
        host = panel.locator(".widget-dropdown select").first
        host.wait_for()
        hosts = options(host)
        assert EXAMPLE_ANSWER["host"] in hosts and "gx-a800-101" in hosts, hosts
        assert panel.locator(".widget-slider, .jupyter-widget-selection-range-slider, .widget-hslider").count() >= 1
        graph = plot_in(page, panel)
        before = graph.evaluate(FIGURE_DATA)
        hosts_before = {y for trace in before for y in trace["y"]}
        assert hosts_before == {EXAMPLE_ANSWER["host"], "gx-a800-101"}, hosts_before  # no "(unknown host)" row
        assert {t["name"] for t in before} == {"kernel log", "training log", "root cause"}, before  # kinds, not files

    with screenshot_check(page, "00-triage-5-host-picked"):
        pick(host, EXAMPLE_ANSWER["host"])
        page.wait_for_function(
            f"""([prev]) => {{ const el = document.querySelector('.widget-vbox .js-plotly-plot');
                 return el && el._fullData && JSON.stringify(({FIGURE_DATA})(el)) !== prev; }}""",
            arg=[json.dumps(before, separators=(",", ":"))], timeout=30_000, polling=250)
        graph = plot_in(page, panel)
        after = graph.evaluate(FIGURE_DATA)
        hosts_after = {y for trace in after for y in trace["y"]}
        assert hosts_after == {EXAMPLE_ANSWER["host"]}, hosts_after
        assert 0 < points(after) < points(before), (points(before), points(after))

    with screenshot_check(page, "00-triage-6-window-narrowed"):
        # Keyboard on the window slider's start handle, one step at a time, until the figure redraws.
        start = panel.locator(".noUi-handle-lower").first
        start.focus()
        for _ in range(60):
            plot_in(page, panel).evaluate("el => { el.dataset.seen = '1'; }")
            start.press("ArrowRight")  # each step re-filters in the kernel and redraws a new graph node
            page.wait_for_function(
                "() => { const el = document.querySelector('.widget-vbox .js-plotly-plot');"
                " return el && !el.dataset.seen && el.querySelector('.main-svg'); }", timeout=30_000, polling=100)
            narrowed = plot_in(page, panel).evaluate(FIGURE_DATA)
            if narrowed != after:
                break
        assert 0 < points(narrowed) < points(after), (after, narrowed)
        first = lambda data: min(x for t in data for x in t["x"])  # noqa: E731
        assert first(narrowed) > first(after), (first(after), first(narrowed))
        assert {y for t in narrowed for y in t["y"]} == {EXAMPLE_ANSWER["host"]}  # the host pick still holds
    assert nb.errors() == []


def points(data: list[dict]) -> int:
    return sum(len(t["y"]) for t in data)


def test_checkpoint_notebook_names_the_newest_valid_checkpoint(lab, page):
    if not CASE_06.is_dir():
        pytest.skip(f"no evidence with checkpoints: the bundled example has none and {CASE_06} is absent")
    expected = json.loads((CASE_06 / "expected.json").read_text())
    resume = expected["resume_from"].rsplit("/", 1)[-1]  # checkpoints/ckpt_step_004000.pt
    run_notebook(page, lab, set_parameters(lab, "07_checkpoint_resume.ipynb", evidence=CASE_06 / "input"), "07-ckpt")

    with screenshot_check(page, "07-ckpt-3-candidates"):
        table = page.locator(".jp-OutputArea-output table", has_text="ckpt_step_006000").first
        table.scroll_into_view_if_needed()
        rows = table.locator("tbody tr").all_inner_texts()
        chosen = [r for r in rows if resume in r]
        assert len(chosen) == 1 and "RESUME FROM THIS" in chosen[0], rows
        truncated = [r for r in rows if "ckpt_step_006000.pt" in r]
        assert len(truncated) == 1 and "rejected" in truncated[0] and "truncated" in truncated[0], rows

    with screenshot_check(page, "07-ckpt-4-picker"):
        picker = page.locator(".jupyter-widgets.widget-vbox", has=page.locator("textarea")).first
        picker.scroll_into_view_if_needed()
        select, command = picker.locator(".widget-dropdown select").first, picker.locator("textarea").first
        labels = options(select)
        assert labels[0].startswith(resume) and labels[0].endswith("- recommended"), labels
        assert any("ckpt_step_006000.pt" in label and "REJECTED" in label for label in labels), labels
        assert command.input_value().startswith("torchrun ") and command.input_value().endswith(resume)
        assert "steps lost: 2000" in picker.inner_text()
        pick(select, next(label for label in labels if "older, complete" in label))  # go further back
        expect(command).to_have_value(re.compile(r"--resume \S*ckpt_step_002000\.pt$"), timeout=30_000)
        expect(picker.locator("pre")).to_contain_text("steps lost: 4000", timeout=30_000)

    with screenshot_check(page, "07-ckpt-5-loss"):
        graph = plot_in(page, page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)"))
        traces = graph.evaluate(FIGURE_DATA)
        assert traces and len(traces[0]["y"]) > 2, traces
        step = int(re.search(r"(\d+)", resume).group(1))
        assert f"resume from step {step}" in graph.inner_text()

    with screenshot_check(page, "07-ckpt-6-decision"):
        decision = page.locator(".jp-OutputArea-output", has_text="07_checkpoint_resume:").last
        decision.scroll_into_view_if_needed()
        text = decision.inner_text()
        resume_lines = [line for line in text.splitlines() if "--resume" in line]
        assert resume_lines and all(line.rstrip().endswith(resume) for line in resume_lines), text
        assert "ckpt_step_006000.pt: truncated" in text, text


def wait_for_file(path, present: bool, timeout_s: float = 30) -> bool:
    """Poll until ``path`` exists (or is gone): the kernel handles a click after the browser sent it."""
    deadline = time.monotonic() + timeout_s
    while path.exists() != present and time.monotonic() < deadline:
        time.sleep(0.25)
    return path.exists() == present


def test_triage_drill_offers_every_host_and_writes_no_answer_before_the_commit(lab, page):
    """The drill as a trainee meets it: pickers over the whole evidence, nothing of the answer on
    screen or on disk (an earlier run's findings file is removed), a wrong GPU gets a hint and a
    retry, and the commit reveals the scores, writes the findings and shows the next step."""
    ev = open_evidence(str(EXAMPLE))
    evidence_hosts = set(ev.inputs()["host"].dropna()) | set(ev.ranks()["host"])
    rank_map_gpus = {f"{r.host} {r.gpu_name}" for r in ev.ranks().itertuples()}  # named as in every figure
    answer_file = lab.root / "findings-00-drill.json"
    answer_file.write_text(json.dumps([{"id": "xid79", "category": EXAMPLE_ANSWER["category"],
                                        "title": "left by an earlier run"}]))
    name = set_parameters(lab, "00_triage.ipynb", "00_triage-drill.ipynb", drill=True,
                          findings_path=answer_file.name)
    run_notebook(page, lab, name, "00-drill")
    drill = page.locator(".jupyter-widgets.widget-vbox", has=page.get_by_role("button", name="Commit my answer")).first
    commit = drill.get_by_role("button", name="Commit my answer")
    plain_outputs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output:not(:has(.jupyter-widgets))")
    next_step = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output", has_text="the next step follows")

    with screenshot_check(page, "00-drill-3-challenge"):
        drill.scroll_into_view_if_needed()
        category, interruption, host, gpu, rank = drill.locator(".widget-dropdown select").all()
        assert evidence_hosts == {"gx-a800-101", EXAMPLE_ANSWER["host"]}
        assert evidence_hosts <= set(options(host)), options(host)  # every host, not only the culprit's
        assert rank_map_gpus <= set(options(gpu)), options(gpu)
        assert {f"rank {r}" for r in range(16)} <= set(options(rank))
        assert category_label(EXAMPLE_ANSWER["category"]) in options(category) and len(options(category)) > 10
        choices = options(interruption)
        assert any(o.startswith("hard") for o in choices) and any(o.startswith("soft") for o in choices)
        before_commit = "\n".join([*plain_outputs.all_inner_texts(), drill.locator(".widget-output").inner_text(),
                                   *next_step.all_inner_texts()])
        assert not answer_file.exists(), "the answer lies in the file browser before the trainee committed"

    with screenshot_check(page, "00-drill-4-hint"):
        right_gpu = f"{EXAMPLE_ANSWER['host']} 0000:4f:00.0 (GPU 2 in the job)"
        renumbered = f"{EXAMPLE_ANSWER['host']} 0000:54:00.0 (GPU 2 at capture, 3 in the job)"
        pick(category, category_label(EXAMPLE_ANSWER["category"]))
        pick(interruption, next(o for o in options(interruption) if o.startswith("hard")))
        pick(host, EXAMPLE_ANSWER["host"])
        pick(gpu, renumbered)  # nvidia-smi's renumbered "GPU 2"
        pick(rank, "rank 10")
        commit.click()
        hint = drill.locator(".widget-output", has_text="Attempt 1: 4 / 5").first
        hint.wait_for(timeout=30_000)
        text = hint.inner_text()
        assert f"culprit GPU: {renumbered} -> WRONG" in text, text
        assert "hint: Kernel lines name a GPU by PCI id" in text and "0000:4f" not in text, text
        assert wait_for_file(answer_file, present=False, timeout_s=2), "a graded attempt is not the reveal"
        assert "01_kernel_xid" not in "\n".join(next_step.all_inner_texts())

    with screenshot_check(page, "00-drill-5-revealed"):
        drill.get_by_role("button", name="Try again").click()
        expect(commit).to_be_enabled(timeout=30_000)
        pick(gpu, right_gpu)
        commit.click()
        revealed = drill.locator(".widget-output", has_text="Drill result").first
        revealed.wait_for(timeout=30_000)
        text = revealed.inner_text()
        assert "Drill result: 4 / 5 on the first attempt, 5 / 5 on attempt 2" in text, text
        assert f"culprit GPU: {right_gpu} -> right" in text and "Xid" in text, text
        expect(commit).to_be_disabled(timeout=30_000)
        assert wait_for_file(answer_file, present=True), "the commit did not write the findings"
        assert any(f["category"] == EXAMPLE_ANSWER["category"] for f in json.loads(answer_file.read_text()))
        revealed.scroll_into_view_if_needed()

    with screenshot_check(page, "00-drill-6-next-step"):
        shown_next = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output",
                                  has_text="01_kernel_xid.ipynb").last
        shown_next.wait_for(timeout=30_000)
        shown_next.scroll_into_view_if_needed()

    leaks = [line for line in before_commit.splitlines()
             if EXAMPLE_ANSWER["category"] in line or "Verdict:" in line or "Xid 79" in line or "01_kernel_xid" in line]
    assert leaks == [], f"the drill answer is on screen before the trainee committed: {leaks}"


#: The other steps, opened as they ship (default evidence: the bundled example); the preflight's
#: torchrun fabric test is tested in tests/nccl, not started from a browser test.
#: Triage (00) and checkpoint (07) have tests of their own above.
OTHER_STEPS = [(f"{step}.ipynb", {"08_preflight": {"run_fabric_test": False}}.get(step, {}))
               for step in step_names() if step not in ("00_triage", "07_checkpoint_resume")]


@pytest.mark.parametrize(("name", "params"), OTHER_STEPS, ids=[n[:2] for n, _ in OTHER_STEPS])
def test_every_step_notebook_runs_clean_and_draws_its_figures(lab, page, name, params):
    nb = run_notebook(page, lab, set_parameters(lab, name, **params), name[:2])
    with screenshot_check(page, f"{name[:2]}-3-figures"):
        graphs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .js-plotly-plot")
        for n in range(graphs.count()):
            graphs.nth(n).locator(".main-svg").first.wait_for(timeout=30_000)  # drawn, not a blank box
        if graphs.count():
            graphs.last.scroll_into_view_if_needed()
        # A FigurePanel is a widget box holding its controls and the live figure (no pickers when
        # the evidence has nothing to pick from, e.g. no GPU time series).
        panels = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .widget-vbox", has=page.locator(".js-plotly-plot"))
        if "FigurePanel(" in "".join(c["source"] for c in nb.cells()):
            assert panels.count() >= 1, "the notebook builds a FigurePanel but no widget box with a figure is on screen"
        if name.startswith("01"):  # the example's single Xid: a window of minutes around it, not +-1 ms
            low, high = graphs.first.evaluate("el => el._fullLayout.xaxis.range")
            assert (datetime.fromisoformat(high) - datetime.fromisoformat(low)).total_seconds() >= 600, (low, high)
        assert nb.errors() == []


def test_remediation_runs_only_after_the_confirmation_and_only_on_its_own_host(lab, page):
    """The destructive commands of 01 (Xid 79: drain, power-cycle) are shown; they belong to the
    evidence's host, not this machine, so no confirmation box or button is offered to run them here
    (the confirmation itself: tests/notebooks/test_widgets.py)."""
    nb = run_notebook(page, lab, set_parameters(lab, "01_kernel_xid.ipynb", "01_kernel_xid-remediation.ipynb",
                                                evidence=EXAMPLE),  # 01 opens on the three-host example
                      "01-remediation")
    shown = page.locator(".jp-OutputArea-output", has_text="Remediation commands").first

    with screenshot_check(page, "01-remediation-3-shown"):
        shown.scroll_into_view_if_needed()
        text = shown.inner_text()
        listed = [line.strip() for line in text.splitlines() if line.strip().startswith("[on ")]
        # Xid 79: the Xid catalog says power-cycle (a GPU off the bus cannot be reset), after draining
        assert not any("nvidia-smi -r" in line for line in listed), listed
        assert any(f"scontrol update nodename={EXAMPLE_ANSWER['host']} state=drain" in line for line in listed), listed
        assert sum("ipmitool chassis power cycle" in line for line in listed) == 1, listed  # once per node
        assert listed and all(line.startswith(f"[on {EXAMPLE_ANSWER['host']}]") for line in listed), listed
        assert EXAMPLE_ANSWER["host"] != socket.gethostname()  # so nothing of it may run on this machine
        assert f"0 of {len(listed)} can run here ({socket.gethostname()})" in " ".join(text.split()), text
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        expect(panel.get_by_role("button", name="Run commands")).to_have_count(0)
        expect(panel.get_by_text("I have read these commands")).to_have_count(0)
    assert nb.errors() == []


#: The thermal straggler: GPU 3 (0000:4e:00.0) of dgx-a100-09 throttles, eight GPUs sampled.
CASE_02 = INCIDENTS / "case-02-a100-thermal-throttle"
#: GPU key -> colours of its traces in one rendered graph (plotly's JSON as drawn), and the legend.
GPU_TRACES = """el => { const out = {};
  for (const t of el.data) { const key = t.meta && t.meta.gpu; if (!key) continue;
    (out[key] = out[key] || []).push(String((t.line && t.line.color) || (t.marker && t.marker.color))); }
  return {colours: out, legend: !!el.querySelector('.legend')}; }"""


def test_a_gpu_keeps_its_colour_and_the_legend_when_the_gpu_picker_changes(lab, page):
    if not CASE_02.is_dir():
        pytest.skip(f"the thermal incident is absent: {CASE_02}")
    run_notebook(page, lab, set_parameters(lab, "04_thermal_power.ipynb", "04_thermal-colours.ipynb",
                                           evidence=CASE_02 / "input"), "04-colours")
    panel = page.locator(".jupyter-widgets.widget-vbox", has=page.locator(".js-plotly-plot")).first
    throttled = "dgx-a100-09|0000:4e:00.0"
    with screenshot_check(page, "04-colours-3-all"):
        before = plot_in(page, panel).evaluate(GPU_TRACES)
        assert len(before["colours"]) == 8 and all(len(set(c)) == 1 for c in before["colours"].values()), before
        assert len({c[0] for c in before["colours"].values()}) == 8  # eight GPUs, eight colours
        names = {t["name"] for t in plot_in(page, panel).evaluate(FIGURE_DATA)}
        assert any(n.startswith("0000:4e:00.0 (GPU 3)") for n in names), names  # named by PCI, index at capture

    with screenshot_check(page, "04-colours-4-gpu-picked"):
        gpu = panel.locator(".widget-dropdown select").nth(1)
        previous = json.dumps(plot_in(page, panel).evaluate(FIGURE_DATA), separators=(",", ":"))
        pick(gpu, next(o for o in options(gpu) if o.startswith("0000:4e:00.0 (GPU 3")))  # named as in the legend
        page.wait_for_function(
            f"""([prev]) => {{ const el = document.querySelector('.widget-vbox .js-plotly-plot');
                 return el && el._fullData && JSON.stringify(({FIGURE_DATA})(el)) !== prev; }}""",
            arg=[previous], timeout=30_000, polling=250)
        after = plot_in(page, panel).evaluate(GPU_TRACES)
        assert list(after["colours"]) == [throttled], after
        assert set(after["colours"][throttled]) == set(before["colours"][throttled])
        assert after["legend"], "the legend disappeared with one GPU left"
