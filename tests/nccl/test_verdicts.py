"""Verdicts on nccl-tests outputs of every kind: one fixture per verdict and per cause.

The fixtures were written for these tests, modelled on real outputs posted in public threads
(layouts, prefixes and the shape of the numbers as nccl-tests prints them; host names, PIDs and
values are our own). Each line of ``EXPECTED`` is what an engineer who read the thread would
conclude; ``test_agreement`` reports how many of them the verdict code gets right.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulib.nccl.parsed import summarize_file

FIXTURES = Path(__file__).parent / "fixtures"

#: fixture -> (status, a key of a named cause or a phrase the reason must hold)
EXPECTED = {
    # healthy
    "allreduce_8xh100_current_layout_healthy.txt": ("PASS", "azure-nd96isr-h100-v5"),
    "allreduce_8xh200_nvls_healthy.txt": ("PASS", "azure-nd96isr-h200-v5"),
    "allreduce_2x8_h100_ib400_srun_healthy.txt": ("PASS", "8 x 400 Gb/s NICs (NCCL_DEBUG topology lines)"),
    "allreduce_4xa100_pcie_2020_layout_error_column_healthy.txt": ("PASS", "intra-node PCIe gen4"),
    "allreduce_72xgb200_nvl72_healthy.txt": ("PASS", "NVLink domain"),
    "allgather_4gpu_2021_layout_error_column.txt": ("PASS", "intra-node PCIe gen4"),
    "allreduce_2gpu_2019_layout_no_redop_root.txt": ("PASS", "intra-node NVLink"),
    # clearly below
    "allreduce_4xl40s_shm_across_sockets.txt": ("WARN", "shm-not-p2p"),
    "broadcast_2node_2021_layout_root_no_redop.txt": ("WARN", "NICs are unknown"),
    # broken
    "allreduce_8xh100_current_layout_slow_nvlink.txt": ("FAIL", "intra-node"),
    "allreduce_16rank_2node_mpirun_prefix_wrong_values.txt": ("FAIL", "3 wrong elements"),
    "allreduce_4rank_nccl_failure_cut_off.txt": ("FAIL", "status=12"),
    "allreduce_16proc_no_mpi_zero_busbw_srun.txt": ("FAIL", "one-rank communicator"),
    "allreduce_2x4_a100_hdr_gpu_nic_cross_socket.txt": ("FAIL", "gpu-nic-locality"),
    "allreduce_2x8_h200_kvm_no_pci_topology.txt": ("FAIL", "vm-topology"),
    "allreduce_2x8_h100_socket_fallback.txt": ("FAIL", "net-socket"),
    "allreduce_2x8_crash_before_first_size.txt": ("FAIL", "socketFinalizeAccept: wrong type 4 != 3"),
    "allreduce_2x8_h100_hang.txt": ("FAIL", "hung"),
    # issue 31: outputs as people paste them - no banner, no rank lines, old layouts, a header and nothing
    # (file names hold no collective: the output alone must say it). Each rule has a healthy and a broken case.
    "paste_8xh100_mpi_binary_no_banner_healthy.txt": ("PASS", "from program name all_reduce_perf_mpi"),
    "paste_2x8_h100_srun_mpi_binary_healthy.txt": ("PASS", "8 x 400 Gb/s NICs (NCCL_DEBUG topology lines)"),
    "paste_2x4_a100_cross_socket_mpirun_no_banner.txt": ("FAIL", "gpu-nic-locality"),
    "paste_2x8_h200_vm_no_topology_srun_no_banner.txt": ("FAIL", "vm-topology"),
    "paste_8xa100_root_column_current_layout.txt": ("PASS", "broadcast from columns redop none, root 0"),
    "paste_8xh100_split_count_ratio.txt": ("PASS", "reduce_scatter from columns redop sum, root -1 and size = 8 x"),
    "paste_build_log_then_command.txt": ("PASS", "all_gather from command line all_gather_perf"),
    "legacy_2017_bytes_op_res_dgx1_healthy.txt": ("PASS", "azure-nd40rs-v2"),
    "legacy_2019_4rank_no_redop_root_cut_healthy.txt": ("PASS", "judged on the 9 rows it has"),
    # no GPU model: the interconnect's bounds
    "paste_below_devices_8rank_healthy.txt": ("PASS", "interconnect bounds"),
    "paste_1node_8rank_ring_in_between.txt": ("WARN", "neither clearly healthy nor clearly broken"),
    "paste_1node_8rank_p2p_off_broken.txt": ("FAIL", "a PCIe gen3 x16 ring inside a node"),
    "paste_1node_nvls_slow_broken.txt": ("FAIL", "the output shows NVLS in use"),
    "paste_below_devices_2node_socket_broken.txt": ("FAIL", "net-socket"),
    # correctness, communicators, completion
    "paste_wrong_values_no_banner.txt": ("FAIL", "2 wrong elements"),
    "paste_single_gpu_zero_busbw.txt": ("WARN", "one rank: nothing crosses a link"),
    "paste_zero_busbw_table_only_mpirun.txt": ("FAIL", "one-rank communicator"),
    "paste_header_then_nothing_hang.txt": ("WARN", "no result: hung or cut"),
    "paste_error_before_first_size.txt": ("FAIL", "error before the first size"),
    "paste_2node_table_stops_ctrl_c_hang.txt": ("FAIL", "Sending Ctrl-C"),
}


def verdict_of(name: str, **kw) -> dict:
    (run,) = summarize_file(FIXTURES / name, **kw)["runs"]
    return run["verdict"]


def agrees(verdict: dict, status: str, mark: str) -> bool:
    return verdict["status"] == status and (mark in verdict["causes"] or mark in verdict["reason"])


def test_every_fixture_is_in_the_table():
    assert sorted(p.name for p in FIXTURES.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdict_and_cause(name):
    status, mark = EXPECTED[name]
    verdict = verdict_of(name)
    assert agrees(verdict, status, mark), verdict


def test_agreement(capsys):
    """The number this suite exists for: verdicts right on every fixture (printed for the report)."""
    right = [n for n, (status, mark) in EXPECTED.items() if agrees(verdict_of(n), status, mark)]
    with capsys.disabled():
        print(f"\nnccl verdict agreement on fixtures: {len(right)}/{len(EXPECTED)}")
    assert len(right) == len(EXPECTED)


def test_healthy_verdicts_carry_the_expected_curve():
    v = verdict_of("allreduce_2x8_h100_ib400_srun_healthy.txt")
    exp = v["expected"]
    assert exp["bound"] == "inter-node network" and exp["nics"]["count"] == 8 and exp["nics"]["rate_gbit"] == 400
    sizes = [s for s, _ in exp["curve"]]
    values = [g for _, g in exp["curve"]]
    assert sizes == sorted(sizes) and values == sorted(values) and values[-1] < exp["plateau_gbps"]


def test_nics_given_by_the_operator_win_over_the_output():
    """More NICs than the output shows move the bound to NVLink; a single slow NIC explains a slow run."""
    from gpulib.nccl.model import Nics

    big = verdict_of("allreduce_2x8_h100_ib400_srun_healthy.txt", nics=Nics(16, 800, "test"))
    assert big["expected"]["nics"]["count"] == 16 and big["expected"]["bound"] == "intra-node NVLink"
    assert big["status"] == "PASS"  # 475 GB/s is above the 428 GB/s NVLink bound that now limits
    small = verdict_of("allreduce_2x4_a100_hdr_gpu_nic_cross_socket.txt", nics=Nics(1, 50, "test"))
    assert small["status"] == "PASS"  # 6.4 GB/s is what one healthy 50 Gb/s NIC carries


def test_unknown_network_is_not_failed_on_a_guess(tmp_path):
    """Without NIC information the reference platform is assumed; far below it, but with no cause in the output
    and above what any RDMA NIC carries, the verdict is WARN and asks for the NICs."""
    text = (FIXTURES / "allreduce_2x8_h200_kvm_no_pci_topology.txt").read_text()
    path = tmp_path / "all_reduce_without_debug.txt"
    path.write_text("\n".join(line for line in text.splitlines() if "NCCL INFO" not in line))
    (run,) = summarize_file(path)["runs"]
    assert run["verdict"]["status"] == "WARN" and "--nic-gbps" in run["verdict"]["reason"]
    assert "assumed" in run["verdict"]["reason"]


def test_nccl_parse_exit_codes_and_nic_flags(capsys, tmp_path):
    from gpulib.cli import main

    assert main(["nccl-parse", str(FIXTURES / "allreduce_8xh200_nvls_healthy.txt")]) == 0
    assert main(["nccl-parse", str(FIXTURES / "allreduce_4xl40s_shm_across_sockets.txt")]) == 1
    assert main(["nccl-parse", str(FIXTURES / "allreduce_2x8_crash_before_first_size.txt")]) == 3
    junk = tmp_path / "notes.txt"
    junk.write_text("nothing to see\n")
    assert main(["nccl-parse", str(junk)]) == 2
    capsys.readouterr()
    rc = main(["nccl-parse", "--format", "json", "--nic-gbps", "50", "--nics", "1",
               str(FIXTURES / "allreduce_2x4_a100_hdr_gpu_nic_cross_socket.txt")])
    (summary,) = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["runs"][0]["verdict"]["expected"]["nics"]["origin"] == "--nic-gbps/--nics"
    assert main(["nccl-parse", "--nic-gbps", "400", str(junk)]) == 2
    assert "--nic-gbps and --nics go together" in capsys.readouterr().err


CORPUS_IB = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "recorded" / "infiniband"


def test_nics_from_a_recorded_ibstat():
    """Real ibstat of an H100 node (8 x 400 Gb/s compute ports plus slower ones): the fastest active ports count."""
    from gpulib.nccl.nics import from_ibstat

    path = CORPUS_IB / "ibstat.47.0.h100.all.active.1"
    if not path.is_file():
        pytest.skip(f"recorded corpus not present at {path}")
    nics = from_ibstat(path)
    assert nics is not None and nics.rate_gbit == 400 and nics.count >= 8 and "ibstat" in nics.origin
    down = from_ibstat(CORPUS_IB / "ibstat.47.0.h100.some.down.with.polling.1")
    assert down is not None and down.count < nics.count  # a rail that is down carries nothing


def test_ibstat_in_a_bundle_folder(tmp_path, capsys):
    from gpulib.cli import main

    bundle = tmp_path / "node-b07"
    (bundle / "infiniband").mkdir(parents=True)
    ports = "".join(f"CA 'mlx5_{i}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n"
                    f"\t\tPhysical state: LinkUp\n\t\tRate: 200\n\t\tLink layer: InfiniBand\n" for i in range(2))
    (bundle / "infiniband" / "ibstat.txt").write_text(ports)
    rc = main(["nccl-parse", "--format", "json", "--ibstat", str(bundle),
               str(FIXTURES / "allreduce_2x8_h100_ib400_srun_healthy.txt")])
    (summary,) = json.loads(capsys.readouterr().out)
    nics = summary["runs"][0]["verdict"]["expected"]["nics"]
    assert (nics["count"], nics["rate_gbit"]) == (2, 200) and rc == 0
    assert main(["nccl-parse", "--ibstat", str(tmp_path / "missing"), str(FIXTURES / "allreduce_2x8_h100_hang.txt")]) == 2


@pytest.mark.parametrize("name,collective,clue,nranks", [
    ("paste_8xh100_mpi_binary_no_banner_healthy.txt", "all_reduce", "program name all_reduce_perf_mpi", 8),
    ("paste_build_log_then_command.txt", "all_gather", "command line all_gather_perf (line 12)", 8),
    ("paste_8xa100_root_column_current_layout.txt", "broadcast", "columns redop none, root 0", 8),
    ("paste_8xh100_split_count_ratio.txt", "reduce_scatter", "size = 8 x count x type size", 8),
    ("paste_below_devices_8rank_healthy.txt", "all_reduce", "busbw/algbw = 1.75", 8),
    ("paste_below_devices_2node_socket_broken.txt", "all_reduce", "busbw/algbw = 1.87", 16),
    ("legacy_2019_4rank_no_redop_root_cut_healthy.txt", "all_reduce", "nothing tells all_gather, alltoall apart", 4),
    ("allreduce_8xh100_current_layout_healthy.txt", "all_reduce", "banner '# Collective test starting", 8),
])
def test_the_collective_and_the_clue_that_decided(name, collective, clue, nranks):
    (run,) = summarize_file(FIXTURES / name)["runs"]
    assert (run["collective"], run["nranks"]) == (collective, nranks) and clue in run["collective_clue"], run
    assert clue in run["verdict"]["reason"] or run["verdict"]["status"] != "PASS"


def test_collective_and_gpu_flags_override_the_output(capsys):
    from gpulib.cli import main

    rc = main(["nccl-parse", "--format", "json", "--collective", "all_gather",
               str(FIXTURES / "paste_8xh100_split_count_ratio.txt")])
    (summary,) = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["runs"][0]["collective"] == "all_gather"
    assert summary["runs"][0]["collective_clue"] == "--collective"
    # the same paste judged with the GPU's own model instead of the interconnect's bounds
    rc = main(["nccl-parse", "--format", "json", "--gpu", "NVIDIA A100-SXM4-80GB",
               str(FIXTURES / "paste_1node_8rank_ring_in_between.txt")])
    (summary,) = json.loads(capsys.readouterr().out)
    verdict = summary["runs"][0]["verdict"]
    assert rc == 0 and verdict["status"] == "PASS" and "8×A100 NVLS" not in verdict["reason"]
    assert "azure-nd96amsr-a100-v4" in verdict["reason"] and verdict["expected"]["gpu_model"] == "a100"
    assert main(["nccl-parse", "--gpu", "NVIDIA Quantum Widget", str(FIXTURES / "paste_1node_8rank_ring_in_between.txt")]) == 2
    assert "--gpu" in capsys.readouterr().err


def test_a_header_and_then_nothing_is_no_result_not_none(capsys):
    """The thread's hang: rank lines, then nothing. WARN (exit 1) asking for -T and NCCL_DEBUG=INFO - never
    "not nccl-tests output" (exit 2), never a silent none."""
    from gpulib.cli import main

    assert main(["nccl-parse", str(FIXTURES / "paste_header_then_nothing_hang.txt")]) == 1
    out = capsys.readouterr().out
    assert "no result: hung or cut" in out and "-T SECONDS" in out and "NCCL_DEBUG=INFO" in out


def test_a_cut_table_is_judged_on_its_rows_and_a_stopped_one_fails():
    cut = verdict_of("legacy_2019_4rank_no_redop_root_cut_healthy.txt")
    assert cut["status"] == "PASS" and "the paste was cut" in cut["reason"]
    stopped = verdict_of("paste_2node_table_stops_ctrl_c_hang.txt")
    assert stopped["status"] == "FAIL" and "hung" in stopped["reason"] and "line 30" in stopped["reason"]


def test_busbw_zero_fails_unless_one_process_on_one_gpu():
    table_only = verdict_of("paste_zero_busbw_table_only_mpirun.txt")
    assert table_only["status"] == "FAIL" and "no rank lines in the output" in table_only["reason"]
    assert verdict_of("paste_single_gpu_zero_busbw.txt")["status"] == "WARN"


def test_verdict_lines_name_the_rule_and_the_numbers():
    v = verdict_of("paste_8xh100_split_count_ratio.txt")
    assert v["reason"].startswith("busbw (bandwidth model): 357.0 GB/s at 4 GiB = 1.03 of the 8×H100 NVLink curve at "
                                  "that size"), v["reason"]
    bounds = verdict_of("paste_below_devices_8rank_healthy.txt")
    assert bounds["reason"].startswith("busbw (interconnect bounds): 489.0 GB/s at 16 GiB = 1.15 of the 8×H100 NVLS "
                                       "reference curve"), bounds["reason"]


def test_verdicts_do_not_need_the_banner_or_a_telling_file_name(tmp_path):
    """Every fixture, pasted without its '# Collective test' lines under a name that says nothing: same status."""
    for i, (name, (status, _mark)) in enumerate(sorted(EXPECTED.items())):
        text = (FIXTURES / name).read_text()
        path = tmp_path / f"paste-{i}.txt"
        path.write_text("\n".join(line for line in text.splitlines() if "Collective test" not in line) + "\n")
        (run,) = summarize_file(path)["runs"]
        assert run["verdict"]["status"] == status, (name, run["verdict"]["reason"])


def test_an_undecided_collective_is_judged_as_all_reduce_and_says_so():
    (run,) = summarize_file(FIXTURES / "legacy_2019_4rank_no_redop_root_cut_healthy.txt")["runs"]
    assert run["collective_ambiguous"] and "judged with the all_reduce curve" in run["verdict"]["reason"]
    (decided,) = summarize_file(FIXTURES / "paste_8xh100_split_count_ratio.txt")["runs"]
    assert not decided["collective_ambiguous"]
