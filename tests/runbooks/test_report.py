"""The offline HTML report: opens with no network, code hidden, plotly.js once, errors on top."""

from __future__ import annotations

import re

import nbformat
import pytest

from gpulib.runbooks.report import offline, prepare_notebook
from tests.browser.chromium import block_network, launched, screenshot_check
from tests.runbooks.conftest import NOTEBOOKS

pytestmark = pytest.mark.notebook


@pytest.fixture(scope="module")
def report(mixed_run) -> str:
    return (mixed_run.path / "report.html").read_text(encoding="utf-8")


def test_no_external_script_or_stylesheet(report):
    assert re.findall(r"<script\b[^>]*\bsrc\s*=", report, re.IGNORECASE) == []
    assert re.findall(r"<link\b[^>]*href=[\"']?(?:https?:)?//", report, re.IGNORECASE) == []
    assert "cdnjs.cloudflare.com" not in report and "unpkg.com" not in report


def test_plotly_js_is_embedded_exactly_once_and_the_figure_is_there(report):
    assert report.count("* plotly.js v") == 1
    assert report.index("* plotly.js v") < report.index("</head>")
    assert len(re.findall(r'<div class="plotly-graph-div" id="ok-figure-1"', report)) == 1
    assert "GPU 0 temperature" in report


def test_code_is_hidden_but_outputs_and_markdown_stay(report):
    assert "fig.show()" not in report and "json.dump(findings" not in report
    assert "The figure below must survive the offline HTML report." in report
    assert "recorded 2 finding(s)" in report


def test_the_failure_is_at_the_top(report):
    header = report[report.index("<header>"):report.index("</header>")]
    assert "exit 5" in header  # the run itself failed
    text = re.sub(r"<[^>]+>", "", header)
    assert "raises failed (cell In [4]): RuntimeError" in text
    assert header.index('href="#step-raises">raises</a> failed') < header.index('id="facts"')
    assert "GPU 1 throttled" in header  # the findings table


def test_figures_recorded_only_as_plotly_json_are_rendered(tmp_path):
    """plotly >= 6.1's default renderer records only application/vnd.plotly.v1+json, which
    nbconvert drops; the report re-renders it and drops the renderer's own plotly.js copies."""
    nb = nbformat.read(NOTEBOOKS / "ok.ipynb", as_version=4)
    fig = {"data": [{"type": "bar", "x": ["gpu0"], "y": [3]}], "layout": {"title": {"text": "remaps"}}}
    loader = "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script><script>/* plotly.js */</script>"
    nb.cells[4].outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": loader}),
        nbformat.v4.new_output("display_data", data={"application/vnd.plotly.v1+json": fig, "text/plain": "Figure"}),
    ]
    prepared, figures = prepare_notebook(nb, "s")
    assert figures == 1
    [output] = prepared.cells[4].outputs
    assert 'id="s-figure-1"' in output.data["text/html"] and "remaps" in output.data["text/html"]
    assert "mathjax" not in output.data["text/html"].lower()


def test_offline_strips_smuggled_external_scripts():
    page = '<head><script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="//cdn/x.css"></head>ok'
    assert offline(page) == "<head></head>ok"


@pytest.mark.browser
def test_report_renders_its_figure_in_chromium_with_the_network_off(mixed_run):
    with launched() as browser:
        page = browser.new_context(offline=True).new_page()
        remote = block_network(page)
        with screenshot_check(page, "runbook-mixed-report"):
            page.goto((mixed_run.path / "report.html").as_uri())
            page.wait_for_selector("#ok-figure-1 .main-svg", timeout=30_000)
            assert page.locator(".js-plotly-plot").count() == 1
            assert "RuntimeError" in page.locator("header").inner_text()
            assert remote == []
