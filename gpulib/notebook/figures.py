"""Plotly figure builders: pure functions from evidence tables to ``go.Figure``.

Each builder takes a :class:`pandas.DataFrame` in the column layout produced by
:mod:`gpulib.notebook.tables` (``time`` is a UTC timestamp, ``host``/``gpu``/``rank`` identify the
actor) plus keyword thresholds, and never reads files or widgets. The same call draws the
headless figure and, through :class:`gpulib.notebook.FigurePanel`, the interactive one; an empty
table gives a figure that *says* it is empty, because a blank plot reads like a rendering bug.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpulib.evidence.thresholds import TEMP_LIMIT_C
from gpulib.notebook.palette import GpuPalette, kind_color, rank_color
from gpulib.notebook.tables import gpu_labels, throttle_periods

#: ``nvidia-smi topo -m`` link types from slowest to fastest path between two GPUs.
TOPO_RANK = {"SYS": 1, "NODE": 2, "PHB": 3, "PXB": 4, "PIX": 5, "NV": 6}

SEVERITY_LEVEL = {"ok": 0, "info": 0, "warning": 1, "error": 2, "critical": 3}

#: Half the time axis shown around events that all happened at one instant (one Xid, one
#: snapshot): plotly's autorange would zoom to +-1 ms and label the axis in microseconds.
ONE_INSTANT_PAD = pd.Timedelta(minutes=10)


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, template="plotly_white", xaxis_visible=False, yaxis_visible=False)
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 14})
    return fig


def _has(frame: pd.DataFrame | None, *columns: str) -> bool:
    return frame is not None and not frame.empty and all(c in frame.columns for c in columns)


def _time_axis(fig: go.Figure, times: pd.Series) -> None:
    """Fit every time axis to the data on the first draw: from the first to the last event, with a
    margin (a readable window around events that all share one instant).

    Left to autorange, a figure redrawn inside a widget could open on a stale or padded range
    (the data squeezed into a quarter of the axis until a control was touched); shapes and
    labels outside the data (a shaded period's text) must not widen it either."""
    stamps = pd.to_datetime(pd.Series(times), utc=True, errors="coerce").dropna()
    if not len(stamps):
        return
    lo, hi = (t.tz_localize(None) for t in (stamps.min(), stamps.max()))  # plotly.js draws naive UTC
    pad = ONE_INSTANT_PAD if lo == hi else (hi - lo) * 0.02
    fig.update_xaxes(range=[(lo - pad).isoformat(), (hi + pad).isoformat()], autorange=False)


def xid_events(frame: pd.DataFrame, palette: GpuPalette | None = None) -> go.Figure:
    """Xid (and other GPU kernel) events per GPU over time, one trace per GPU in its colour
    (hard Xids as crosses, the code in the hover text).

    A healthy node has none. One hard Xid (79, 48, 95, 119...) followed by nothing is the
    classic single-GPU failure; the same code on every GPU of a node points at the node
    (power, PCIe switch, driver) rather than one GPU.
    """
    title = "GPU kernel events per GPU"
    if not _has(frame, "time", "gpu", "xid"):
        return _empty(title, "no Xid events in this evidence (a healthy reading)")
    timed = frame[frame["time"].notna()]
    if timed.empty:
        return _empty(title, f"{len(frame)} Xid events, none with a timestamp (see the table)")
    palette = palette or GpuPalette.from_frames(frame)
    keys = palette.keys(timed)
    fig = go.Figure()
    names = palette.names_for(palette.order(keys.dropna()))
    for key in palette.order(keys.dropna()):
        rows = timed[keys == key]
        what = [f"Xid {int(x)} {n if isinstance(n, str) else ''}".strip() if pd.notna(x) else "kernel event"
                for x, n in zip(rows["xid"], rows["name"] if "name" in rows.columns else [None] * len(rows),
                                strict=True)]
        hard = rows["interruption"].eq("hard") if "interruption" in rows.columns else pd.Series(False, index=rows.index)
        fig.add_trace(go.Scatter(
            x=rows["time"], y=[names[key]] * len(rows), mode="markers", name=names[key],
            marker={"size": 12, "color": palette.color(key), "symbol": ["x" if h else "circle" for h in hard]},
            text=what, hovertext=rows["text"] if "text" in rows.columns else None, meta={"gpu": key},
            legendgroup=key, hovertemplate="%{x}<br>%{text}<br>%{hovertext}<extra>%{fullData.name}</extra>",
        ))
    others = timed[keys.isna()]
    if len(others):  # kernel lines about no GPU of the palette (a PCIe port's AER report)
        fig.add_trace(go.Scatter(x=others["time"], y=gpu_labels(others), mode="markers", name="other device",
                                 marker={"size": 10, "color": kind_color("other")},
                                 hovertext=others["text"] if "text" in others.columns else None))
    missing = len(frame) - len(timed)
    fig.update_layout(title=title + (f" ({missing} without time not drawn)" if missing else ""),
                      template="plotly_white", xaxis_title="time (UTC)", yaxis_title="GPU",
                      yaxis={"categoryorder": "category ascending"}, showlegend=True)
    _time_axis(fig, timed["time"])
    return fig


def gpu_memory(frame: pd.DataFrame, imbalance_gib: float = 2.0, palette: GpuPalette | None = None) -> go.Figure:
    """Memory used per GPU against its total, with the imbalance line (lowest + ``imbalance_gib``).

    In data-parallel training every rank holds the same model, so used memory should be within
    a few hundred MiB across GPUs; a GPU far above the others is the one that ran out (a long
    sequence bucket, a leak), one far below may have lost its process. A GPU that was lost is
    drawn as an empty slot marked "lost at T" (its absence is the finding, not a gap in the chart).
    Per GPU the snapshot with the most memory used is shown (what the job held at its peak).
    """
    title = "GPU memory used per GPU"
    if not _has(frame, "gpu", "mem_used_mib"):
        return _empty(title, "no GPU memory readings in this evidence")
    palette = palette or GpuPalette.from_frames(frame)
    keys = palette.keys(frame)
    read = frame[frame["mem_used_mib"].notna()]
    lost = [k for k in palette.order(keys.dropna()) if palette.lost_label(k) and k not in set(keys[read.index])]
    if read.empty and not lost:
        return _empty(title, "GPUs seen, but none reported memory use (lost GPU or N/A)")
    fig = go.Figure()
    peak = read.loc[read.groupby(keys[read.index])["mem_used_mib"].idxmax()] if len(read) else read
    peak_keys = keys[peak.index]
    shown = palette.order(set(peak_keys) | set(lost))
    names = palette.names_for(shown)
    if "mem_total_mib" in peak.columns and len(peak):
        fig.add_trace(go.Bar(x=[names[k] for k in peak_keys], y=peak["mem_total_mib"] / 1024, name="total GiB",
                             marker_color="#dee2e6", hoverinfo="skip"))
    top = max([float(peak["mem_total_mib"].max()) / 1024 if "mem_total_mib" in peak.columns and len(peak) else 0.0,
               float(read["mem_used_mib"].max()) / 1024 if len(read) else 0.0, 1.0])
    line = (read["mem_used_mib"].min() / 1024 + imbalance_gib) if len(read) else None
    for key in shown:
        rows = peak[peak_keys == key]
        used = rows["mem_used_mib"] / 1024 if len(rows) else [0]
        mark = palette.lost_label(key)
        fig.add_trace(go.Bar(x=[names[key]], y=list(used), name=names[key] + (f" ({mark})" if mark else ""),
                             marker_color=palette.color(key), meta={"gpu": key}, legendgroup=key,
                             text=[mark] if mark else None, textposition="none"))
        if mark:  # in its empty slot, clear of the imbalance line and its label; the date is in the name
            fig.add_annotation(x=names[key], y=_clear_of(line, top), yref="y", text=_short_mark(mark),
                               hovertext=mark, showarrow=False, yanchor="middle",
                               font={"color": palette.color(key), "size": 12})
    if line is not None:
        fig.add_hline(y=line, line_dash="dash", line_color="#d9480f", annotation_text=f"lowest + {imbalance_gib:g} GiB",
                      annotation_position="top left")
    # bars in the palette's order (a lost GPU in its own slot, not after the others), the axis fitted
    fig.update_xaxes(categoryorder="array", categoryarray=[names[k] for k in shown])
    fig.update_yaxes(range=[0, top * 1.05])
    # no legend: the x axis names every bar (a legend of eight long names left the bars ~100 px tall)
    fig.update_layout(title=title, barmode="overlay", template="plotly_white", yaxis_title="GiB (grey: total)",
                      showlegend=False, height=480)
    return fig


def _short_mark(mark: str) -> str:
    """``lost at<br>04:51:12Z``: the time of day of a "lost at <ISO time>" label, on two short lines."""
    head, _, when = mark.partition(" at ")
    return f"{head} at<br>{when.split('T', 1)[-1]}" if when else mark


def _clear_of(line: float | None, top: float) -> float:
    """Where an upright label in an empty bar slot sits: the middle of the free part of the axis
    above or below the dashed line (the line's own label lies just above it)."""
    if line is None:
        return top / 2
    above = top - line
    return line + above * 0.55 if above >= line else line * 0.45


def thermal_power(frame: pd.DataFrame, temp_limit_c: float = TEMP_LIMIT_C, palette: GpuPalette | None = None) -> go.Figure:
    """Temperature, SM clock vs its maximum, and power over time, one line per GPU, with the
    periods where a GPU reported a heat/power slowdown reason shaded.

    A throttled GPU runs its SM clock far below the maximum while its neighbours do not: its
    rank becomes a straggler and the *other* ranks then time out in NCCL, which looks like a
    network failure unless you look here.
    """
    title = "Temperature, SM clock and power per GPU"
    if not _has(frame, "time", "gpu"):
        return _empty(title, "no GPU time series in this evidence (collect with --sample-seconds; "
                             "examples/incident-thermal-straggler has one)")
    data = frame[frame["time"].notna()].sort_values("time")
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("temperature (C)", "SM clock (MHz)", "power (W)"))
    palette = palette or GpuPalette.from_frames(frame)
    keys = palette.keys(data)
    names = palette.names_for(palette.order(keys.dropna()))
    for key in palette.order(keys.dropna()):
        rows = data[keys == key]
        name, mark = names[key], palette.lost_label(key)
        for row, column in ((1, "temp_c"), (2, "sm_clock_mhz"), (3, "power_draw_w")):
            if column in rows.columns and rows[column].notna().any():
                fig.add_trace(go.Scatter(x=rows["time"], y=rows[column], mode="lines",
                                         name=name + (f" ({mark})" if mark else ""), legendgroup=key,
                                         showlegend=row == 1, line={"color": palette.color(key)}, meta={"gpu": key}),
                              row=row, col=1)
        if mark and len(rows):  # where its line ends: the GPU is gone, not idle
            last = rows.iloc[-1]
            fig.add_trace(go.Scatter(x=[last["time"]], y=[last.get("temp_c")], mode="markers+text", text=[mark],
                                     textposition="top left", name=mark, legendgroup=key, showlegend=False,
                                     marker={"symbol": "x", "size": 12, "color": palette.color(key)},
                                     meta={"gpu": key}), row=1, col=1)
    if "sm_clock_max_mhz" in data.columns and data["sm_clock_max_mhz"].notna().any():
        fig.add_hline(y=float(data["sm_clock_max_mhz"].max()), line_dash="dot", row=2, col=1,
                      annotation_text="max SM clock")
    if "power_limit_w" in data.columns and data["power_limit_w"].notna().any():
        fig.add_hline(y=float(data["power_limit_w"].max()), line_dash="dot", row=3, col=1,
                      annotation_text="power limit")
    fig.add_hline(y=temp_limit_c, line_dash="dash", line_color="#d9480f", row=1, col=1,
                  annotation_text=f"{temp_limit_c:g} C")
    for period in throttle_periods(data):
        fig.add_vrect(x0=period["start"], x1=period["end"], fillcolor="#fa5252", opacity=0.15,
                      line_width=0, layer="below",
                      annotation_text=f"{period['label']}: {', '.join(period['reasons'])}",
                      annotation_position="top left", annotation_font_size=9)
    fig.update_layout(title=title, template="plotly_white", height=720, hovermode="x unified", showlegend=True)
    _time_axis(fig, data["time"])
    return fig


def topology(matrix: pd.DataFrame) -> go.Figure:
    """``nvidia-smi topo -m`` GPU-to-GPU link types as a heat map (darker = faster path).

    NV# (NVLink) between every pair is what an HGX/DGX board should show; a pair that shows
    SYS or PHB instead has lost NVLink (check Xid 74 and ``nvidia-smi nvlink -s``).
    """
    title = "GPU interconnect (nvidia-smi topo -m)"
    if matrix is None or matrix.empty:
        return _empty(title, "no topology matrix in this evidence")
    score = matrix.map(lambda v: TOPO_RANK.get("NV" if str(v).startswith("NV") else str(v), 0))
    fig = go.Figure(go.Heatmap(z=score.values, x=list(matrix.columns), y=list(matrix.index),
                               text=matrix.values, texttemplate="%{text}", colorscale="Blues",
                               zmin=0, zmax=max(TOPO_RANK.values()), showscale=False))
    fig.update_layout(title=title, template="plotly_white", yaxis_autorange="reversed")
    return fig


def step_times(frame: pd.DataFrame, stall_factor: float = 2.0) -> go.Figure:
    """Seconds per training step per rank, with the stall line at ``stall_factor`` x median.

    Steady lines mean a healthy input pipeline. A rank whose steps suddenly take several times
    the median is either starving for data (loader, storage) or slowed by its GPU (see the
    thermal notebook); all ranks slowing together points at shared storage or the network.
    """
    title = "Step time per rank"
    if not _has(frame, "step", "step_time_s"):
        return _empty(title, "no step timings in the training logs")
    data = frame[frame["step_time_s"].notna()].sort_values("step")
    if data.empty:
        return _empty(title, "no step timings in the training logs")
    fig = go.Figure()
    group = data["rank"].fillna(-1).astype(int).astype(str) if "rank" in data.columns else "all"
    for rank, rows in data.groupby(group, sort=True):
        fig.add_trace(go.Scatter(x=rows["step"], y=rows["step_time_s"], mode="lines+markers",
                                 name="rank ?" if rank == "-1" else f"rank {rank}",
                                 line={"color": rank_color(rank) if rank != "-1" else kind_color("other")}))
    median = float(data["step_time_s"].median())
    fig.add_hline(y=median * stall_factor, line_dash="dash", line_color="#d9480f",
                  annotation_text=f"stall: {stall_factor:g} x median ({median:.2f} s)")
    fig.update_layout(title=title, template="plotly_white", xaxis_title="step", yaxis_title="s/step", showlegend=True)
    return fig


def loss_curve(frame: pd.DataFrame, resume_step: int | None = None) -> go.Figure:
    """Training loss over steps, with the step the resume starts from marked.

    After a resume the loss should continue where it was at that step; a jump up means the
    optimizer state or data position was not restored (or the wrong checkpoint was loaded).
    """
    title = "Loss by step"
    if not _has(frame, "step", "loss") or frame["loss"].notna().sum() == 0:
        return _empty(title, "no loss values in the training logs")
    data = frame[frame["loss"].notna()].sort_values("step")
    fig = go.Figure(go.Scatter(x=data["step"], y=data["loss"], mode="lines+markers", name="loss"))
    if resume_step is not None:
        fig.add_vline(x=resume_step, line_dash="dash", line_color="#2b8a3e",
                      annotation_text=f"resume from step {resume_step}")
    fig.update_layout(title=title, template="plotly_white", xaxis_title="step", yaxis_title="loss")
    return fig


def timeline(frame: pd.DataFrame) -> go.Figure:
    """Every timed event of the incident per host, coloured by the kind of source that reported
    it (kernel log, training log, nvidia-smi, ...; see ``steps.timeline_table``).

    Read it left to right: the *first* abnormal event is the root-cause candidate; the wall
    of NCCL timeouts minutes later on every host is the cascade.
    """
    title = "Incident timeline"
    if not _has(frame, "time", "event"):
        return _empty(title, "no timed events in this evidence")
    data = frame[frame["time"].notna()]
    if data.empty:
        return _empty(title, "no timed events in this evidence")
    hosts = (data["host"].fillna(UNKNOWN_HOST) if "host" in data.columns
             else pd.Series(UNKNOWN_HOST, index=data.index))
    files = (data["source"].fillna("").astype(str) if "source" in data.columns
             else pd.Series("", index=data.index))
    if "source_kind" in data.columns:
        kinds = data["source_kind"].fillna("other").astype(str)
    else:  # a bare timeline: one colour per file ("train.log:54" and "train.log:99" are one source)
        kinds = files.str.replace(r":\d+$", "", regex=True).replace("", "other")
    fig = go.Figure()
    for kind, rows in data.groupby(kinds, sort=True):
        fig.add_trace(go.Scatter(x=rows["time"], y=hosts[rows.index], mode="markers", name=str(kind),
                                 customdata=files[rows.index], hovertext=rows["event"],
                                 marker={"size": 10, "color": kind_color(kind)},
                                 hovertemplate="%{x}<br>%{y}<br>%{hovertext}<br>%{customdata}<extra>%{fullData.name}"
                                               "</extra>"))
    root = data[data["root_cause"].fillna(False).astype(bool)] if "root_cause" in data.columns else data.iloc[0:0]
    if len(root):  # the first failure, ringed, so the eye starts there and not at the wall of timeouts
        fig.add_trace(go.Scatter(x=root["time"], y=hosts[root.index], mode="markers+text", name="root cause",
                                 text=["root cause"] * len(root), textposition="top center",
                                 hovertext=root["event"], marker={"size": 22, "symbol": "star-open",
                                                                   "color": kind_color("root cause"),
                                                                   "line": {"width": 2}}))
        fig.add_vline(x=root["time"].iloc[0], line_dash="dot", line_color=kind_color("root cause"))
    fig.update_layout(title=title, template="plotly_white", xaxis_title="time (UTC)", yaxis_title="host",
                      showlegend=True)
    _time_axis(fig, data["time"])
    return fig


#: The row of events whose file belongs to no known host either.
UNKNOWN_HOST = "(unknown host)"


def rank_events(frame: pd.DataFrame) -> go.Figure:
    """NCCL/trainer events per rank over time (timeouts, errors, aborts).

    Ranks that report a watchdog timeout were *waiting*; the rank that reports nothing, or
    something else first, is the one that did not arrive.
    """
    title = "Events per rank"
    if not _has(frame, "time", "rank", "kind"):
        return _empty(title, "no per-rank events in the training logs")
    data = frame[frame["time"].notna() & frame["rank"].notna()]
    if data.empty:
        return _empty(title, "no timed per-rank events in the training logs")
    fig = go.Figure()
    for kind, rows in data.groupby("kind", sort=True):
        fig.add_trace(go.Scatter(x=rows["time"], y=rows["rank"].astype(int), mode="markers", name=str(kind),
                                 hovertext=rows["text"] if "text" in rows.columns else None,
                                 marker={"size": 10, "color": kind_color(kind)}))
    fig.update_layout(title=title, template="plotly_white", xaxis_title="time (UTC)", yaxis_title="rank",
                      yaxis={"dtick": 1}, showlegend=True)
    _time_axis(fig, data["time"])
    return fig


def health_matrix(frame: pd.DataFrame) -> go.Figure:
    """Fleet health: one row per GPU, one column per check, coloured by the worst severity.

    Green everywhere is the nightly goal; a column lighting up across many GPUs of one host is
    a host problem (driver, cooling), a row lighting up is a GPU to drain.
    """
    title = "Fleet health (GPU x check)"
    if not _has(frame, "host", "gpu", "check", "severity"):
        return _empty(title, "no GPUs in this evidence")
    data = frame.assign(actor=gpu_labels(frame), level=frame["severity"].map(SEVERITY_LEVEL).fillna(0))
    grid = data.pivot_table(index="actor", columns="check", values="level", aggfunc="max", fill_value=0)
    fig = go.Figure(go.Heatmap(
        z=grid.values, x=list(grid.columns), y=list(grid.index), zmin=0, zmax=3, showscale=False,
        colorscale=[[0, "#2b8a3e"], [0.33, "#e6a700"], [0.66, "#d9480f"], [1, "#b00020"]],
    ))
    fig.update_layout(title=title, template="plotly_white", yaxis_autorange="reversed",
                      height=max(300, 24 * len(grid.index) + 120))
    return fig


#: SEL entry kinds (:meth:`EvidenceTables.sel_events`) and how they are drawn.
SEL_STYLE = {"loss": ("#b00020", "x"), "restored": ("#2b8a3e", "circle"), "power": ("#868e96", "diamond")}


def sel_power_events(frame: pd.DataFrame) -> go.Figure:
    """BMC event-log power entries per node over the evidence window: red crosses where a supply or
    the node lost power, green dots where it came back, a grey line between them while it was out.

    Good: no red, or each red cross with its green dot minutes later (a feed switched over). Bad:
    a cross with no dot (a supply still failed: the node runs on one PSU and browns out under full
    GPU load), crosses on many nodes at one instant (the rack's feed or PDU, not a supply), or the
    same node again and again (a flapping supply to replace before it takes a job down)."""
    title = "BMC event log: power events per node"
    if not _has(frame, "time", "host", "kind"):
        return _empty(title, "no BMC event log (ipmitool sel elist) in this evidence")
    timed = frame[frame["time"].notna()].assign(host=frame["host"].fillna("?"))
    if timed.empty:
        return _empty(title, f"{len(frame)} power entries, none with a usable time (Pre-Init): see the table")
    fig = go.Figure()
    for _, row in timed[(timed["kind"] == "loss") & timed["restored_at"].notna()].iterrows():
        fig.add_trace(go.Scatter(x=[row["time"], row["restored_at"]], y=[row["host"]] * 2, mode="lines",
                                 line={"color": "#f08c8c", "width": 6}, showlegend=False, hoverinfo="skip"))
    for kind, (color, symbol) in SEL_STYLE.items():
        rows = timed[timed["kind"] == kind]
        if rows.empty:
            continue
        fig.add_trace(go.Scatter(x=rows["time"], y=rows["host"], mode="markers", name=kind,
                                 marker={"color": color, "symbol": symbol, "size": 11},
                                 text=rows["sensor"] + ": " + rows["event"], hovertemplate="%{text}<br>%{x}"))
    _time_axis(fig, timed["time"])
    fig.update_layout(title=title, template="plotly_white", xaxis_title="time (UTC, BMC clock corrected)",
                      height=max(300, 40 * timed["host"].nunique() + 160))
    return fig


def storage_usage(frame: pd.DataFrame, warn_pct: float = 90.0) -> go.Figure:
    """``/dev/shm``, data and checkpoint paths: how full each was per node when captured (one point
    per capture, so nightly captures draw the trend). Good: well below the line and flat. Bad:
    ``/dev/shm`` at 100 % (DataLoader workers die with a bus error), a checkpoint path climbing
    towards 100 % (the next save is truncated), a node whose path differs from its peers."""
    title = "Storage: use per node and path"
    if not _has(frame, "host", "path", "use_pct"):
        return _empty(title, "no df / stat -f output in this evidence (gpulib collect --data PATH records it)")
    data = frame.assign(host=frame["host"].fillna("?"))
    fig = go.Figure()
    several = data["time"].notna().any() and data.groupby(["host", "path"])["time"].nunique().max() > 1
    for path, rows in data.groupby("path", sort=True):
        label = rows.apply(lambda r: f"{r['used_gib']:.1f} of {r['size_gib']:.1f} GiB", axis=1)
        if several:
            for host, hrows in rows.groupby("host"):
                fig.add_trace(go.Scatter(x=hrows["time"], y=hrows["use_pct"], mode="lines+markers",
                                         name=f"{host} {path}", text=label[hrows.index]))
        else:
            fig.add_trace(go.Bar(x=rows["use_pct"], y=rows["host"], orientation="h", name=path, text=label))
    if several:
        fig.add_hline(y=warn_pct, line_dash="dash", annotation_text=f"{warn_pct:g} %")
        fig.update_layout(xaxis_title="captured (UTC)", yaxis_title="used %", yaxis_range=[0, 105])
    else:
        fig.add_vline(x=warn_pct, line_dash="dash", annotation_text=f"{warn_pct:g} %")
        fig.update_layout(barmode="group", xaxis_title="used %", xaxis_range=[0, 105],
                          height=max(300, 30 * len(data) + 160))
    fig.update_layout(title=title, template="plotly_white")
    return fig
