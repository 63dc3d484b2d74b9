"""Display that reads the same live, headless and in the archived report.

Content shown inside widgets lives in the widget state, which archived notebooks, HTML reports
and nbval never show; these helpers display plain mime bundles that every consumer keeps.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from IPython.display import Markdown, display

from gpulib import formats, kernel_env
from gpulib.notebook.table_html import culprit_rows, table_html
from gpulib.runbooks import report_prepare
from gpulib.terminal import safe

#: The renderer that survives every consumer: JupyterLab uses the mime part, nbconvert HTML
#: reports the embedded-JS part (plotly >= 6.1 defaults to the mime part only, and nbconvert
#: silently drops it).
PLOTLY_RENDERER = "plotly_mimetype+notebook"


def figures_as_json() -> bool:
    """True under ``gpulib run`` (:data:`gpulib.kernel_env.FIGURES_AS_JSON`)."""
    return os.environ.get(kernel_env.FIGURES_AS_JSON, "") not in ("", "0")


def figure_bundle(figure: go.Figure) -> dict:
    """The figure as plotly's JSON mime part (what JupyterLab and the offline report draw)."""
    return {"application/vnd.plotly.v1+json": json.loads(pio.to_json(figure, validate=False)),
            "text/plain": f"<figure: {figure.layout.title.text or ''}>"}


def empty_figure_line(figure: go.Figure) -> str | None:
    """What an empty figure says, as one line (``title: message``), or None when it has data.

    A figure without data points still takes ~450 px in JupyterLab and reads like a rendering
    bug; its title and note (``no GPU time series in this evidence``) say everything."""
    return report_prepare.empty_figure_line(figure.to_plotly_json())  # the report's own rule


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """Every cell as the text people read (:func:`gpulib.formats.text`): ``79`` not ``79.0``,
    ``35 °C`` for a ``temp_c`` column, ``0.27 s`` not ``0 days 00:00:00.270000``, times in UTC
    ISO-8601 with ``Z``; a missing value is an empty cell ("NaN" or "None" in a host column
    reads as a name)."""
    return pd.DataFrame({column: [safe(formats.text(v, str(column))) for v in frame[column]] for column in frame.columns},
                        index=frame.index, columns=frame.columns)


#: The root cause whose rows :func:`table` highlights (set by :func:`mark_culprit` when a
#: notebook opens its evidence; None in a drill, where it would give the answer away).
_culprit: dict | None = None


def mark_culprit(root: dict | None) -> None:
    """Highlight the rows about ``root`` (the diagnosis's ``root_cause``) in every later table."""
    global _culprit
    _culprit = dict(root) if root else None


def table(frame: pd.DataFrame, empty: str = "nothing found") -> None:
    """Show a table, or one line saying it is empty (an empty table reads like a rendering bug).

    Shown without pandas' row numbers (they name nothing) and with readable cells, each designed
    for what it holds (:mod:`gpulib.notebook.table_html`: identifiers unbroken, prose wrapped at
    words, the culprit's rows highlighted, a sideways scroll instead of running off the page);
    the HTML part is what JupyterLab and the archived report show, the text part what a terminal shows."""
    if frame is None or frame.empty:
        display(Markdown(f"*{empty}*"))
        return
    shown = readable(frame)
    marked = culprit_rows(frame, _culprit)
    display({"text/html": table_html(shown, marked), "text/plain": shown.to_string(index=False)}, raw=True)


def say(text: str) -> None:
    """A markdown line (teaching remarks computed from the evidence)."""
    display(Markdown(safe(text)))
