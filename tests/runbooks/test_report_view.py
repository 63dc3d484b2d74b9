"""The report's content from synthetic runs (no kernel): headline, banner, one row per fact,
folded prose, empty figures as one line, anchors per step, parameters as key = value."""

from __future__ import annotations

import html
import re

import nbformat
import pytest

from gpulib.diagnose import diagnose
from gpulib.diagnose.headline import headline_lines
from gpulib.notebook.tables import DEFAULT_EVIDENCE
from gpulib.runbooks.report import RenderedStep, build_report
from gpulib.runbooks.report_prepare import anchor_headings, empty_figure_line, fold_markdown, prepare_notebook
from gpulib.runbooks.report_view import banner, merge_facts
from tests.conftest import REPO

XID = {"id": "xid79-gx_a800_102-0000_4f_00.0", "severity": "critical", "category": "gpu_fell_off_bus",
       "title": "Xid 79 on GPU 0000:4f:00.0", "host": "gx-a800-102", "gpu_index": 2, "gpu_pci": "0000:4f:00.0",
       "rank": 10, "actions": ["Power-cycle the node"]}
TIMEOUT = {"id": "nccl-timeout", "severity": "error", "category": "gpu_fell_off_bus", "title": "NCCL watchdog timeout",
           "caused_by": XID["id"], "actions": []}
DRIFT = {"id": "drift-nccl", "severity": "warning", "category": "driver_mismatch", "title": "NCCL 2.18 vs 2.21",
         "actions": []}


def test_one_row_per_fact_with_the_steps_that_raised_it_and_its_own_category():
    findings = [{**XID, "step": "00_triage"}, {**XID, "step": "01_kernel_xid"}, {**XID, "step": "06_driver"},
                {**TIMEOUT, "step": "00_triage"}, {**TIMEOUT, "step": "03_nccl_network"},
                {**DRIFT, "step": "06_driver"}]
    facts = merge_facts(findings, root_id=XID["id"])
    assert [(f.id, f.role) for f in facts] == [(XID["id"], "root cause"), (DRIFT["id"], "other"),
                                               (TIMEOUT["id"], "cascade")]
    assert facts[0].steps == ["00_triage", "01_kernel_xid", "06_driver"]
    assert facts[1].category == "driver_mismatch"  # its own, not the incident's
    assert facts[0].where == "host gx-a800-102, 0000:4f:00.0 (GPU 2), rank 10"


def test_the_banner_says_why_the_run_exits_as_it_does():
    facts = merge_facts([XID, DRIFT], root_id=XID["id"])
    steps = [{"id": "00_triage", "status": "ok"}]
    assert banner(3, "no-go", steps, facts).state == "nogo"
    assert "Xid 79" in banner(3, "no-go", steps, facts).reason
    assert banner(1, "warn", steps, merge_facts([DRIFT])).state == "warn"
    assert banner(0, "healthy", steps, []).state == "ok"
    assert banner(5, "failed", [{"id": "x", "status": "failed"}], facts).state == "failed"
    # one verdict: a soft root cause the run exits 1 for is not a red no-go, whatever its fact is called
    soft = banner(1, "soft", steps, facts)
    assert soft.state == "warn" and "Xid 79" in soft.reason


@pytest.fixture(scope="module")
def example_page() -> tuple[str, dict]:
    diagnosis = diagnose([REPO / DEFAULT_EVIDENCE]).to_dict()
    manifest = {"runbook": "incident", "run": "r1", "host": "h", "started_at": "2026-01-17T06:00:00Z",
                "duration_s": 12.0, "versions": {"gpulib": "0.1.0"}, "exit_code": 3,
                "exit_meaning": "error or critical findings: act before relaunching (no-go)"}
    steps = [{"id": "00_triage", "notebook": "/x/00_triage.ipynb", "status": "ok", "duration_s": 1.23,
              "parameters": {"evidence": "/e", "interactive": False, "findings_path": "/f", "stall_factor": 2.0,
                             "temp_limit_c": 85.0, "host": ""}}]
    body = '<h2 id="Recorded-result">Recorded result<a class="anchor-link" href="#Recorded-result">¶</a></h2>'
    body, headings = anchor_headings(body, "00_triage")
    findings = [{**f, "step": "00_triage"} for f in diagnosis["findings"]]
    page = build_report(manifest, steps, findings, {"00_triage": RenderedStep(body, [], 0, headings)}, diagnosis)
    return page, diagnosis


def test_the_first_block_is_the_diagnosis_headline_then_the_banner(example_page):
    page, diagnosis = example_page
    body = page[page.index("<body"):]
    first = re.search(r'<section id="headline".*?</section>', body, re.DOTALL).group(0)
    shown = [html.unescape(re.sub(r"<[^>]+>", "", line)).strip()  # as a browser shows it (&lt; is <)
             for line in re.findall(r"<(?:h1|p)[^>]*>.*?</(?:h1|p)>", first)]
    assert shown == [line.strip() for line in headline_lines(diagnosis)]
    assert shown[0] == "HARD failure - gpu_fell_off_bus"
    assert any(line.startswith("culprit: host gx-a800-102, 0000:4f:00.0 (GPU 2), rank 10") for line in shown)
    assert any(line.startswith("first action: Power-cycle") for line in shown)
    assert body.index('id="headline"') < body.index("gpulib-banner state-nogo") < body.index('id="facts"')


def test_the_page_links_its_contents_and_shows_parameters_as_key_value(example_page):
    page, _ = example_page
    assert '<a href="#00_triage-Recorded-result">Recorded result</a>' in page  # contents -> the step's heading
    assert 'id="00_triage-Recorded-result"' in page and 'href="#Recorded-result"' not in page
    assert "<code>evidence = /e</code>" in page and "<code>stall_factor = 2</code>" in page
    assert "<code>temp_limit_c = 85 °C</code>" in page and '<code>host = ""</code>' in html.unescape(page)
    assert "findings_path" not in page and "interactive =" not in page
    assert "<script src" not in page


def test_an_empty_figure_is_one_line_and_a_figure_with_data_is_drawn():
    empty = {"data": [], "layout": {"title": {"text": "GPU kernel events per GPU"},
                                    "annotations": [{"text": "no Xid events in this evidence"}]}}
    assert empty_figure_line(empty) == "GPU kernel events per GPU: no Xid events in this evidence"
    assert empty_figure_line({"data": [{"type": "scatter", "x": [1], "y": [2]}], "layout": {}}) is None
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[
        nbformat.v4.new_output("display_data", data={"application/vnd.plotly.v1+json": empty, "text/plain": "F"})])])
    prepared, figures = prepare_notebook(nb, "s")
    assert figures == 0
    assert prepared.cells[0].outputs[0].data["text/html"] == (
        '<p class="gpulib-empty-figure">GPU kernel events per GPU: no Xid events in this evidence</p>')


def test_teaching_prose_is_folded_and_headings_stay():
    source = ("# 01 · Kernel log\n\n**What this step decides:** which GPU failed.\n\n"
              "**Why it matters.** The kernel log is the one witness that does not die with the job.\n\n"
              "## Recorded result\nThe findings of this step, as the runbook archives them.")
    visible, folded = fold_markdown(source)
    assert visible == "# 01 · Kernel log\n\n**What this step decides:** which GPU failed.\n\n## Recorded result"
    assert folded.startswith("**Why it matters.**") and "as the runbook archives them" in folded
