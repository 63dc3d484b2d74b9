"""Torch-free parts of the NCCL tester: sizes, factors, formatting, thresholds, verdict, slow-link analysis."""

from __future__ import annotations

import pytest

from gpulib.errors import InputError
from gpulib.nccl import cli as nccl_cli
from gpulib.nccl import thresholds
from gpulib.nccl.bandwidth import (
    average_bus_bandwidth,
    bus_factor,
    busbw_gbps,
    canonical_collective,
    infer_nranks,
)
from gpulib.nccl.report import Placement, Row, fit_number
from gpulib.nccl.sizes import counts, dtype, parse_size, size_sweep
from gpulib.nccl.slowlink import PairResult, localize, round_robin
from gpulib.nccl.verdict import RunShape, judge


@pytest.mark.parametrize("text,expected", [("8", 8), ("1K", 1024), ("64k", 65536), ("1M", 1 << 20),
                                           ("256M", 268435456), ("16G", 17179869184), ("2GiB", 2 << 30)])
def test_parse_size_is_binary(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "1Q", "-5", "M"])
def test_parse_size_rejects_garbage_with_a_hint(text):
    with pytest.raises(InputError, match="cannot read size"):
        parse_size(text)


def test_sweep_like_nccl_tests():
    assert size_sweep(1024, 65536, 4) == [1024, 4096, 16384, 65536]
    assert size_sweep(1 << 20, 3 << 20, 1, 1 << 20) == [1 << 20, 2 << 20, 3 << 20]
    with pytest.raises(InputError):
        size_sweep(64, 8, 2)


def test_counts_round_split_collectives_to_16_bytes():
    # 1024 B of float on 3 ranks: 256 elements, 85 per rank, rounded down to 84 (16 B multiple)
    c = counts("all_gather", 1024, 4, 3)
    assert (c.count, c.send_count, c.recv_count, c.size_bytes) == (84, 84, 252, 1008)
    c = counts("reduce_scatter", 1024, 4, 3)
    assert (c.count, c.send_count, c.recv_count, c.size_bytes) == (84, 252, 84, 1008)
    assert counts("all_reduce", 1024, 2, 3).count == 512
    assert dtype("fp16").name == "half" and dtype("float32").nbytes == 4


@pytest.mark.parametrize("collective,n,factor", [("all_reduce", 8, 1.75), ("all_reduce", 24, 46 / 24),
                                                 ("all_reduce", 4, 1.5), ("all_reduce", 2, 1.0),
                                                 ("all_gather", 2, 0.5), ("reduce_scatter", 4, 0.75),
                                                 ("alltoall", 1, 0.0), ("broadcast", 8, 1.0), ("reduce", 8, 1.0),
                                                 ("sendrecv", 8, 1.0)])
def test_busbw_factors_match_nccl_tests(collective, n, factor):
    assert bus_factor(collective, n) == pytest.approx(factor)
    assert busbw_gbps(collective, n, 1_000_000_000, 1.0) == pytest.approx(factor)


def test_infer_nranks_and_names():
    assert infer_nranks("all_reduce", 1.75) == 8 and infer_nranks("all_gather", 0.5) == 2
    assert canonical_collective("all_reduce_perf") == "all_reduce" and canonical_collective("allgather") == "all_gather"
    assert canonical_collective("bogus") is None
    assert average_bus_bandwidth([1.0, None, 3.0]) == 2.0


@pytest.mark.parametrize("value,width,text", [(0.2331, 6, "  0.23"), (9676.93, 7, "9676.93"), (43046.1, 7, "43046.1"),
                                              (100523.4, 7, " 100523"), (123456789.0, 7, "1.2e+08")])
def test_fit_number_like_getfloatstr(value, width, text):
    assert fit_number(value, width) == text


def _row(size, busbw, time_us=10.0, wrong=0):
    p = Placement(time_us, busbw, busbw, wrong)
    return Row(size, size // 4, "float", "sum", -1, p, p)


H100 = RunShape("all_reduce", "nccl", "NVIDIA H100 80GB HBM3", 8, 1)


def test_verdict_pass_fail_and_size_guard():
    table = thresholds.load()
    ok = judge([_row(1 << 34, 481.0)], H100, table, wrong_total=0)
    assert ok.status == "PASS" and "460" in ok.reason and "AzNHC" in ok.threshold_source
    slow = judge([_row(1 << 34, 300.0)], H100, table, wrong_total=0)
    assert slow.status == "FAIL" and "300.00" in slow.reason
    # AzNHC's 460 GB/s holds at 16 GiB; at 256 MiB the model's size curve scales it to ~369 GB/s
    small = judge([_row(256 << 20, 380.0)], H100, table, wrong_total=0)
    assert small.status == "PASS" and "scaled to this size" in small.reason
    # below the scaled minimum but near the model: not called slow before a run at the reference size
    marginal = judge([_row(256 << 20, 300.0)], H100, table, wrong_total=0)
    assert marginal.status == "WARN" and "-e 16 GiB" in marginal.reason
    # far below even for 256 MiB: the model fails it without asking for a rerun
    crawl = judge([_row(256 << 20, 60.0)], H100, table, wrong_total=0)
    assert crawl.status == "FAIL" and "far below the model" in crawl.reason
    wrong = judge([_row(1 << 34, 481.0)], H100, table, wrong_total=5)
    assert wrong.status == "FAIL" and "5 wrong" in wrong.reason


def test_verdict_without_threshold_says_so():
    cpu = RunShape("all_reduce", "gloo", "cpu", 2, 1)
    v = judge([_row(1 << 20, 0.5)], cpu, thresholds.load(), wrong_total=0)
    assert v.status == "WARN" and "no GPU model: bandwidth not judged" in v.reason and v.expected is None
    assert judge([_row(1 << 20, 0.5)], cpu, thresholds.load(), wrong_total=0, expect_busbw=0.1).status == "PASS"
    assert judge([_row(1 << 20, 0.5)], cpu, thresholds.load(), wrong_total=0, expect_busbw=1.0).status == "FAIL"


def test_latency_flag_and_timeout():
    table = thresholds.load()
    rows = [_row(8, 0.0, time_us=180.0), _row(1 << 34, 481.0)]
    v = judge(rows, H100, table, wrong_total=0)
    assert v.status == "WARN" and "180.0 us at 8 B > 100 us" in v.reason
    v = judge(rows, H100, table, wrong_total=0, max_latency_us=500)
    assert v.status == "PASS"
    v = judge([], H100, table, wrong_total=None, failure="timeout after 5 s: rank 3 did not arrive")
    assert v.status == "FAIL" and "rank 3" in v.reason


def test_thresholds_file_override_and_errors(tmp_path):
    custom = tmp_path / "t.yaml"
    custom.write_text("warn_margin: 0.05\nentries:\n  - {id: lab, gpu: L40S, min_busbw_gbps: 20, source: lab runs}\n")
    table = thresholds.load(custom)
    shape = RunShape("all_reduce", "nccl", "NVIDIA L40S", 4, 1)
    assert judge([_row(1 << 30, 20.5)], shape, table, wrong_total=0).status == "WARN"  # within 5 %
    assert judge([_row(1 << 30, 25.0)], shape, table, wrong_total=0).status == "PASS"
    bad = tmp_path / "bad.yaml"
    bad.write_text("entries:\n  - {gpu: H100}\n")
    with pytest.raises(InputError, match="bad.yaml: thresholds file is malformed"):
        thresholds.load(bad)
    with pytest.raises(InputError, match="missing.yaml: cannot read thresholds file: file not found"):
        thresholds.load(tmp_path / "missing.yaml")
    junk = tmp_path / "junk.yaml"
    junk.write_bytes(b"\x00\xff\xfe" * 200)
    with pytest.raises(InputError, match="junk.yaml: cannot read thresholds file: binary data"):
        thresholds.load(junk)


def test_round_robin_covers_every_pair_once_with_disjoint_rounds():
    for n in (2, 3, 4, 7, 8):
        rounds = round_robin(list(range(n)))
        pairs = [p for r in rounds for p in r]
        assert sorted(pairs) == sorted((a, b) for a in range(n) for b in range(a + 1, n))
        for r in rounds:
            ends = [e for p in r for e in p]
            assert len(ends) == len(set(ends))


def _pairs(n, slow_rank=None, slow_link=None):
    out = []
    for r in round_robin(list(range(n))):
        for a, b in r:
            bw = 0.05 if slow_rank in (a, b) or (a, b) == slow_link else 10.0 + a * 0.1
            out.append(PairResult(a, b, bw, 1e3 / bw))
    return out


def test_localize_names_the_slow_rank_and_the_slow_link():
    rep = localize(_pairs(8, slow_rank=5), mode="ranks", size_bytes=1 << 20, names={5: "rank 5 (node-b GPU 5)"})
    assert rep.suspects == [5] and "rank 5 (node-b GPU 5): all 7 of its pairs are slow" in rep.summary
    assert 5 in (rep.slowest.a, rep.slowest.b)
    link = localize(_pairs(4, slow_link=(1, 3)), mode="ranks", size_bytes=1 << 20)
    assert link.suspects == [] and "ranks 1-3" in link.summary
    healthy = localize(_pairs(4), mode="ranks", size_bytes=1 << 20)
    assert healthy.slow_pairs == [] and healthy.summary.startswith("none")
    two = localize(_pairs(2, slow_rank=1), mode="nodes", size_bytes=1)
    assert two.suspects == [] and "cannot tell which end" in two.summary


def test_forward_argv_round_trips():
    args = nccl_cli.tester_parser().parse_args(["--collective", "all_gather_perf", "-b", "1K", "-e", "64K", "-f", "4",
                                       "-c", "0", "--expect-busbw", "3.5", "--pairwise", "ranks"])
    again = nccl_cli.tester_parser().parse_args(nccl_cli.forward_argv(args))
    assert vars(again) == vars(args) and again.collective == "all_gather" and again.minbytes == 1024


def test_plots_from_a_result_and_a_pairwise_report():
    from gpulib.notebook.figures_nccl import (
        busbw_figure,
        expected_from_result,
        pairwise_heatmap,
        series_from_result,
    )

    result = {"rows": [{"size_bytes": 1024, "out_of_place": {"busbw_gbps": 1.5}, "in_place": None},
                       {"size_bytes": 4096, "out_of_place": {"busbw_gbps": 3.0}, "in_place": {"busbw_gbps": 2.5}}]}
    series = series_from_result(result)
    assert series == {"out-of-place": [(1024, 1.5), (4096, 3.0)], "in-place": [(4096, 2.5)]}
    fig = busbw_figure(series, expect_gbps=460)
    assert [t.name for t in fig.data] == ["out-of-place", "in-place"] and fig.layout.xaxis.type == "log"
    assert expected_from_result(result) is None  # gloo/CPU: no model, no dashed curve
    result["verdict"] = {"expected": {"curve": [[1024, 0.1], [4096, 0.4]]}}
    fig = busbw_figure(series, expected=expected_from_result(result))
    assert fig.data[-1].name == "expected (model)" and fig.data[-1].line.dash == "dash"
    assert list(fig.data[-1].y) == [0.1, 0.4]
    report = localize(_pairs(4, slow_rank=2), mode="ranks", size_bytes=1 << 20).to_dict()
    heat = pairwise_heatmap(report)
    z = heat.data[0].z
    assert len(z) == 4 and z[2][0] == z[0][2] == 0.05 and z[0][0] is None


def test_tester_outside_torchrun_says_how_to_start_it():
    import subprocess
    import sys

    env = {k: v for k, v in __import__("os").environ.items() if k not in ("RANK", "WORLD_SIZE")}
    proc = subprocess.run([sys.executable, "-m", "gpulib.nccl", "-b", "1K", "-e", "2K"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "not started by torchrun" in proc.stderr and "Traceback" not in proc.stderr


def test_nic_flags_travel_to_the_workers_and_are_checked_together():
    args = nccl_cli.tester_parser().parse_args(["--nic-gbps", "400", "--nics", "8"])
    again = nccl_cli.tester_parser().parse_args(nccl_cli.forward_argv(args))
    assert (again.nic_gbps, again.nics) == (400.0, 8)
    nccl_cli.validate_args(args)
    with pytest.raises(InputError, match="--nic-gbps and --nics go together"):
        nccl_cli.validate_args(nccl_cli.tester_parser().parse_args(["--nic-gbps", "400"]))
