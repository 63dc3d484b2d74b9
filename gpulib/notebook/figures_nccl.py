"""Plotly figures for the notebooks: busbw against message size, and the pairwise heat map.

Both take plain data: busbw curves (``series_from_result`` makes them from a ``gpulib.nccl-test/1``
dict, ``expected_from_result`` the model's curve beside them) and the ``pairwise`` part of that dict.
"""

from __future__ import annotations

import plotly.graph_objects as go

from gpulib.notebook.palette import kind_color


def busbw_figure(series: dict[str, list[tuple[int, float]]], expect_gbps: float | None = None,
                 expected: list[tuple[int, float]] | None = None) -> go.Figure:
    """``series``: name -> [(size_bytes, busbw_gbps)]. Log-x, because sizes sweep by factors of 2.

    ``expected`` is the bandwidth model's curve at the same sizes (``expected_from_result``), drawn
    dashed: where the measured curve leaves it shows *at which size* a run stops keeping up."""
    fig = go.Figure()
    for name, points in series.items():
        points = sorted(points)
        fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers", name=name,
                                 line={"color": kind_color(name)}))
    if expected:
        points = sorted(expected)
        fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines",
                                 name="expected (model)", line={"dash": "dash", "color": kind_color("expected (model)")}))
    if expect_gbps is not None:
        fig.add_hline(y=expect_gbps, line_dash="dash", annotation_text=f"expected {expect_gbps:g} GB/s")
    fig.update_layout(title="Bus bandwidth vs message size", xaxis_title="message size (bytes)",
                      yaxis_title="busbw (GB/s, 1e9)", xaxis_type="log", showlegend=True)
    return fig


def series_from_result(result: dict) -> dict[str, list[tuple[int, float]]]:
    """Out-of-place and in-place busbw curves from a ``gpulib.nccl-test/1`` dict."""
    out: dict[str, list[tuple[int, float]]] = {}
    for row in result.get("rows", []):
        for key, label in (("out_of_place", "out-of-place"), ("in_place", "in-place")):
            if row.get(key):
                out.setdefault(label, []).append((row["size_bytes"], row[key]["busbw_gbps"]))
    return out


def expected_from_result(result: dict) -> list[tuple[int, float]] | None:
    """The model's expected busbw curve stored in a result's verdict (None on gloo/CPU or an unknown GPU)."""
    expected = (result.get("verdict") or {}).get("expected") or {}
    curve = expected.get("curve")
    return [(int(s), float(g)) for s, g in curve] if curve else None


def pairwise_heatmap(pairwise: dict) -> go.Figure:
    """Pair bandwidth as a symmetric matrix; a slow endpoint is a dark row *and* column."""
    pairs = pairwise.get("pairs", [])
    ends = sorted({e for p in pairs for e in (p["a"], p["b"])})
    pos = {e: i for i, e in enumerate(ends)}
    z: list[list[float | None]] = [[None] * len(ends) for _ in ends]
    for p in pairs:
        z[pos[p["a"]]][pos[p["b"]]] = z[pos[p["b"]]][pos[p["a"]]] = p["algbw_gbps"]
    word = "rank" if pairwise.get("mode") == "ranks" else "node"
    labels = [f"{word} {e}" for e in ends]
    fig = go.Figure(go.Heatmap(z=z, x=labels, y=labels, colorscale="Viridis", colorbar_title="GB/s"))
    fig.update_layout(title=f"Pairwise sendrecv bandwidth ({pairwise.get('size_bytes')} B)")
    return fig
