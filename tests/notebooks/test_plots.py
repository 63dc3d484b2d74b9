"""Figure builders: the traces and shapes an engineer relies on, from small synthetic tables."""

from __future__ import annotations

import pandas as pd

from gpulib.notebook import figures as plots


def _samples() -> pd.DataFrame:
    """Two GPUs sampled every 30 s; GPU 3 throttles (0x68) in samples 2-4, then recovers."""
    rows = []
    start = pd.Timestamp("2025-04-22T12:47:30Z")
    for i in range(6):
        for gpu in ("0", "3"):
            slow = gpu == "3" and 2 <= i <= 4
            rows.append({"time": start + pd.Timedelta(seconds=30 * i), "host": "dgx-09", "gpu": gpu,
                         "gpu_index": int(gpu), "temp_c": 88.0 if slow else 65.0,
                         "sm_clock_mhz": 705.0 if slow else 1410.0, "sm_clock_max_mhz": 1410.0,
                         "power_draw_w": 250.0, "power_limit_w": 400.0,
                         "throttle_reasons": ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"]
                         if slow else []})
    return pd.DataFrame(rows)


def test_thermal_power_shades_each_throttle_period_and_draws_one_line_per_gpu_and_metric():
    fig = plots.thermal_power(_samples(), temp_limit_c=85)
    names = {t.name for t in fig.data}
    assert names == {"GPU 0", "GPU 3"}  # one host: no host prefix; no PCI id in this table: the index
    assert len(fig.data) == 6  # 2 GPUs x (temp, clock, power)
    colours = {}
    for trace in fig.data:  # one colour per GPU in all three rows, and two GPUs never share one
        colours.setdefault(trace.meta["gpu"], set()).add(trace.line.color)
    assert all(len(c) == 1 for c in colours.values()) and len(set.union(*colours.values())) == 2, colours
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(rects) == 3  # the one period, shaded on each of the three rows
    assert {(pd.Timestamp(r.x0), pd.Timestamp(r.x1)) for r in rects} == {
        (pd.Timestamp("2025-04-22T12:48:30Z"), pd.Timestamp("2025-04-22T12:49:30Z"))}
    annotations = " ".join(a.text for a in fig.layout.annotations)
    assert "hw_thermal_slowdown" in annotations and "85 C" in annotations


def test_throttle_periods_ignore_idle_and_power_cap_reasons():
    frame = _samples()
    frame["throttle_reasons"] = [["gpu_idle"] if g == "0" else ["sw_power_cap"] for g in frame["gpu"]]
    assert plots.throttle_periods(frame) == []


def test_xid_events_one_trace_per_gpu_in_its_colour_and_hard_codes_marked():
    events = pd.DataFrame([
        {"time": pd.Timestamp("2025-03-11T03:12:07Z"), "host": "hgx-018", "gpu": "5", "xid": 79,
         "name": "GPU has fallen off the bus", "interruption": "hard", "text": "NVRM: Xid (PCI:0000:ab:00): 79"},
        {"time": pd.Timestamp("2025-03-11T03:14:00Z"), "host": "hgx-018", "gpu": "2", "xid": 13,
         "name": "Graphics engine exception", "interruption": "soft", "text": "NVRM: Xid 13"},
        {"time": pd.NaT, "host": "hgx-018", "gpu": "2", "xid": 13, "name": "Graphics engine exception",
         "interruption": "soft", "text": "no time"},
    ])
    fig = plots.xid_events(events)
    assert [t.name for t in fig.data] == ["GPU 2", "GPU 5"]
    assert list(fig.data[1].marker.symbol) == ["x"] and list(fig.data[0].marker.symbol) == ["circle"]
    assert list(fig.data[1].y) == ["GPU 5"] and list(fig.data[1].text) == ["Xid 79 GPU has fallen off the bus"]
    assert fig.data[0].marker.color != fig.data[1].marker.color
    assert "1 without time" in fig.layout.title.text


def test_empty_tables_give_a_figure_that_says_so():
    said = {}
    for build in (plots.xid_events, plots.thermal_power, plots.gpu_memory, plots.step_times, plots.timeline,
                  plots.topology, plots.health_matrix):
        fig = build(pd.DataFrame())
        assert not fig.data and len(fig.layout.annotations) == 1
        said[build.__name__] = fig.layout.annotations[0].text
    assert said == {"xid_events": "no Xid events in this evidence (a healthy reading)",
                    "thermal_power": "no GPU time series in this evidence (collect with --sample-seconds; "
                                     "examples/incident-thermal-straggler has one)",
                    "gpu_memory": "no GPU memory readings in this evidence",
                    "step_times": "no step timings in the training logs",
                    "timeline": "no timed events in this evidence",
                    "topology": "no topology matrix in this evidence",
                    "health_matrix": "no GPUs in this evidence"}


def test_gpu_memory_threshold_line_sits_at_lowest_plus_imbalance():
    states = pd.DataFrame({"host": ["ws-04"] * 3, "gpu": ["0", "1", "2"], "mem_used_mib": [30720.0, 31744.0, 0.0],
                           "mem_total_mib": [81920.0] * 3})
    fig = plots.gpu_memory(states, imbalance_gib=2.0)
    line = [s for s in fig.layout.shapes if s.type == "line"][0]
    assert line.y0 == 2.0
    assert [t.y[0] for t in fig.data[1:]] == [30.0, 31.0, 0.0]  # one bar trace per GPU, after the totals
    assert len({t.marker.color for t in fig.data[1:]}) == 3


def test_step_times_one_trace_per_rank_with_stall_line():
    steps = pd.DataFrame({"rank": [0, 0, 1, 1], "step": [10, 20, 10, 20], "step_time_s": [1.0, 1.0, 1.0, 3.0]})
    fig = plots.step_times(steps, stall_factor=2.5)
    assert [t.name for t in fig.data] == ["rank 0", "rank 1"]
    assert [s for s in fig.layout.shapes if s.type == "line"][0].y0 == 2.5


def test_topology_scores_nvlink_above_sys():
    matrix = pd.DataFrame([["X", "NV18"], ["SYS", "X"]], index=["GPU0", "GPU1"], columns=["GPU0", "GPU1"])
    fig = plots.topology(matrix)
    z = fig.data[0].z
    assert z[0][1] == plots.TOPO_RANK["NV"] and z[1][0] == plots.TOPO_RANK["SYS"]


def test_health_matrix_takes_worst_severity_per_cell():
    grid = pd.DataFrame([
        {"host": "n1", "gpu": "0", "check": "thermal", "severity": "ok"},
        {"host": "n1", "gpu": "0", "check": "thermal", "severity": "critical"},
        {"host": "n1", "gpu": "1", "check": "thermal", "severity": "warning"},
    ])
    fig = plots.health_matrix(grid)
    assert list(fig.data[0].y) == ["n1 GPU 0", "n1 GPU 1"]
    assert [row[0] for row in fig.data[0].z] == [3, 1]


def test_loss_curve_marks_the_resume_step():
    fig = plots.loss_curve(pd.DataFrame({"step": [1000, 2000, 4000], "loss": [3.0, 2.5, 2.1]}), resume_step=4000)
    assert [s for s in fig.layout.shapes if s.type == "line"][0].x0 == 4000


def test_timeline_one_trace_per_source_kind_and_an_unknown_host_row_only_for_hostless_files():
    frame = pd.DataFrame({"time": pd.to_datetime(["2026-01-17T04:51:12Z", "2026-01-17T05:01:13Z",
                                                  "2026-01-17T05:01:15Z", "2026-01-17T05:01:16Z"]),
                          "host": ["b", "a", "a", None],
                          "source": ["b/journal.txt:20", "logs/train-a.log:54", "logs/train-b.log:99", "x.txt"],
                          "source_kind": ["kernel log", "training log", "training log", "other"],
                          "event": ["Xid 79", "watchdog timeout", "torchrun exit", "?"]})
    fig = plots.timeline(frame)
    assert [t.name for t in fig.data] == ["kernel log", "other", "training log"]
    assert list(fig.data[2].y) == ["a", "a"] and list(fig.data[1].y) == [plots.UNKNOWN_HOST]
    assert list(fig.data[2].customdata) == ["logs/train-a.log:54", "logs/train-b.log:99"]  # the file, on hover


def _span_minutes(fig) -> float:
    low, high = (pd.Timestamp(v) for v in fig.layout.xaxis.range)
    return (high - low).total_seconds() / 60


def test_time_plots_of_one_instant_get_a_readable_window_around_it():
    """One Xid (or every event at the same second): plotly would zoom to +-1 ms."""
    moment = pd.Timestamp("2026-01-17T04:51:12Z")
    xid = pd.DataFrame([{"time": moment, "host": "gx-102", "gpu": "2", "xid": 79, "name": "fell off the bus",
                         "interruption": "hard", "text": "NVRM: Xid 79"}])
    one_sample = _samples().iloc[:1]
    ranks = pd.DataFrame({"time": [moment, moment], "rank": [3, 4], "kind": ["watchdog_timeout"] * 2, "text": ["t"] * 2})
    events = pd.DataFrame({"time": [moment], "host": ["gx-102"], "source": ["k.log"], "event": ["Xid 79"]})
    for fig in (plots.xid_events(xid), plots.rank_events(ranks), plots.timeline(events)):
        assert _span_minutes(fig) == 20
        assert pd.Timestamp(fig.layout.xaxis.range[0]) == moment.tz_localize(None) - pd.Timedelta(minutes=10)
    thermal = plots.thermal_power(one_sample)
    assert all(axis.range is not None for axis in (thermal.layout.xaxis, thermal.layout.xaxis2, thermal.layout.xaxis3))
    two = pd.concat([xid, xid.assign(time=moment + pd.Timedelta(minutes=2))], ignore_index=True)
    low, high = (pd.Timestamp(v) for v in plots.xid_events(two).layout.xaxis.range)  # fitted on the first draw
    assert low < moment.tz_localize(None) and high > (moment + pd.Timedelta(minutes=2)).tz_localize(None)
    assert (high - low) < pd.Timedelta(minutes=2.2)  # a 2 % margin, not a quarter of the axis


def test_timeline_without_source_kind_colours_by_file_not_by_line():
    frame = pd.DataFrame({"time": pd.to_datetime(["2026-01-17T04:51:12Z", "2026-01-17T05:01:13Z",
                                                  "2026-01-17T05:01:15Z"]),
                          "host": ["b", "a", "a"], "source": ["b/journal.txt:20", "train-a.log:54", "train-a.log:99"],
                          "event": ["Xid 79", "watchdog timeout", "torchrun exit"]})
    fig = plots.timeline(frame)
    assert [t.name for t in fig.data] == ["b/journal.txt", "train-a.log"]
    assert list(fig.data[1].hovertext) == ["watchdog timeout", "torchrun exit"]
