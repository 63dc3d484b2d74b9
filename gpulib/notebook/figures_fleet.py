"""The fleet view for notebooks (health report): tables as DataFrames and one heat-map figure.

Pure functions of gathered evidence (:func:`gpulib.evidence.gather.gather`, the notebook's
``ev.gathered``), of the notebook's GPU tables (``ev.gpu_states()`` / ``ev.gpu_samples()``)
and of a :class:`~gpulib.fleet.ledger.Ledger`. Why a GPU x node grid: with 1,024 nodes a list
of findings is unreadable, but one hot, throttling or error-counting GPU is a single bright cell.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from gpulib.diagnose.drift import config_drift, diff_table
from gpulib.diagnose.node_facts import node_configs
from gpulib.diagnose.nodes import drift_findings
from gpulib.fleet.ledger import COUNTERS, Ledger, build_ledger
from gpulib.parsers.gpu_records import SLOWDOWN_REASONS

#: metric -> (colour-bar title, why it matters)
METRICS = {
    "temp_c": ("max temperature (C)", "a GPU far hotter than its neighbours has a cooling problem and will throttle"),
    "ecc_uncorrectable": ("uncorrectable ECC + remapped rows", "any uncorrectable memory error is a GPU to drain"),
    "throttle_s": ("thermal/power slowdown (s)", "time the GPU spent slowed by heat or power since driver load"),
    "throttled_pct": ("samples throttled (%)", "share of monitoring samples in which heat or power slowed the GPU"),
}


def _num(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def _slowdown_seconds(counters) -> float | None:
    if not isinstance(counters, dict) or not counters:
        return None
    return sum(v for k, v in counters.items() if k in SLOWDOWN_REASONS and v is not None) / 1e6


def gpu_heatmap(states: pd.DataFrame, samples: pd.DataFrame | None = None, metric: str = "temp_c") -> pd.DataFrame:
    """Host x GPU-index grid of ``metric`` (one of :data:`METRICS`); worst hosts first.

    ``states``/``samples`` are the notebook tables (``ev.gpu_states()``, ``ev.gpu_samples()``):
    columns ``host``, ``gpu_index`` and the GpuState / GpuSample fields.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; one of {', '.join(METRICS)}")
    parts = []
    if states is not None and not states.empty:
        s = states.assign(host=states["host"].fillna("?"))
        if metric == "temp_c":
            parts.append(s.assign(value=_num(s.get("temp_c", pd.Series(index=s.index, dtype=float)))))
        elif metric == "ecc_uncorrectable":
            value = sum(_num(s[c]).fillna(0) if c in s else 0 for c in ("ecc_aggregate_dbe", "ecc_volatile_dbe",
                                                                       "remapped_rows_uncorrectable"))
            parts.append(s.assign(value=value))
        elif metric == "throttle_s" and "throttle_counters_us" in s:
            parts.append(s.assign(value=[_slowdown_seconds(c) for c in s["throttle_counters_us"]]))
    if samples is not None and not samples.empty and metric in ("temp_c", "throttled_pct"):
        t = samples.assign(host=samples["host"].fillna("?"))
        if metric == "temp_c":
            parts.append(t.assign(value=_num(t["temp_c"])))
        else:
            slowed = [bool(set(r or []) & SLOWDOWN_REASONS) for r in t["throttle_reasons"]]
            t = t.assign(value=[100.0 * x for x in slowed])
            parts.append(t.groupby(["host", "gpu_index"], as_index=False)["value"].mean())
    if not parts:
        return pd.DataFrame()
    rows = pd.concat([p[["host", "gpu_index", "value"]] for p in parts], ignore_index=True).dropna(
        subset=["gpu_index"])
    rows["gpu_index"] = rows["gpu_index"].astype(int)
    grid = rows.pivot_table(index="host", columns="gpu_index", values="value", aggfunc="max")
    grid.columns = [f"GPU {c}" for c in grid.columns]
    order = grid.max(axis=1).sort_values(ascending=False, na_position="last").index
    return grid.loc[order]


def heatmap_figure(grid: pd.DataFrame, metric: str = "temp_c", max_hosts: int = 64) -> go.Figure:
    """The GPU x node heat map (hosts as rows, worst first, at most ``max_hosts`` rows)."""
    title, why = METRICS[metric]
    fig = go.Figure()
    if grid is None or grid.empty:
        fig.add_annotation(text=f"no {title} in this evidence", showarrow=False, x=0.5, y=0.5, xref="paper",
                           yref="paper")
        fig.update_layout(title=f"GPU x node: {title}", xaxis_visible=False, yaxis_visible=False)
        return fig
    shown = grid.head(max_hosts)
    fig.add_trace(go.Heatmap(z=shown.values, x=list(shown.columns), y=list(shown.index), colorscale="YlOrRd",
                             colorbar={"title": title}, hovertemplate="%{y} %{x}: %{z}<extra></extra>"))
    more = f" (worst {max_hosts} of {len(grid)} hosts)" if len(grid) > max_hosts else ""
    fig.update_layout(title=f"GPU x node: {title}{more}<br><sup>{why}</sup>",
                      yaxis={"autorange": "reversed", "type": "category"},
                      height=max(300, 22 * len(shown) + 120))
    return fig


def config_diff_frame(inputs) -> pd.DataFrame:
    """One row per odd node and one column per drifting field (``2.18.3 (majority 2.21.5)``);
    empty (with a ``host`` column) when every node agrees. ``inputs`` = ``ev.gathered``."""
    configs = node_configs(inputs)
    rows = diff_table(configs, config_drift(configs))
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["host"])


def config_findings(inputs) -> list[dict]:
    """Config drift as finding dicts (category ``driver_mismatch``, severity ``warning``) for a
    health report's recorded findings (``nbk.record``)."""
    configs = node_configs(inputs)
    return [f.to_dict() for f in drift_findings(config_drift(configs), configs, None, failed=False)]


def config_frame(inputs) -> pd.DataFrame:
    """Every node's configuration facts (one row per node), for the full inventory table."""
    rows = [{"host": c.host, **c.facts()} for c in node_configs(inputs).values()]
    return pd.DataFrame(rows).set_index("host") if rows else pd.DataFrame()


def ledger_frame(ledger: Ledger | list[str | Path], top: int = 10) -> pd.DataFrame:
    """The ledger's worst GPUs: recommendation, root causes, incidents, latest counters, reasons.
    ``ledger`` may be the paths to read (archive folder, diagnosis JSONs, evidence)."""
    if not isinstance(ledger, Ledger):
        ledger = build_ledger(list(ledger))
    rows = []
    for g in ledger.ranked()[:top]:
        rows.append({"gpu": g.key, "hosts": ", ".join(sorted(g.hosts)), "pci": g.pci, "serial": g.serial,
                     "recommendation": g.recommendation, "root_causes": len(g.root_causes),
                     "hardware_root_causes": len(g.hardware_root_causes), "incidents": g.incidents,
                     **{c: g.latest(c) for c in COUNTERS[:4]}, "reasons": "; ".join(g.reasons)})
    return pd.DataFrame(rows, columns=["gpu", "hosts", "pci", "serial", "recommendation", "root_causes",
                                       "hardware_root_causes", "incidents", *COUNTERS[:4], "reasons"])
