"""One offline HTML report for a whole run: verdict on top, code hidden, plotly.js embedded once.

The page is rendered from Jinja2 templates (``gpulib/runbooks/templates/``: the page, the
headline, the facts table, a step's section, the style sheet); this module only gathers what
they show (:mod:`gpulib.runbooks.report_view`) and the steps' bodies.

Why not plain ``jupyter nbconvert``: its HTML templates load require.js and MathJax from
cdnjs, plotly's ``notebook`` renderer embeds its own 4.8 MB copy of plotly.js in *every*
notebook (ten steps = ten copies) and adds a MathJax ``<script src>`` of its own, and a figure
recorded only as ``application/vnd.plotly.v1+json`` is dropped by nbconvert altogether. So each
executed notebook is converted with nbconvert (code cells' inputs excluded) after
:func:`~gpulib.runbooks.report_prepare.prepare_notebook`, only its body is kept, plotly.js is
inlined once in ``<head>``, and any external ``<script src>``/``<link>`` that an output smuggled
in is removed (:func:`offline`).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.logs import get_logger
from gpulib.runbooks.report_prepare import (
    PLOTLY_MIME,
    anchor_headings,
    breakable_headers,
    prepare_notebook,
)
from gpulib.runbooks.report_view import (
    banner,
    facts_by_role,
    facts_per_step,
    merge_facts,
    run_headline,
    step_parameters,
)

__all__ = ["PLOTLY_MIME", "RenderedStep", "build_report", "offline", "prepare_notebook", "render_step"]

log = get_logger(__name__)

_EXTERNAL = re.compile(
    r"<script\b[^>]*\bsrc\s*=[^>]*>.*?</script>|<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>",
    re.IGNORECASE | re.DOTALL,
)
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.DOTALL)
_MAIN = re.compile(r"<main>(.*)</main>", re.DOTALL)
PLOTLY_PLACEHOLDER = "<!--plotly.js-->"

_local = threading.local()


def _exporter():
    """One nbconvert exporter per thread (steps are rendered by the threads that ran them)."""
    if not hasattr(_local, "exporter"):
        from nbconvert import HTMLExporter

        _local.exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                                       exclude_output_prompt=True)
    return _local.exporter


def _environment():
    """The report's Jinja2 environment (templates are package data; autoescaped HTML)."""
    if not hasattr(_local, "jinja"):
        import jinja2

        _local.jinja = jinja2.Environment(loader=jinja2.PackageLoader("gpulib.runbooks", "templates"),
                                          autoescape=jinja2.select_autoescape(["html", "j2"]),
                                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return _local.jinja


def _convert(nb, exporter) -> tuple[str, list[str]]:
    """nbconvert's lab rendering of ``nb`` without inputs: ``(body, head styles)``."""
    page, _ = exporter.from_notebook_node(nb)
    head, _, rest = page.partition("<body")
    body = _MAIN.search(rest)
    return (body.group(1) if body else rest), _STYLE.findall(head)


@dataclass
class RenderedStep:
    """One executed notebook as report HTML: its body, nbconvert's page styles, its figure count
    and its headings (for the table of contents)."""

    body: str
    styles: list[str]
    figures: int
    headings: list[dict] = field(default_factory=list)


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
        body, headings = anchor_headings(breakable_headers(body), step_id)
        return RenderedStep(body, styles, figures, headings)
    except Exception as exc:  # noqa: BLE001 - a missing or damaged output must not lose the report
        log.warning("report: cannot render step %s from %s: %s", step_id, path, exc)
        return RenderedStep(_environment().get_template("error.html.j2").render(
            message=f"The executed notebook could not be rendered: {exc}"), [], 0)


def build_report(manifest: dict, steps: list[dict], findings: list[dict], rendered: dict[str, RenderedStep],
                 diagnosis: dict | None = None) -> str:
    """The report page. ``steps`` are manifest step entries; ``rendered`` maps step id ->
    :func:`render_step`; ``diagnosis`` is the ``gpulib.diagnosis/1`` dict of the evidence the
    steps analysed (None when the runbook diagnosed no incident)."""
    import plotly.offline

    root_id = ((diagnosis or {}).get("root_cause") or {}).get("finding")
    facts = merge_facts(findings, root_id)
    per_step = facts_per_step(facts)
    sections = [{"id": s["id"], "notebook": Path(s["notebook"]).name, "status": s["status"],
                 "duration_s": s["duration_s"], "parameters": step_parameters(s["parameters"]),
                 "error": s.get("error"), "body": rendered[s["id"]].body,
                 "headings": [h for h in rendered[s["id"]].headings if h["level"] <= 2],
                 "facts": per_step.get(s["id"], 0)} for s in steps]
    figures = sum(r.figures for r in rendered.values())
    page = _environment().get_template("report.html.j2").render(
        manifest=manifest, headline=run_headline(diagnosis, findings),
        banner=banner(manifest["exit_code"], manifest["exit_meaning"], steps, facts,
                      basis=manifest.get("exit_basis", "findings"), blocking_ids=manifest.get("blocking", ())),
        groups=facts_by_role(facts), fact_count=len(facts), finding_count=len(findings), steps=sections,
        failed=[s for s in sections if s["status"] != "ok"],
        nbconvert_styles=next((r.styles for r in rendered.values() if r.styles), []),
        plotly_placeholder=PLOTLY_PLACEHOLDER if figures else "",
    )
    page = offline(page)
    if figures:  # after offline(): plotly.js itself is not scanned
        plotly_js = ("<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
                     f"<script>{plotly.offline.get_plotlyjs()}</script>")
        page = page.replace(PLOTLY_PLACEHOLDER, plotly_js, 1)
    return page


def offline(page: str) -> str:
    """Remove external ``<script src>`` and stylesheet links: the report must open with no network."""
    stripped = _EXTERNAL.findall(page)
    if stripped:
        log.warning("report: removed %d external script/link tag(s) to keep it offline", len(stripped))
    return _EXTERNAL.sub("", page)
