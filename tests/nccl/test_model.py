"""The bandwidth model: the data table, the bounds, the size curve, and verdicts on runs that stop early."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from gpulib.nccl import thresholds
from gpulib.nccl.model import Nics, expect, load
from gpulib.nccl.report import Placement, Row
from gpulib.nccl.verdict import RunShape, judge


def _row(size, busbw):
    p = Placement(10.0, busbw, busbw, 0)
    return Row(size, size // 4, "float", "sum", -1, p, p)


def test_every_gpu_row_cites_a_source_and_every_fraction_its_evidence():
    data = yaml.safe_load(resources.files("gpulib.nccl").joinpath("expectations.yaml").read_text())
    for gpu in data["gpus"]:
        assert gpu["source"].strip() and gpu["match"], gpu
    for name, fraction in data["fractions"].items():
        assert 0 < fraction["value"] <= 1.1 and len(fraction["learned_from"]) > 40, name


@pytest.mark.parametrize("name,gpu_id", [
    ("NVIDIA H200", "h200"), ("NVIDIA H20", "h20"), ("NVIDIA H200 NVL", "h200-nvl"), ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA H100 NVL", "h100-nvl"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("A100-PCIE-40GB", "a100-pcie"), ("NVIDIA A100 80GB PCIe", "a100-pcie"), ("Tesla V100-SXM2-16GB", "v100"),
    ("Tesla V100-PCIE-16GB", "v100-pcie"), ("NVIDIA L40S", "l40s"), ("NVIDIA GeForce RTX 4090", "geforce-gen4"),
    ("NVIDIA GeForce RTX 5090", "geforce-gen5"), ("NVIDIA GB300", "gb300"), ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA B200", "b200"), ("NVIDIA A10G", "a10-a40"), ("Tesla T4", "t4")])
def test_specific_names_win_over_families(name, gpu_id):
    assert load().gpu(name).id == gpu_id


def test_bounds_intra_node_network_and_nvlink_domain():
    one = expect(gpu_name="NVIDIA H100 80GB HBM3", collective="all_reduce", gpus_per_node=8, nodes=1)
    assert one.bound == "intra-node NVLink" and one.plateau_gbps == pytest.approx(450 * 0.95)
    two = expect(gpu_name="NVIDIA H100 80GB HBM3", collective="all_reduce", gpus_per_node=8, nodes=2,
                 nics=Nics(8, 400, "flags"))
    assert two.bound == "inter-node network" and two.plateau_gbps == pytest.approx(400 * 0.9) and not two.nics_assumed
    ring = expect(gpu_name="NVIDIA A100-SXM4-80GB", collective="all_gather", gpus_per_node=8, nodes=1)
    assert ring.plateau_gbps == pytest.approx(300 * 0.78)
    rack = expect(gpu_name="NVIDIA GB200", collective="all_reduce", gpus_per_node=4, nodes=18)
    assert rack.bound == "NVLink domain" and rack.inter_gbps is None
    # one GPU per node: that GPU's PCIe slot carries all of the node's network traffic
    gh = expect(gpu_name="NVIDIA GH200 480GB", collective="all_reduce", gpus_per_node=1, nodes=4, nics=Nics(4, 400, "x"))
    assert gh.plateau_gbps == pytest.approx(63.0 * 0.9)
    # alltoall cannot aggregate NICs: one NIC's rate
    a2a = expect(gpu_name="NVIDIA H100 80GB HBM3", collective="alltoall", gpus_per_node=8, nodes=2, nics=Nics(8, 400, "x"))
    assert a2a.plateau_gbps == pytest.approx(50 * 0.85)
    assert expect(gpu_name="NVIDIA Graphics Device", collective="all_reduce", gpus_per_node=4, nodes=1) is None
    assert expect(gpu_name="NVIDIA H100 80GB HBM3", collective="gather", gpus_per_node=8, nodes=1) is None


def test_size_curve_rises_to_the_plateau_and_grows_with_ranks():
    exp = expect(gpu_name="NVIDIA H100 80GB HBM3", collective="all_reduce", gpus_per_node=8, nodes=1)
    values = [exp.at(1 << k) for k in range(10, 35)]
    assert values == sorted(values) and values[-1] < exp.plateau_gbps
    assert exp.fraction_at(256 << 20) == pytest.approx(0.8) and exp.fraction_at(1 << 30) > 0.94
    wide = expect(gpu_name="NVIDIA GB200", collective="all_reduce", gpus_per_node=4, nodes=18)
    assert wide.half_bytes == 3 * exp.half_bytes  # 72 ranks: sqrt(72 / 8)


SHAPE_2N = RunShape("all_reduce", "nccl", "NVIDIA H100 80GB HBM3", 8, 2, 16, Nics(8, 400, "flags"))


@pytest.mark.parametrize("size,busbw,status", [
    (1 << 30, 340.0, "PASS"),   # a run that stopped at 1 GiB: 340 of the ~338 the curve expects there
    (8 << 30, 360.0, "PASS"),   # stopped at 8 GiB
    (1 << 30, 200.0, "WARN"),   # 59 % of what 1 GiB should reach: clearly below
    (8 << 30, 100.0, "FAIL"),   # 28 %: far below
    (8 << 20, 10.0, "WARN"),    # 8 MiB is too small to judge, even when low
])
def test_runs_that_stop_early_are_judged_at_their_largest_size(size, busbw, status):
    v = judge([_row(size, busbw)], SHAPE_2N, thresholds.load(), wrong_total=0)
    assert v.status == status, v.reason
    assert v.expected["curve"][-1][0] == size


def test_too_small_to_judge_names_the_size_to_rerun_with():
    v = judge([_row(8 << 20, 10.0)], SHAPE_2N, thresholds.load(), wrong_total=0)
    assert "rerun with -e 128 MiB or more" in v.reason


def test_a_single_rank_is_not_judged_and_not_failed():
    """One process on one GPU: busbw is 0 by definition (factor 2(n-1)/n = 0), which is no fault."""
    shape = RunShape("all_reduce", "nccl", "NVIDIA A10G", 1, 1, 1, rank_lines=1)
    p = Placement(20.0, 3.2, 0.0, 0)
    v = judge([Row(16 << 20, 4 << 20, "float", "sum", -1, p, p)], shape, thresholds.load(), wrong_total=0)
    assert v.status == "WARN" and "one rank: nothing crosses a link" in v.reason
    many = RunShape("all_reduce", "nccl", "NVIDIA A10G", 1, 1, 1, rank_lines=4)
    v = judge([Row(16 << 20, 4 << 20, "float", "sum", -1, p, p)], many, thresholds.load(), wrong_total=0)
    assert v.status == "FAIL" and "4 processes each printed their own 'Rank 0' line" in v.reason


def test_fleet_minimums_do_not_catch_other_skus():
    """AzNHC's 228 GB/s is for A100 SXM4 on NVSwitch; an 8 x A100 PCIe box is judged by the model (PCIe gen4)."""
    table = thresholds.load()
    pcie = RunShape("all_reduce", "nccl", "NVIDIA A100 80GB PCIe", 8, 1, 8)
    assert table.match(gpu_name=pcie.gpu_name, backend="nccl", collective="all_reduce", gpus_per_node=8, nodes=1) is None
    v = judge([_row(1 << 30, 19.5)], pcie, table, wrong_total=0)
    assert v.status == "PASS" and "PCIe gen4" in v.reason
    sxm = RunShape("all_reduce", "nccl", "NVIDIA A100-SXM4-40GB", 8, 1, 8)
    assert judge([_row(8 << 30, 231.0)], sxm, table, wrong_total=0).threshold_source.startswith("AzNHC")


def test_unchecked_rows_are_not_counted_as_correct():
    from gpulib.parsers import nccl_tests

    text = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
            "#wrong\n"
            "   268435456      67108864     float     sum      -1   1201.3  223.45  391.04    N/A   1199.8  223.73  391.53    "
            "N/A\n"
            "# Avg bus bandwidth    : 391.285\n")
    (run,) = nccl_tests.parse(text, source="all_reduce_perf_c0.log").records
    assert run.rows[0].oop_wrong is None and run.wrong_total is None
    v = judge([_row(256 << 20, 391.0)], RunShape("all_reduce", "nccl", "NVIDIA H100 80GB HBM3", 8, 1, 8), thresholds.load(),
              wrong_total=run.wrong_total)
    assert next(c for c in v.checks if c.name == "correctness").detail == "not checked (-c 0)"
