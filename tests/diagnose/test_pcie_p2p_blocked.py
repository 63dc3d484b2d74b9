"""A first collective that never completes on a PCIe peer-to-peer path with ACS redirection or IOMMU
translation on is a platform set-up fault: network_fabric / soft on that machine (rule pcie_p2p).
Controls: the same time-out over NVLink with no ACS evidence stays a time-out; ACS lines beside a run
that works are no cause."""

from __future__ import annotations

from gpulib.diagnose import diagnose
from tests.diagnose.files import answer, write_tree


def _diagnose(tmp_path, files: dict[str, str]) -> dict:
    return diagnose([write_tree(tmp_path, files)]).to_dict()


def _job(host: str, seq: int = 1, transport: str = "P2P/IPC/read") -> str:
    lines = [f"{host}:5120:5120 [0] NCCL INFO NCCL version 2.20.5+cuda12.4"]
    for rank, (pid, bus) in enumerate(((5120, "1b000"), (5121, "3d000"))):
        lines.append(f"{host}:{pid}:{pid + 40} [{rank}] NCCL INFO Channel 00/0 : {rank}[{rank}] -> {1 - rank}[{1 - rank}] "
                     f"via {transport}")
        lines.append(f"{host}:{pid}:{pid + 40} [{rank}] NCCL INFO comm 0x55aa{rank}0 rank {rank} nranks 2 cudaDev "
                     f"{rank} nvmlDev {rank} busId {bus} commId 0x7e1f - Init COMPLETE")
    for rank in (0, 1):
        lines.append(f"[rank{rank}]:[E1103 07:12:44.50112{rank} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
                     f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4096, "
                     f"NumelOut=4096, Timeout(ms)=300000) ran for 300071 milliseconds before timing out.")
    return "\n".join(lines) + "\n"


def _topo(link: str) -> str:
    return ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            f"GPU0\t X \t{link}\t0-47\t0\t\tN/A\n"
            f"GPU1\t{link}\t X \t0-47\t0\t\tN/A\n")


ACS_ON = ("root@dev-box3:~# lspci -vvv -s 00:01.1 | grep ACSCtl\n"
          "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n")


def test_first_allreduce_timeout_over_pcie_p2p_with_acs_redirect_is_a_platform_fault(tmp_path):
    got = _diagnose(tmp_path, {"smoke.log": "root@dev-box3:~# torchrun --nproc_per_node=2 t.py\n" + _job("dev-box3"),
                               "topo.txt": _topo("PXB"), "acs.txt": ACS_ON})
    assert answer(got) == ("soft", "network_fabric", "dev-box3")
    assert got["root_cause"]["rank"] is None  # every rank waited: the machine's path, no one rank's
    cause = next(f for f in got["findings"] if f["id"].startswith("pcie-p2p-blocked"))
    assert any("ACS" in a for a in cause["actions"]) and any("iommu=pt" in a for a in cause["actions"])


def test_iommu_translation_in_the_kernel_log_reads_the_same(tmp_path):
    kern = ("[    0.912003] iommu: Default domain type: Translated\n"
            "[    0.912010] iommu: DMA domain TLB invalidation policy: lazy mode\n")
    got = _diagnose(tmp_path, {"smoke.log": _job("dev-box4", transport="P2P/CUMEM"), "dmesg.txt": kern})
    assert answer(got) == ("soft", "network_fabric", "dev-box4")


def test_control_nvlink_first_collective_timeout_without_acs_stays_a_timeout(tmp_path):
    got = _diagnose(tmp_path, {"smoke.log": _job("dev-box5"), "topo.txt": _topo("NV12")})
    assert not any(f["id"].startswith("pcie-p2p-blocked") for f in got["findings"])
    assert answer(got)[1] != "network_fabric"


def test_control_acs_lines_beside_a_run_that_works_are_no_cause(tmp_path):
    ok = ("dev-box3:5120:5160 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
          "dev-box3:5120:5160 [0] NCCL INFO comm 0x55aa00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId "
          "0x7e1f - Init COMPLETE\n"
          "step 50/50 loss 0.7712\n"
          "Training completed in 88.1 s\n")
    got = _diagnose(tmp_path, {"train.log": ok, "acs.txt": ACS_ON, "topo.txt": _topo("PHB")})
    assert not any(f["id"].startswith("pcie-p2p-blocked") for f in got["findings"])


def test_control_a_late_collective_timeout_is_not_a_blocked_path(tmp_path):
    got = _diagnose(tmp_path, {"smoke.log": _job("dev-box3", seq=48113), "acs.txt": ACS_ON, "topo.txt": _topo("PXB")})
    assert not any(f["id"].startswith("pcie-p2p-blocked") for f in got["findings"])


def test_a_rerun_with_p2p_disabled_that_completes_reads_the_same(tmp_path):
    rerun = ("root@dev-box6:~# NCCL_P2P_DISABLE=1 torchrun --nproc_per_node=2 train.py\n"
             "step 200/200 loss 0.4410\n"
             "Training completed in 131.9 s\n")
    got = _diagnose(tmp_path, {"smoke.log": "root@dev-box6:~# torchrun --nproc_per_node=2 train.py\n" + _job("dev-box6"),
                               "rerun.txt": rerun, "topo.txt": _topo("PIX")})
    assert answer(got) == ("soft", "network_fabric", "dev-box6")


def test_control_a_rerun_with_p2p_disabled_that_also_times_out_is_no_evidence(tmp_path):
    rerun = "root@dev-box6:~# NCCL_P2P_DISABLE=1 torchrun --nproc_per_node=2 train.py\n" + _job("dev-box6",
                                                                                                   transport="SHM/direct/direct")
    got = _diagnose(tmp_path, {"smoke.log": _job("dev-box6"), "rerun.txt": rerun + "Training completed in 9.1 s\n",
                               "topo.txt": _topo("PIX")})
    assert not any(f["id"].startswith("pcie-p2p-blocked") for f in got["findings"])
