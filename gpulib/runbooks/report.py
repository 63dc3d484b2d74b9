"""One offline HTML report for a whole run: code hidden, plotly.js embedded once, no network.

Why not plain ``jupyter nbconvert``: its HTML templates load require.js and MathJax from
cdnjs, plotly's ``notebook`` renderer embeds its own 4.8 MB copy of plotly.js in *every*
notebook (ten steps = ten copies) and adds a MathJax ``<script src>`` of its own, and a figure
recorded only as ``application/vnd.plotly.v1+json`` (plotly's default renderer since 6.1) is
dropped by nbconvert altogether. So each executed notebook is converted with nbconvert (code
cells' inputs excluded), only its body is kept, every figure is re-rendered from its JSON with
``include_plotlyjs=False`` and a stable div id, plotly.js is inlined once in ``<head>``, and
any external ``<script src>``/``<link>`` that an output smuggled in is removed.
"""

from __future__ import annotations

import copy
import html
import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from gpulib.findings import Finding
from gpulib.vocabulary import SEVERITIES

log = logging.getLogger(__name__)

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_EXTERNAL = re.compile(
    r"<script\b[^>]*\bsrc\s*=[^>]*>.*?</script>|<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>",
    re.IGNORECASE | re.DOTALL,
)
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.DOTALL)
_MAIN = re.compile(r"<main>(.*)</main>", re.DOTALL)

_CSS = """
body.gpulib-report { margin: 0 auto; max-width: 1200px; padding: 1em 2em;
  font-family: var(--jp-ui-font-family, system-ui, sans-serif); }
.gpulib-banner { padding: .8em 1em; border-radius: 4px; margin: 1em 0; font-size: 1.1em; }
.gpulib-banner.exit-0 { background: #e6f4ea; border-left: 6px solid #1e8e3e; }
.gpulib-banner.exit-1 { background: #fef7e0; border-left: 6px solid #f9ab00; }
.gpulib-banner.exit-2, .gpulib-banner.exit-3 { background: #fce8e6; border-left: 6px solid #d93025; }
.gpulib-error { background: #fce8e6; border: 1px solid #d93025; padding: .6em 1em; margin: .5em 0; }
.gpulib-error pre { white-space: pre-wrap; margin: .3em 0 0 0; }
table.gpulib { border-collapse: collapse; margin: .5em 0 1.5em 0; width: 100%; }
table.gpulib th, table.gpulib td { border: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
table.gpulib th { background: #f3f3f3; }
.sev-critical, .sev-error { color: #b3261e; font-weight: bold; }
.sev-warning { color: #a05a00; font-weight: bold; }
.sev-info { color: #555; }
section.gpulib-step { border-top: 3px solid #888; margin-top: 2.5em; padding-top: .5em; }
.gpulib-meta { color: #555; font-size: .9em; }
"""


def _esc(value) -> str:
    return html.escape("" if value is None else str(value))


def prepare_notebook(nb, step_id: str):
    """Copy of ``nb`` ready for export: figures as offline HTML divs, plotly.js loaders removed.

    Returns ``(notebook, figure_count)``.
    """
    import plotly.io as pio

    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)  # widget state needs unpkg's html-manager: never offline
    figures = 0
    for cell in nb.cells:
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if PLOTLY_MIME in data:
                figures += 1
                data["text/html"] = pio.to_html(
                    data[PLOTLY_MIME], include_plotlyjs=False, include_mathjax=False, full_html=False,
                    div_id=f"{step_id}-figure-{figures}", validate=False,
                )
                data.pop(PLOTLY_MIME)
            elif "window.PlotlyConfig" in data.get("text/html", "") and "plotly-graph-div" not in data["text/html"]:
                continue  # the renderer's own copy of plotly.js (or a CDN import): the report has one
            kept.append(output)
        if cell.cell_type == "code":
            cell.outputs = kept
    return nb, figures


_local = threading.local()


def _exporter():
    """One nbconvert exporter per thread (steps are rendered by the threads that ran them)."""
    if not hasattr(_local, "exporter"):
        from nbconvert import HTMLExporter

        _local.exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                                       exclude_output_prompt=True)
    return _local.exporter


def _convert(nb, exporter) -> tuple[str, list[str]]:
    """nbconvert's lab rendering of ``nb`` without inputs: ``(body, head styles)``."""
    page, _ = exporter.from_notebook_node(nb)
    head, _, rest = page.partition("<body")
    body = _MAIN.search(rest)
    return (body.group(1) if body else rest), _STYLE.findall(head)


def _where(finding: dict) -> str:
    return Finding.from_dict(finding).where(when=False)


def findings_table(findings: list[dict]) -> str:
    if not findings:
        return "<p>No findings were recorded.</p>"
    rows = []
    rank = {severity: n for n, severity in enumerate(SEVERITIES)}
    for f in sorted(findings, key=lambda f: rank.get(f.get("severity"), len(rank))):
        actions = "<br>".join(_esc(a) for a in f.get("actions") or [])
        rows.append(
            f"<tr><td class='sev-{_esc(f.get('severity'))}'>{_esc(f.get('severity'))}</td>"
            f"<td><a href='#step-{_esc(f.get('step'))}'>{_esc(f.get('step'))}</a></td><td>{_esc(f.get('category'))}</td>"
            f"<td>{_esc(f.get('title'))}</td><td>{_esc(_where(f))}</td><td>{actions}</td></tr>"
        )
    return ("<table class='gpulib'><tr><th>severity</th><th>step</th><th>category</th><th>finding</th>"
            "<th>where</th><th>what to do</th></tr>" + "".join(rows) + "</table>")


def _error_box(step: dict) -> str:
    err = step.get("error") or {}
    cell = f" (cell In [{err['cell']}])" if err.get("cell") is not None else ""
    return (f"<div class='gpulib-error'><b><a href='#step-{_esc(step['id'])}'>{_esc(step['id'])}</a> failed{cell}: "
            f"{_esc(err.get('type'))}</b><pre>{_esc(err.get('message'))}</pre></div>")


@dataclass
class RenderedStep:
    """One executed notebook as report HTML: its body, nbconvert's page styles, its figure count."""

    body: str
    styles: list[str]
    figures: int


def render_step(path: Path, step_id: str) -> RenderedStep:
    """Convert one executed notebook; a missing or damaged file becomes an error box, never an exception.

    Runs in the worker thread right after the step, while other kernels are still busy, so that
    the report costs little at the end of the run.
    """
    import nbformat

    if not Path(path).exists():
        return RenderedStep("<p>This step left no notebook: it never started.</p>", [], 0)
    try:
        nb, figures = prepare_notebook(nbformat.read(str(path), as_version=4), step_id)
        body, styles = _convert(nb, _exporter())
        return RenderedStep(body, styles, figures)
    except Exception as exc:  # noqa: BLE001 - a missing or damaged output must not lose the report
        log.warning("report: cannot render step %s from %s: %s", step_id, path, exc)
        return RenderedStep(f"<div class='gpulib-error'>The executed notebook could not be rendered: {_esc(exc)}</div>",
                            [], 0)


def build_report(manifest: dict, steps: list[dict], findings: list[dict], rendered: dict[str, RenderedStep]) -> str:
    """The report page. ``steps`` are manifest step entries; ``rendered`` maps step id -> :func:`render_step`."""
    import plotly.offline

    sections = []
    for step in steps:
        shown = {k: v for k, v in step["parameters"].items() if k not in ("interactive", "findings_path")}
        meta = (f"<p class='gpulib-meta'>{_esc(Path(step['notebook']).name)} · status <b>{_esc(step['status'])}</b> · "
                f"{step['duration_s']:.1f} s · parameters <code>{_esc(shown)}</code></p>")
        sections.append(f"<section class='gpulib-step' id='step-{_esc(step['id'])}'><h2>{_esc(step['id'])}</h2>"
                        f"{meta}{_error_box(step) if step.get('error') else ''}{rendered[step['id']].body}</section>")
    styles = next((r.styles for r in rendered.values() if r.styles), [])
    figures = sum(r.figures for r in rendered.values())
    failed = [s for s in steps if s.get("status") != "ok"]
    nav = "".join(f"<li><a href='#step-{_esc(s['id'])}'>{_esc(s['id'])}</a> — {_esc(s['status'])}</li>" for s in steps)
    code = manifest["exit_code"]
    header = (
        f"<h1>Runbook {_esc(manifest['runbook'])}</h1>"
        f"<p class='gpulib-meta'>run {_esc(manifest['run'])} on {_esc(manifest['host'])} · started "
        f"{_esc(manifest['started_at'])} · {manifest['duration_s']:.1f} s · gpulib {_esc(manifest['versions'].get('gpulib'))}</p>"
        f"<div class='gpulib-banner exit-{code}'><b>exit {code}</b>: {_esc(manifest['exit_meaning'])}</div>"
        + "".join(_error_box(s) for s in failed)
        + f"<h2>Findings</h2>{findings_table(findings)}<h2>Steps</h2><ol>{nav}</ol>"
    )
    plotly_js = ""
    if figures:
        plotly_js = ("<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
                     f"<script>{plotly.offline.get_plotlyjs()}</script>")
    page = offline(
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        f"<title>gpulib {_esc(manifest['runbook'])} {_esc(manifest['run'])}</title>\n"
        + "\n".join(styles) + f"\n<style>{_CSS}</style>\n<!--plotly.js-->\n</head>\n"
        "<body class='jp-Notebook gpulib-report' data-jp-theme-light='true'>\n"
        f"<header>{header}</header>\n" + "\n".join(sections) + "\n</body>\n</html>\n"
    )
    return page.replace("<!--plotly.js-->", plotly_js, 1)  # after offline(): plotly.js is not scanned


def offline(page: str) -> str:
    """Remove external ``<script src>`` and stylesheet links: the report must open with no network."""
    stripped = _EXTERNAL.findall(page)
    if stripped:
        log.warning("report: removed %d external script/link tag(s) to keep it offline", len(stripped))
    return _EXTERNAL.sub("", page)
