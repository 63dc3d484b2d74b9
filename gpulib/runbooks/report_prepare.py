"""An executed notebook made ready for the report: offline figures, folded prose, unique anchors.

Why each change:

- **figures**: a figure recorded only as ``application/vnd.plotly.v1+json`` (plotly's default
  renderer since 6.1, and what ``gpulib run`` records) is dropped by nbconvert; each is redrawn
  as an HTML div with a stable id and *no* plotly.js (the page inlines it once). The renderer's
  own copies of plotly.js are removed.
- **empty figures**: a figure with no data only says "no Xid events in this evidence"; drawn, it
  is a 450 px blank box. It becomes that one line.
- **teaching prose**: the notebooks teach *why* each signal matters; at 03:00 the reader of an
  archived run wants the results. Paragraphs of markdown are folded into ``<details>`` (one
  click away), headings and the "what this step decides" line stay.
- **anchors**: every notebook has a "Recorded result" heading; nbconvert gives each the same
  ``id``, so links in a page of ten notebooks all jump to the first. Ids get the step as prefix.
"""

from __future__ import annotations

import copy
import html
import re

PLOTLY_MIME = "application/vnd.plotly.v1+json"
#: Markdown paragraphs that stay visible: they say what the step decides.
KEEP_VISIBLE = re.compile(r"^\*\*What this step decides", re.IGNORECASE)
_HEADING = re.compile(r"^#{1,6}\s")


def empty_figure_line(figure: dict) -> str | None:
    """The one line an empty figure says (its title and annotation), or None if it has data."""
    if any(_has_points(trace) for trace in figure.get("data") or []):
        return None
    layout = figure.get("layout") or {}
    title = layout.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    notes = [a.get("text") for a in layout.get("annotations") or [] if a.get("text")]
    message = "; ".join(notes) or "no data"
    return f"{title}: {message}" if title else message


def _has_points(trace: dict) -> bool:
    for key in ("x", "y", "z", "values"):
        value = trace.get(key)
        if isinstance(value, dict):  # plotly's typed arrays: {"dtype", "bdata", "shape"}
            if value.get("bdata"):
                return True
        elif value is not None and len(value):
            return True
    return False


def fold_markdown(source: str) -> tuple[str, str]:
    """Split a markdown cell into what stays visible (headings, "what this step decides") and
    the teaching prose to fold; either part may be empty."""
    visible, folded = [], []
    for block in re.split(r"\n\s*\n", source.strip()):
        lines = block.splitlines()
        if not lines:
            continue
        if _HEADING.match(lines[0]):
            visible.append(lines[0])
            rest = "\n".join(lines[1:]).strip()
            if rest:
                (visible if KEEP_VISIBLE.match(rest) else folded).append(rest)
        elif KEEP_VISIBLE.match(block) or (len(block) < 160 and not folded and not visible):
            visible.append(block)
        else:
            folded.append(block)
    return "\n\n".join(visible), "\n\n".join(folded)


def _details(prose: str) -> str:
    """Markdown folded in ``<details>``: blank lines around the prose keep it markdown (CommonMark
    ends an HTML block at a blank line)."""
    return f'<details class="gpulib-teaching">\n<summary>Why this matters</summary>\n\n{prose}\n\n</details>'


def prepare_notebook(nb, step_id: str) -> tuple[object, int]:
    """Copy of ``nb`` ready for export; returns ``(notebook, figure_count)``."""
    import plotly.io as pio

    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)  # widget state needs unpkg's html-manager: never offline
    figures = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            visible, prose = fold_markdown(cell.source)
            if prose:
                cell.source = "\n\n".join(p for p in (visible, _details(prose)) if p)
            continue
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if PLOTLY_MIME in data:
                figure = data.pop(PLOTLY_MIME)
                line = empty_figure_line(figure)
                if line is not None:
                    data["text/html"] = f'<p class="gpulib-empty-figure">{html.escape(line)}</p>'
                else:
                    figures += 1
                    data["text/html"] = pio.to_html(
                        figure, include_plotlyjs=False, include_mathjax=False, full_html=False,
                        div_id=f"{step_id}-figure-{figures}", validate=False, default_width="100%",
                    )
            elif "window.PlotlyConfig" in data.get("text/html", "") and "plotly-graph-div" not in data["text/html"]:
                continue  # the renderer's own copy of plotly.js (or a CDN import): the report has one
            kept.append(output)
        if cell.cell_type == "code":
            cell.outputs = kept
    return nb, figures


_HEADING_TAG = re.compile(r'<h([1-6]) id="([^"]+)">(.*?)</h\1>', re.DOTALL)


def anchor_headings(body: str, step_id: str) -> tuple[str, list[dict]]:
    """Prefix heading ids (and their ``#`` links) with the step; returns the body and the
    headings ``[{level, id, text}]`` for the table of contents."""
    ids = {m.group(2) for m in _HEADING_TAG.finditer(body)}
    headings = []

    def rename(match: re.Match) -> str:
        level, old, inner = match.group(1), match.group(2), match.group(3)
        new = f"{step_id}-{old}"
        text = html.unescape(re.sub(r"<[^>]+>", "", inner)).strip().rstrip("¶").strip()
        headings.append({"level": int(level), "id": new, "text": text})
        return f'<h{level} id="{new}">{inner}</h{level}>'

    body = _HEADING_TAG.sub(rename, body)
    for old in ids:
        body = body.replace(f'href="#{old}"', f'href="#{step_id}-{old}"')
    return body, headings


_TH = re.compile(r"(<th\b[^>]*>)([^<]*)(</th>)")


def breakable_headers(body: str) -> str:
    """Column names such as ``remapped_rows_uncorrectable`` may break after each ``_``
    (``<wbr>``), so a wide table wraps its headers instead of overflowing the page."""
    return _TH.sub(lambda m: m.group(1) + m.group(2).replace("_", "_<wbr>") + m.group(3), body)
