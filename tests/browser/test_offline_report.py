"""The archived HTML report of `gpulib run incident`, opened in Chromium with the network cut.

An archive is read months later, often on a laptop without access to the cluster or the
internet. The report must therefore draw its plotly figures from the plotly.js embedded in the
file and show the findings with no request to any server; every attempted http(s) request is
aborted and recorded, and the test requires that list to be empty.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.browser.chromium import block_network, screenshot_check
from tests.browser.conftest import EXAMPLE, EXAMPLE_ANSWER

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

#: Per graph div: whether plotly drew it (an SVG), how many traces it holds and draws, its title.
GRAPHS = """() => [...document.querySelectorAll('.plotly-graph-div')].map(g => ({
  id: g.id, drawn: !!g.querySelector('.main-svg'), traces: (g._fullData || []).length,
  svg_traces: g.querySelectorAll('.main-svg .trace').length,
  title: (g.querySelector('.gtitle') || {}).textContent || ''}))"""


@pytest.fixture(scope="module")
def incident_report(tmp_path_factory):
    """`gpulib run incident --evidence <bundled example>` into a temporary archive; its report."""
    archive = tmp_path_factory.mktemp("archive")
    proc = subprocess.run([sys.executable, "-m", "gpulib", "run", "incident", "--evidence", str(EXAMPLE),
                           "--archive", str(archive)], capture_output=True, text=True, timeout=360, check=False)
    log = f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 3, f"expected exit 3 (critical findings, no-go: a GPU fell off the bus):\n{log}"
    [report] = archive.glob("incident/*/report.html")
    return report


def test_archived_report_renders_its_figures_and_findings_with_the_network_blocked(incident_report, page):
    blocked = block_network(page)
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))

    with screenshot_check(page, "report-1-findings"):
        page.goto(incident_report.as_uri(), wait_until="load", timeout=60_000)
        header = page.locator("header").inner_text()
        assert "exit 3" in header, header[:2000]
        findings = page.locator("header table").first.inner_text()
        critical = [line for line in findings.splitlines() if line.startswith("critical")]
        assert any(EXAMPLE_ANSWER["category"] in line and EXAMPLE_ANSWER["host"] in line for line in critical), \
            findings[:3000]

    with screenshot_check(page, "report-2-figures"):
        page.wait_for_function(f"() => ({GRAPHS})().every(g => g.drawn)", timeout=60_000, polling=500)
        graphs = page.evaluate(GRAPHS)
        assert len(graphs) >= 3, graphs  # triage timeline, Xid events, per-rank events at least
        with_data = [g for g in graphs if g["traces"]]
        assert with_data and all(g["svg_traces"] >= g["traces"] for g in with_data), graphs
        timeline = page.locator(".plotly-graph-div", has=page.locator(".gtitle", has_text="Incident timeline")).first
        timeline.scroll_into_view_if_needed()
        assert timeline.locator(".main-svg .trace").count() >= 1
        assert EXAMPLE_ANSWER["host"] in timeline.inner_text()

    assert blocked == [], f"the report tried to reach the network: {blocked}"
    assert page_errors == [], f"JavaScript errors in the report: {page_errors}"
