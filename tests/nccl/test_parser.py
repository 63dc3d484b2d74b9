"""gpulib.parsers.nccl_tests on nccl-tests outputs of every historical layout (fixtures written for
these tests from the documented printf formats), on gpulib's own output, and on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulib.nccl.bandwidth import bus_factor
from gpulib.nccl.parsed import nranks_of, summarize_file
from gpulib.parsers import nccl_tests
from gpulib.parsers.base import read_text

FIXTURES = Path(__file__).parent / "fixtures"


def parse_fixture(name: str):
    text, problems = read_text(FIXTURES / name)
    assert not problems
    assert nccl_tests.looks_like(text[:8192])
    return nccl_tests.parse(text, source=name)


def test_current_layout_8xh100():
    result = parse_fixture("allreduce_8xh100_current_layout_healthy.txt")
    assert result.problems == []
    (run,) = result.records
    assert (run.version, run.nccl_library, run.program, run.collective) == ("2.20.0", "23102", "all_reduce_perf", "all_reduce")
    assert run.params["warmup_iters"] == 1 and run.params["iters"] == 20 and run.params["agg_iters"] == 1
    assert run.nranks == 8 and run.hosts == ["gpu-node-17"]
    assert run.devices[4].pci_bus_id == "0000:9b:00.0" and run.devices[4].name == "NVIDIA H100 80GB HBM3"
    assert run.rows[0].size_bytes == 8 and run.rows[0].count == 2 and run.rows[0].redop == "sum" and run.rows[0].root == -1
    last = run.rows[-1]
    assert last.size_bytes == 17179869184
    assert last.oop_busbw_gbps == pytest.approx(1.75 * last.oop_algbw_gbps, rel=0.01)
    assert run.wrong_total == 0 and run.oob_ok is True and run.complete
    # the printed average is the mean over every row, both placements (nccl-tests' definition)
    assert run.avg_busbw_gbps == pytest.approx(run.computed_avg_busbw_gbps, rel=0.02)


def test_2021_layout_error_column_and_bus_only_pci():
    (run,) = parse_fixture("allgather_4gpu_2021_layout_error_column.txt").records
    assert run.collective == "all_gather"  # from the file name: this layout has no program line
    assert [d.group for d in run.devices] == [None] * 4
    assert run.devices[0].pci_raw == "0x1b" and run.devices[0].pci_bus_id is None
    assert run.rows[0].redop == "none" and run.rows[0].root is None
    # the 2021 ``error`` column is the largest deviation, not a count: correctness comes from the OOB line
    assert run.rows[0].oop_wrong is None and run.rows[0].oop_max_error == 0.0 and run.rows[0].ip_max_error == 0.0
    assert run.oob_count == 0 and run.wrong_total == 0
    ratio = run.rows[-1].oop_busbw_gbps / run.rows[-1].oop_algbw_gbps
    assert ratio == pytest.approx(bus_factor("all_gather", 4), rel=0.01)


def test_2019_layout_without_redop_and_root():
    result = parse_fixture("allreduce_2gpu_2019_layout_no_redop_root.txt")
    (run,) = result.records
    assert run.params["ngpus"] == 2 and "agg_iters" not in run.params
    assert len(run.rows) == 9 and run.rows[-1].size_bytes == 134217728
    assert run.rows[-1].redop is None and run.rows[-1].type == "float"
    assert run.rows[-1].oop_busbw_gbps == run.rows[-1].oop_algbw_gbps  # n=2 all_reduce: factor 1
    assert run.wrong_total == 0 and run.avg_busbw_gbps == pytest.approx(run.computed_avg_busbw_gbps, rel=0.02)


def test_2021_broadcast_root_without_redop():
    (run,) = parse_fixture("broadcast_2node_2021_layout_root_no_redop.txt").records
    assert run.collective == "broadcast" and run.hosts == ["worker-a", "worker-b"]
    assert all(r.root == 0 and r.redop is None for r in run.rows)


def test_mpirun_prefixes_and_wrong_values():
    (run,) = parse_fixture("allreduce_16rank_2node_mpirun_prefix_wrong_values.txt").records
    assert run.nranks == 16 and run.hosts == ["node-a", "node-b"]
    assert run.oob_count == 3 and run.oob_ok is False and run.wrong_total == 3
    bad = [r for r in run.rows if r.ip_wrong]
    assert [r.size_bytes for r in bad] == [67108864]


def test_failure_lines_and_cut_off_table():
    result = parse_fixture("allreduce_4rank_nccl_failure_cut_off.txt")
    (run,) = result.records
    assert len(run.rows) == 3 and run.avg_busbw_gbps is None
    (failure,) = run.failures
    assert failure.host == "trn-c-04" and failure.kind == "NCCL" and "status=12" in failure.message


def test_several_runs_in_one_file():
    text = "".join((FIXTURES / n).read_text() for n in ("allreduce_8xh100_current_layout_healthy.txt",
                                                          "allreduce_8xh100_current_layout_slow_nvlink.txt"))
    runs = nccl_tests.parse(text).records
    assert len(runs) == 2 and [len(r.rows) for r in runs] == [12, 4]


def test_headerless_rows_fall_back_on_token_count():
    text = ("     1048576        262144     float     sum      -1    64.30   16.31   30.58       0    65.53   16.00   30.00   "
            "    0\n"
            "     4194304       1048576     float     sum      -1   134.21   31.25   58.60       0   135.44   30.97   58.07  "
            "     0\n")
    result = nccl_tests.parse(text, source="all_reduce_grepped.txt")
    (run,) = result.records
    assert run.rows[1].oop_busbw_gbps == 58.60 and run.rows[1].redop == "sum"
    assert any("cut off" in p.message for p in result.problems)
    assert run.nranks is None and nranks_of(run) == 16  # busbw/algbw = 1.875 = 2(n-1)/n


@pytest.mark.parametrize("text", ["", "hello\nworld\n", "\x00\x01garbage" * 50, "# nThread 1 nGpus 1 minBytes"])
def test_not_nccl_tests_is_a_problem_not_an_exception(text):
    result = nccl_tests.parse(text, source="junk.bin")
    assert result.records == []
    assert result.problems and result.problems[0].source == "junk.bin"


def test_looks_like_rejects_other_logs():
    assert not nccl_tests.looks_like("[ 12.3] NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus\n")
    assert not nccl_tests.looks_like("node-a:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")


def test_summary_verdicts_from_files():
    healthy = summarize_file(FIXTURES / "allreduce_8xh100_current_layout_healthy.txt")
    (run,) = healthy["runs"]
    assert run["verdict"]["status"] == "PASS" and run["busbw_at_largest_gbps"] > 460
    slow = summarize_file(FIXTURES / "allreduce_8xh100_current_layout_slow_nvlink.txt")
    assert slow["verdict"]["status"] == "FAIL" and "460" in slow["runs"][0]["verdict"]["reason"]
    wrong = summarize_file(FIXTURES / "allreduce_16rank_2node_mpirun_prefix_wrong_values.txt")
    assert wrong["verdict"]["status"] == "FAIL" and "3 wrong" in wrong["runs"][0]["verdict"]["reason"]
    cut = summarize_file(FIXTURES / "allreduce_4rank_nccl_failure_cut_off.txt")
    assert cut["verdict"]["status"] == "FAIL" and "status=12" in cut["runs"][0]["verdict"]["reason"]
    # no fleet threshold for 4 x A100 PCIe: the bandwidth model judges it (PCIe gen4)
    modelled = summarize_file(FIXTURES / "allgather_4gpu_2021_layout_error_column.txt")
    assert modelled["verdict"]["status"] == "PASS" and "PCIe gen4" in modelled["runs"][0]["verdict"]["reason"]


def test_summary_of_missing_and_binary_files(tmp_path):
    missing = summarize_file(tmp_path / "nope.txt")
    assert missing["runs"] == [] and "file not found" in missing["problems"][0]
    junk = tmp_path / "core.bin"
    junk.write_bytes(bytes(range(256)) * 64)
    assert "binary data" in summarize_file(junk)["problems"][0]


def test_nccl_parse_command(capsys):
    from gpulib.cli import main

    rc = main(["nccl-parse", str(FIXTURES / "allreduce_8xh100_current_layout_slow_nvlink.txt")])
    out = capsys.readouterr().out
    assert rc == 3 and "FAIL" in out and "H100" in out  # DESIGN.md: 3 = hard / no-go


def test_nccl_parse_json_output(capsys):
    import json

    from gpulib.cli import main

    rc = main(["nccl-parse", "--format", "json", str(FIXTURES / "allreduce_2gpu_2019_layout_no_redop_root.txt")])
    (summary,) = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["runs"][0]["nranks"] == 2 and summary["runs"][0]["largest_bytes"] == 134217728


def test_srun_labels_interleaved_processes_and_blank_lines():
    """16 one-rank jobs under ``srun --label``: every process prints its own header and rows, interleaved,
    with blank lines between; all rows are read and the ranks are not mistaken for 16."""
    (run,) = parse_fixture("allreduce_16proc_no_mpi_zero_busbw_srun.txt").records
    assert len(run.devices) == 16 and run.nranks == 1 and len(run.hosts) == 2
    assert len(run.rows) == 5 * 16 and {r.size_bytes for r in run.rows} == {128 << 20 << i for i in range(5)}
    assert all(r.oop_busbw_gbps == 0.0 and r.oop_algbw_gbps > 0 for r in run.rows)
    assert any("nranks 1" in d.text for d in run.debug)


def test_crash_before_the_first_size_keeps_the_run_and_the_nccl_error():
    result = parse_fixture("allreduce_2x8_crash_before_first_size.txt")
    (run,) = result.records
    assert run.rows == [] and run.nranks == 16
    (failure,) = run.failures
    assert failure.host == "node-q1" and failure.message.startswith("unhandled system error")
    warns = [d for d in run.debug if d.level == "WARN"]
    assert warns[0].text == "socketFinalizeAccept: wrong type 4 != 3" and warns[0].host == "node-q1"


def test_nccl_warn_without_failure_line_and_pre_2019_failure_lines():
    head = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
            "#   Rank  0 Pid  4411 on    box-1 device  0 [0x1a] Tesla V100-SXM2-32GB\n")
    warn = "box-1:4411:4470 [0] include/socket.h:403 NCCL WARN Net : Connection closed by remote peer\n"
    (run,) = nccl_tests.parse(head + warn, source="killed.log").records
    assert run.rows == [] and run.failures == [] and run.debug[0].level == "WARN"
    summary = summarize_file_text(head + warn)
    assert summary["verdict"]["status"] == "FAIL" and "Connection closed by remote peer" in summary["verdict"]["reason"]
    old = nccl_tests.parse(head + "NCCL failure common.cu:874 'unhandled system error'\n").records[0]
    assert old.failures[0].host is None and old.failures[0].message == "unhandled system error"
    alone = nccl_tests.parse(warn, source="warn-only.log")
    assert alone.records == [] and "Connection closed by remote peer" in alone.problems[0].message


def summarize_file_text(text: str) -> dict:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "all_reduce.log"
        path.write_text(text)
        (run,) = summarize_file(path)["runs"]
    return run


def test_headers_without_hash_na_error_column_and_avg_line_of_2020():
    """2020-era mpirun outputs printed the table header without ``#``, and ``N/A`` where no check ran."""
    text = (" nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 10 iters: 100 validation: 0\n"
            "   Rank  0 Pid  14926 on v100-gpu-1 device  0 [0x00] Tesla V100-PCIE-16GB\n"
            "   Rank  1 Pid   9210 on v100-gpu-5 device  0 [0x00] Tesla V100-PCIE-16GB\n"
            "       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error\n"
            "           8             2   float       0    41.30    0.00    0.00    N/A    40.88    0.00    0.00    N/A\n"
            "  2147483648     536870912   float       0   921003    2.33    2.33    N/A   920871    2.33    2.33    N/A\n"
            " Out of bounds values : 0 OK\n"
            " Avg bus bandwidth    : 1.1651 \n")
    (run,) = nccl_tests.parse(text, source="broadcast_perf.out").records
    assert run.columns[3] == "root" and run.rows[1].root == 0 and run.rows[1].oop_max_error is None
    assert run.rows[1].oop_busbw_gbps == 2.33 and run.nranks == 2 and run.collective == "broadcast"
    assert run.avg_busbw_gbps == 1.1651 and run.oob_count == 0 and run.wrong_total == 0


def test_2017_layout_bytes_op_res_columns_times_in_ms_and_rank_lines_without_pid():
    (run,) = parse_fixture("legacy_2017_bytes_op_res_dgx1_healthy.txt").records
    assert run.columns[:4] == ["size", "count", "type", "redop"] and run.devices[0].pid is None
    assert run.nranks == 8 and run.devices[7].name == "Tesla V100-SXM2-16GB" and run.params["ngpus"] == 8
    last = run.rows[-1]
    assert last.size_bytes == 1 << 30 and last.redop == "sum" and last.oop_max_error == 0.0
    # 14.878 ms printed; algbw = size / time holds in microseconds
    assert last.oop_time_us == pytest.approx(14878.0) and last.oop_algbw_gbps == pytest.approx(
        last.size_bytes / last.oop_time_us / 1e3, rel=0.01)
    assert run.oob_count == 0 and run.wrong_total == 0 and run.avg_busbw_gbps is not None


def test_rank_lines_cut_at_the_terminal_edge_still_count():
    text = ("#  Rank  0 Group  0 Pid  90110 on    gpu-k21 device  0 [0000:18:00] NVIDIA H1\n"
            "#  Rank  1 Group  0 Pid  90111 on    gpu-k21 device  1 [0000:2a:\n"
            "#  Rank  2 Group  0 Pid  90112 on    gpu-k21 device  2\n"
            "#  size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong\n"
            "   268435456      67108864     float     sum      -1   1201.3  223.45  391.04      0   1199.8  223.73  391.53  0\n")
    (run,) = nccl_tests.parse(text, source="pasted.txt").records
    assert [d.rank for d in run.devices] == [0, 1, 2] and run.devices[2].name == "unknown GPU"
    assert run.devices[0].pci_bus_id == "0000:18:00.0" and run.devices[1].pci_bus_id is None


def test_program_names_and_the_command_line_that_started_the_run():
    build = "".join(f"Linking  build/{c}.o > build/{c}_perf\n" for c in ("all_reduce", "all_gather", "sendrecv"))
    row = "   268435456      67108864     float     sum      -1   1201.3  223.45  391.04      0   1199.8  223.73  391.53      0\n"
    (run,) = nccl_tests.parse(build + "$ ./build/all_gather_perf -b 256M -e 256M -g 8\n" + row, source="x.txt").records
    assert run.collective == "all_gather" and run.collective_clue == "command line all_gather_perf (line 4)"
    (run,) = nccl_tests.parse("srun -N2 all_reduce_perf_mpi -b 1G\n" + row, source="x.txt").records
    assert run.collective == "all_reduce" and "all_reduce_perf_mpi" in run.collective_clue
    (run,) = nccl_tests.parse(build + row, source="x.txt").records
    assert run.collective is None  # three programs named, none started this run: the table must tell


def test_intel_mpi_prepend_rank_tags_inside_rows():
    """``mpirun -prepend-rank`` (Intel MPI) tags each write of a row, not only the start of the line."""
    text = ("[0] # nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
            "validation: 1 graph: 0\n"
            "[0] #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
            "#wrong\n"
            "[0]      1048576        262144     float     sum      -1[0]    1650.2    0.64    1.21      0[0]    2290.4    0.46"
            "    0.87      0\n"
            "[0]      2097152        524288     float     sum      -1[0]    2301.8    0.91    1.73      0[0]     420.3    4.99"
            "    9.36      0\n"
            "[0] # Avg bus bandwidth    : 3.2925\n")
    (run,) = nccl_tests.parse(text, source="pasted.txt").records
    assert len(run.rows) == 2 and run.rows[1].ip_busbw_gbps == 9.36 and run.rows[0].root == -1
    assert run.avg_busbw_gbps == 3.2925
