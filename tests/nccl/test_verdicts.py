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
