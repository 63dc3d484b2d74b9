"""One colour and one name per GPU in every figure; lost GPUs shown; the root cause marked."""

from __future__ import annotations

import re

import pandas as pd

from gpulib.notebook import figures as plots
from gpulib.notebook import widgets as widgets_mod
from gpulib.notebook.palette import KIND_COLORS, GpuPalette
from gpulib.notebook.tables import DEFAULT_EVIDENCE, open_evidence

#: The bundled Xid 79 incident: after the crash nvidia-smi renumbered the survivors, so the
#: snapshot calls 0000:54:00.0 "GPU 2" while the GPU that fell off, 0000:4f:00.0, was GPU 2.
LOST = "gx-a800-102|0000:4f:00.0"
SURVIVOR = "gx-a800-102|0000:54:00.0"


def gpu_colours(*figures) -> dict[str, set[str]]:
    """GPU key -> every colour its traces have, over all ``figures``."""
    out: dict[str, set[str]] = {}
    for fig in figures:
        for trace in fig.data:
            key = (trace.meta or {}).get("gpu") if isinstance(trace.meta, dict) else None
            if key:
                colour = trace.marker.color if trace.type == "bar" or trace.mode == "markers" else trace.line.color
                colour = colour if isinstance(colour, str) else trace.marker.color
                out.setdefault(key, set()).add(colour)
    return out


def test_the_evidence_palette_names_gpus_by_pci_with_the_index_at_capture_and_knows_the_lost_one():
    ev = open_evidence(DEFAULT_EVIDENCE)
    palette = ev.gpu_palette()
    # NCCL's rank lines give the job's indices: the survivor was GPU 3 in the job, GPU 2 at capture
    assert palette.short[LOST] == "0000:4f:00.0 (GPU 2 in the job)"
    assert palette.short[SURVIVOR] == "0000:54:00.0 (GPU 2 at capture, 3 in the job)"
    assert palette.name(SURVIVOR) == "gx-a800-102 " + palette.short[SURVIVOR]  # two hosts: the host leads
    first = [re.search(r"\(GPU \d+( in the job| at capture)?", name)[0] for key, name in palette.short.items()
             if key.startswith("gx-a800-102|")]
    assert len(first) == len(set(first)) == 8, first  # no two GPUs of the host are just "GPU 2"
    assert palette.lost_label(LOST) == "lost at 2026-01-17T04:51:12Z"  # the Xid 79, not the later snapshot
    assert palette.lost_label(SURVIVOR) is None
    assert len(set(palette.colors.values())) == len(palette.colors)  # eight GPUs, eight colours


def test_one_gpu_has_one_colour_in_every_panel_and_the_lost_gpu_is_in_the_memory_chart():
    ev = open_evidence(DEFAULT_EVIDENCE)
    palette = ev.gpu_palette()
    memory = plots.gpu_memory(ev.gpu_states(), palette=palette)
    xids = plots.xid_events(ev.kernel_events().query("xid.notna()"), palette=palette)
    colours = gpu_colours(memory, xids)
    assert LOST in colours and all(len(c) == 1 for c in colours.values()), colours
    assert colours[LOST] == {palette.color(LOST)}
    [lost_bar] = [t for t in memory.data if (t.meta or {}).get("gpu") == LOST]
    assert list(lost_bar.text) == ["lost at 2026-01-17T04:51:12Z"] and "lost at" in lost_bar.name
    assert list(lost_bar.x) == [palette.short[LOST]]  # one host in the chart: the host is not repeated


def test_a_picker_keeps_each_gpus_colour_even_without_the_evidence_palette():
    states = pd.DataFrame({"host": ["n1"] * 3, "gpu": ["0", "1", "2"], "gpu_index": [0, 1, 2],
                           "pci_bus_id": ["0000:07:00.0", "0000:0f:00.0", "0000:47:00.0"],
                           "mem_used_mib": [1000.0, 2000.0, 3000.0], "mem_total_mib": [81920.0] * 3})
    panel = widgets_mod.FigurePanel(plots.gpu_memory, states, pickers=("gpu",))
    before = gpu_colours(panel.figure)
    panel.controls["gpu"].value = "2"
    after = gpu_colours(panel.figure)
    assert list(after) == ["n1|0000:47:00.0"] and after["n1|0000:47:00.0"] == before["n1|0000:47:00.0"]
    assert before["n1|0000:47:00.0"] != before["n1|0000:07:00.0"]


def test_event_kinds_keep_their_colour_and_the_legend_when_a_rank_is_picked():
    events = pd.DataFrame({"time": pd.to_datetime(["2025-01-01T00:00:00Z", "2025-01-01T00:01:00Z"]),
                           "rank": [3, 8], "kind": ["watchdog_timeout", "nccl_error"], "text": ["t", "e"]})
    panel = widgets_mod.FigurePanel(plots.rank_events, events, pickers=("rank",))
    panel.controls["rank"].value = "8"
    [trace] = panel.figure.data
    assert trace.name == "nccl_error" and trace.marker.color == KIND_COLORS["nccl_error"]
    assert panel.figure.layout.showlegend is True


def test_the_root_cause_is_marked_on_the_timeline():
    ev = open_evidence(DEFAULT_EVIDENCE)
    fig = plots.timeline(ev.timeline())
    [root] = [t for t in fig.data if t.name == "root cause"]
    assert [pd.Timestamp(x) for x in root.x] == [pd.Timestamp("2026-01-17T04:51:12")] and list(root.y) == ["gx-a800-102"]
    assert "Xid 79" in root.hovertext[0]
    assert any(s.type == "line" for s in fig.layout.shapes)  # and a line down the whole chart


def test_renumbered_indices_are_named_in_the_label():
    frame = pd.DataFrame({"time": pd.to_datetime(["2025-01-01T00:00:00Z", "2025-01-01T01:00:00Z"]),
                          "host": ["n1", "n1"], "pci_bus_id": ["0000:54:00.0", "0000:54:00.0"], "gpu_index": [3, 2]})
    assert GpuPalette.from_frames(frame).name("n1|0000:54:00.0") == "0000:54:00.0 (GPU 3, later 2)"


def test_the_job_index_is_named_beside_the_index_at_capture_and_tables_and_pickers_use_the_name():
    ev = open_evidence(DEFAULT_EVIDENCE)
    ranks = ev.ranks()
    assert ranks.set_index("rank").loc[11, "gpu_name"] == "0000:54:00.0 (GPU 2 at capture, 3 in the job)"
    states = ev.gpu_states()
    assert set(states["gpu_name"]) <= set(ev.gpu_palette().short.values())
    panel = widgets_mod.FigurePanel(plots.gpu_memory, states, pickers=("gpu",), initial={"gpu": "2"},
                                    palette=ev.gpu_palette())
    assert panel.controls["gpu"].value == "0000:54:00.0 (GPU 2 at capture, 3 in the job)"  # the index as captured
    assert [t.name for t in panel.figure.data if (t.meta or {}).get("gpu")] == [ev.gpu_palette().short[SURVIVOR]]
