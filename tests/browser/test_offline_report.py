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

from tests.browser.chromium import SHOTS, block_network, screenshot_check
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


#: Elements (outside plotly's figures) whose box sticks out of their parent's. Strict: a table
#: inside a sideways-scrolling box counts too (at 03:00 nobody scrolls a 2,400 px table).
OVERFLOWING = """() => {
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') || el.closest('.plotly-graph-div') || !el.parentElement) continue;
    const r = el.getBoundingClientRect(), p = el.parentElement.getBoundingClientRect();
    if (!r.width || getComputedStyle(el).position === 'absolute') continue;
    if (r.right > p.right + 1 || r.left < p.left - 1)
      out.push(`${el.tagName}.${el.className} ${Math.round(r.left)}-${Math.round(r.right)} in ` +
               `${el.parentElement.tagName} ${Math.round(p.left)}-${Math.round(p.right)}: ${el.textContent.slice(0, 60)}`);
  }
  return {overflowing: out.slice(0, 20), page: document.documentElement.scrollWidth,
          viewport: document.documentElement.clientWidth};
}"""
#: GPU key -> the colours its traces have, over every figure of the page (plotly's JSON as drawn).
GPU_COLOURS = """() => { const out = {}; const panels = {};
  for (const g of document.querySelectorAll('.js-plotly-plot')) {
    for (const t of (g.data || [])) {
      const key = t.meta && t.meta.gpu; if (!key) continue;
      const c = (t.type === 'bar' || t.mode === 'markers') ? (t.marker || {}).color : ((t.line || {}).color
                || (t.marker || {}).color);
      (out[key] = out[key] || []).push(String(c)); (panels[key] = panels[key] || new Set()).add(g.id);
    } }
  return {colours: out, panels: Object.fromEntries(Object.entries(panels).map(([k, v]) => [k, v.size]))}; }"""


def diagnose_headline() -> list[str]:
    """The first block of `gpulib diagnose` on the example: the lines up to the first blank one."""
    proc = subprocess.run([sys.executable, "-m", "gpulib", "diagnose", str(EXAMPLE)], capture_output=True, text=True,
                          timeout=120, check=False)
    return [line.strip() for line in proc.stdout.split("\n\n", 1)[0].splitlines()]


def test_the_report_opens_with_the_diagnose_headline_fits_its_page_and_keeps_gpu_colours(incident_report, page):
    block_network(page)
    page.goto(incident_report.as_uri(), wait_until="load", timeout=60_000)
    with screenshot_check(page, "report-3-headline"):
        first = page.locator("body > header > *").first
        assert first.get_attribute("id") == "headline"
        shown = [line.strip() for line in first.inner_text().splitlines() if line.strip()]
        assert shown == diagnose_headline(), shown
        assert "no-go" in page.locator(".gpulib-banner").inner_text()

    with screenshot_check(page, "report-4-fits"):
        page.wait_for_function(f"() => ({GRAPHS})().every(g => g.drawn)", timeout=60_000, polling=500)
        fit = page.evaluate(OVERFLOWING)
        assert fit["overflowing"] == [] and fit["page"] <= fit["viewport"], fit

    with screenshot_check(page, "report-5-gpu-colours"):
        seen = page.evaluate(GPU_COLOURS)
        lost = "gx-a800-102|0000:4f:00.0"  # the GPU that fell off: in the Xid chart and the memory chart
        assert seen["panels"].get(lost, 0) >= 2, seen
        assert all(len(set(c)) == 1 for c in seen["colours"].values()), seen["colours"]
        per_gpu = [c[0] for c in seen["colours"].values()]
        assert len(set(per_gpu)) == len(per_gpu), seen["colours"]  # and no two GPUs share a colour
        memory = page.locator(".plotly-graph-div", has=page.locator(".gtitle", has_text="GPU memory used")).first
        memory.scroll_into_view_if_needed()
        assert "lost at" in memory.inner_text()

    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "report-full-page.png"), full_page=True)  # the whole report, for people
