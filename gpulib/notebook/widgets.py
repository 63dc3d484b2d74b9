"""Interactive figures: a plotly figure plus the pickers and threshold sliders that redraw it.

Headless (papermill, ``interactive=False``) the figure is built once with the initial values, so
an archived notebook shows exactly what an engineer sees before touching a control.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets
import pandas as pd
import plotly.graph_objects as go
from IPython.display import Markdown, display

from gpulib.notebook.display import empty_figure_line, figure_bundle
from gpulib.notebook.palette import GpuPalette

ALL = "(all)"


@dataclass
class FigurePanel:
    """A figure plus the pickers that filter its data; the figure is rebuilt on every change.

    ``build(frame, **thresholds)`` is a pure function from :mod:`gpulib.notebook.figures`; one
    that takes ``palette`` gets :attr:`palette` (pass ``ev.gpu_palette()`` so a GPU has the same
    colour in every panel). ``pickers`` names
    the columns to filter on: ``host``, ``gpu`` (column ``gpu``), ``rank`` and ``time`` (a window
    over column ``time``). ``thresholds`` maps keyword arguments of ``build`` to their initial
    value, or to ``(value, min, max)`` for a slider. Headless, the figure is simply built with the
    initial values; interactively, :meth:`widget` returns the controls and the figure.
    """

    build: Callable[..., go.Figure]
    frame: pd.DataFrame
    pickers: Sequence[str] = ()
    thresholds: dict[str, Any] = field(default_factory=dict)
    initial: dict[str, Any] = field(default_factory=dict)
    palette: GpuPalette | None = None

    def __post_init__(self) -> None:
        # Colours come from the whole evidence (``ev.gpu_palette()``, the same in every panel) or,
        # failing that, from this panel's unfiltered data: never from what a picker left.
        self._takes_palette = "palette" in inspect.signature(self.build).parameters
        if self._takes_palette and self.palette is None:
            self.palette = GpuPalette.from_frames(self.frame)
        self.controls: dict[str, widgets.Widget] = {}
        for name in self.pickers:
            control = self._picker(name)
            if control is not None:
                self.controls[name] = control
        for name, spec in self.thresholds.items():
            self.controls[name] = _threshold_slider(name, spec)
        self._output: widgets.Output | None = None
        for control in self.controls.values():
            control.observe(self._changed, names="value")
        self.figure = self._build()

    # -- the pure part: current control values -> filtered frame -> figure
    def selection(self) -> pd.DataFrame:
        frame = self.frame
        if frame is None or frame.empty:
            return frame
        for name, control in self.controls.items():
            if name in self.thresholds:
                continue
            if name == "time":
                start, end = control.value
                times = pd.to_datetime(frame["time"], utc=True, errors="coerce")
                frame = frame[(times >= pd.Timestamp(start)) & (times <= pd.Timestamp(end))]
            elif control.value != ALL:
                frame = frame[frame[self._column(name)].astype(str) == str(control.value)]
        return frame

    def _build(self) -> go.Figure:
        kwargs = {name: self.controls[name].value for name in self.thresholds}
        if self._takes_palette:
            kwargs["palette"] = self.palette
        selection = self.selection()
        figure = self.build(selection, **kwargs)
        if self.frame is not None and not self.frame.empty and (selection is None or selection.empty):
            # the evidence has rows, the pickers hid them all: say so (an empty figure's own words,
            # "no Xid events in this evidence (a healthy reading)", would be false here)
            figure.layout.annotations = ()
            figure.add_annotation(text=f"{len(self.frame)} row(s) in this evidence, all filtered out by "
                                       f"{self._filters()}: widen the pickers to see them",
                                  showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 14})
        return figure

    def _filters(self) -> str:
        """The pickers that filter, as ``host=gx-a800-101, window 04:51:12-05:01:13``."""
        parts = []
        for name, control in self.controls.items():
            if name in self.thresholds:
                continue
            if name == "time":
                start, end = control.value
                parts.append(f"window {pd.Timestamp(start):%H:%M:%S}-{pd.Timestamp(end):%H:%M:%S}")
            elif control.value != ALL:
                parts.append(f"{name}={control.value}")
        return ", ".join(parts) or "the pickers"

    def _changed(self, _change: dict) -> None:
        self.figure = self._build()
        if self._output is not None:
            self._output.clear_output(wait=True)
            self._render()

    def _render(self) -> None:
        # Inside a widget only a live frontend shows the figure, so the plotly mime part is enough;
        # the embedded-JS part (~5 MB) would stall nbclient's Output emulation (papermill P1).
        with self._output:
            line = empty_figure_line(self.figure)
            if line is not None:  # one line, not a 450 px blank box
                display(Markdown(f"*{line}*"))
            else:
                display(figure_bundle(self.figure), raw=True)

    def widget(self) -> widgets.Widget:
        """Controls above an output area that always shows the current figure."""
        if self._output is None:
            self._output = widgets.Output()
            self._render()
        # The controls wrap onto a second line rather than squeeze a slider (and its readout) to 20 px.
        controls = widgets.HBox(list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        return widgets.VBox([controls, self._output])

    def _column(self, name: str) -> str:
        """The column a picker filters: a GPU by its one name (``gpu_name``, as in the legend and
        the tables) where the table has it, not by a bare index that two GPUs can share."""
        return "gpu_name" if name == "gpu" and "gpu_name" in self.frame.columns else name

    def _picker(self, name: str) -> widgets.Widget | None:
        frame = self.frame
        if frame is None or frame.empty or name not in frame.columns:
            return None
        if name == "time":
            times = sorted(pd.to_datetime(frame["time"], utc=True, errors="coerce").dropna().unique())
            if len(times) < 2:
                return None
            stamps = [pd.Timestamp(t) for t in times]
            # The readout shows "start-end" in a fixed width: drop the date when it is the same for
            # all events (the figure's axis shows it), or the end of the window is cut off.
            fmt = "%H:%M:%S" if len({s.date() for s in stamps}) == 1 else "%m-%d %H:%M:%S"
            labels = [(s.strftime(fmt), s) for s in stamps]
            start = self.initial.get("time_start")
            end = self.initial.get("time_end")
            lo = _nearest_index(times, start, default=0)
            hi = _nearest_index(times, end, default=len(times) - 1)
            return widgets.SelectionRangeSlider(
                options=labels, index=(lo, max(lo, hi)), description="window", continuous_update=False,
                layout=widgets.Layout(width="560px", min_width="420px"), style={"description_width": "initial"},
            )
        values = sorted({str(v) for v in frame[self._column(name)].dropna()}, key=natural_key)
        value = _initial_value(self.initial.get(name), values)
        return widgets.Dropdown(options=[ALL, *values], value=value, description=name)


def _initial_value(initial: Any, values: list[str]) -> str:
    """The option a parameter names: itself, or the GPU name it is the index or PCI id of
    (``gpu = "2"`` or ``"0000:54:00.0"`` picks ``0000:54:00.0 (GPU 2 at capture, 3 in the job)``:
    the index as seen at capture first); else every value."""
    if initial is None or str(initial).strip() in ("", ALL):
        return ALL
    text = str(initial).strip()
    if text in values:
        return text
    for wanted in (f"(GPU {text})", f"(GPU {text} at capture", f"(GPU {text},"):
        match = [v for v in values if wanted in v]
        if len(match) == 1:
            return match[0]
    match = [v for v in values if v.startswith(text.lower()) or v.startswith(f"{text.lower()} ")]
    return match[0] if len(match) == 1 else ALL


def _threshold_slider(name: str, spec: Any) -> widgets.Widget:
    if isinstance(spec, tuple):
        value, lo, hi = spec
    else:
        value, lo, hi = spec, 0, max(1, spec * 2)
    slider = widgets.IntSlider if all(isinstance(v, int) for v in (value, lo, hi)) else widgets.FloatSlider
    return slider(value=value, min=lo, max=hi, description=name, continuous_update=False,
                  style={"description_width": "initial"}, layout=widgets.Layout(width="380px", min_width="300px"))


def _nearest_index(times: list, moment: Any, default: int) -> int:
    if moment in (None, ""):
        return default
    target = pd.Timestamp(moment)
    target = target.tz_localize("UTC") if target.tzinfo is None else target.tz_convert("UTC")
    best = min(range(len(times)), key=lambda i: abs(pd.Timestamp(times[i]) - target))
    return best


def natural_key(text: str) -> tuple:
    return (0, int(text), "") if text.lstrip("-").isdigit() else (1, 0, text)


