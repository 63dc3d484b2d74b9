"""A table as HTML designed per cell: identifiers never broken, prose wrapped at words, the culprit's row marked.

Why not ``DataFrame.to_html`` alone: squeezed into a notebook's width, the browser breaks cells
anywhere - a pid read "602/12", a host "gx-/a800-/101", a header "ra/nk" - and a text column
cut at a fixed length lost the number that mattered ("WorkNCCL(SeqNu"). An engineer copies
these values into commands. So:

- a cell that is one token (a host, pid, PCI id, time, number) does not wrap at all; a path
  wraps only after a ``/`` (a folder name stays whole);
- a cell of words wraps only between words and keeps a readable width (never one word a line);
- a very long text is cut at a word boundary, never inside a token, with the whole text in the
  cell's tooltip (hover);
- headers do not wrap; the table sits in a box that scrolls sideways when it is wider than the
  output area, rather than running off its right edge;
- the rows about the diagnosis's culprit (its finding, its GPU, else its rank, else its host)
  are highlighted, so the eye finds them first.

Styles are inline attributes: JupyterLab drops ``<style>`` elements of untrusted outputs (an
archived notebook opened later) but keeps inline styles; the HTML report shows them as well.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import pandas as pd

#: Longest cell text shown in full; longer text is cut at the next word boundary after it.
CELL_CHARS = 180
WRAP = "overflow-x:auto;max-width:100%"
NOWRAP = "white-space:nowrap"
PROSE = "white-space:normal;overflow-wrap:normal;word-break:normal;min-width:14em"
PATH = "white-space:normal;overflow-wrap:normal;word-break:normal"
CULPRIT = "background:#fde7e9;box-shadow:inset 4px 0 0 #b3261e"
_SPACE = re.compile(r"\s")


def cell(text: str) -> str:
    """One ``<td>``: a token unbroken, words wrapped between words, long text cut with a tooltip."""
    if not _SPACE.search(text):
        if "/" in text.strip("/"):  # a path: a break opportunity after each "/", none inside a name
            return f'<td style="{PATH}">{"/<wbr>".join(html.escape(part) for part in text.split("/"))}</td>'
        return f'<td style="{NOWRAP}">{html.escape(text)}</td>'
    shown = text
    if len(text) > CELL_CHARS:
        end = _SPACE.search(text, CELL_CHARS)  # the end of the token that crosses the limit: never inside it
        if end is not None and end.start() < len(text):
            shown = text[:end.start()] + " …"
    title = f' title="{html.escape(text, quote=True)}"' if shown != text else ""
    return f'<td style="{PROSE}"{title}>{html.escape(shown)}</td>'


def culprit_rows(frame: pd.DataFrame, root: dict | None) -> pd.Series:
    """True for the rows about the root cause: its finding id, else its GPU (PCI id in any GPU
    column), else its rank, else (a cause with only a host) its host; on the root's host where
    the table has a host column."""
    none = pd.Series(False, index=frame.index)
    if not root or frame.empty:
        return none

    def text(column: str) -> pd.Series:
        return frame[column].astype(str) if column in frame.columns else pd.Series("", index=frame.index)

    on_host = text("host") == str(root["host"]) if root.get("host") and "host" in frame.columns else ~none
    if root.get("finding") and "id" in frame.columns:
        return text("id") == str(root["finding"])
    pci = root.get("gpu_pci")
    gpu_columns = [c for c in ("gpu", "gpu_name", "pci_bus_id") if c in frame.columns]
    if pci and gpu_columns:
        return on_host & pd.concat([text(c).str.contains(pci, regex=False) for c in gpu_columns], axis=1).any(axis=1)
    if root.get("rank") is not None and "rank" in frame.columns:
        return on_host & (text("rank") == str(root["rank"]))
    if root.get("host") and "host" in frame.columns and not pci and root.get("rank") is None:
        return on_host  # a cause with only a host (an InfiniBand port, a node): its rows
    return none


def table_html(shown: pd.DataFrame, marked: Sequence[bool] | None = None) -> str:
    """``shown`` (cells already as text, :func:`gpulib.notebook.display.readable`) as HTML; rows
    where ``marked`` is true carry the ``gpulib-culprit`` class and its highlight."""
    marked = list(marked) if marked is not None else [False] * len(shown)
    head = "".join(f'<th style="{NOWRAP}">{html.escape(str(c))}</th>' for c in shown.columns)
    rows = []
    for hit, values in zip(marked, shown.itertuples(index=False, name=None), strict=True):
        attrs = f' class="gpulib-culprit" style="{CULPRIT}" title="the diagnosis\'s culprit"' if hit else ""
        rows.append(f"<tr{attrs}>" + "".join(cell(str(v)) for v in values) + "</tr>")
    return (f'<div class="gpulib-table-wrap" style="{WRAP}"><table class="dataframe gpulib-table" border="0">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
