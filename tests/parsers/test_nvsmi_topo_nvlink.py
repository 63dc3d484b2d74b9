"""topo -m (ANSI header, NIC legend) and nvlink -s (speeds, inactive, empty file)."""

from __future__ import annotations

import pytest

from gpulib.parsers import nvsmi_nvlink, nvsmi_topo
from tests.parsers.corpus_files import read_head

SPLIT = "nvidia-smi/exporter-captures-split"

# Layout of an HGX H100 topo -m (NV18 all-to-all, one NIC per GPU pair, NIC Legend), cut to
# 2 GPUs + 2 NICs and written for this test.
HGX_TOPO = (
    "\t\x1b[4mGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tPIX\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\tPIX\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPIX\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPIX\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\n"
    "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
)


def test_every_recorded_topo(recorded):
    files = sorted(recorded.glob(f"{SPLIT}/*/capabilities_topo_m.txt"))
    assert len(files) == 10
    for path in files:
        result = nvsmi_topo.parse(path.read_text(), str(path))
        if "windows-x86_64__nvidia-geforce-rtx-2080-super__591.86" in str(path):
            # this driver rejected "topo -m": the file holds nvidia-smi's error, quoted back
            assert not nvsmi_topo.looks_like(read_head(path))
            assert result.records == [] and "Option -m is missing" in result.problems[0].message
            continue
        assert nvsmi_topo.looks_like(read_head(path)), path
        assert result.problems == [] and [d.name for d in result.records] == ["GPU0"], path


def test_single_gpu_affinity_after_ansi_strip(recorded):
    path = recorded / SPLIT / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01/capabilities_topo_m.txt"
    gpu = nvsmi_topo.parse(path.read_text(), str(path)).records[0]
    assert (gpu.cpu_affinity, gpu.numa_affinity, gpu.gpu_numa_id) == ("0-19", "0", None)
    assert gpu.links == {}
    windows = recorded / SPLIT / "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62/capabilities_topo_m.txt"
    assert nvsmi_topo.parse(windows.read_text(), str(windows)).records[0].cpu_affinity is None


def test_hgx_matrix_and_nic_legend():
    result = nvsmi_topo.parse(HGX_TOPO, "topo.txt")
    assert result.problems == []
    gpu0, gpu1, nic0, nic1 = result.records
    assert gpu0.links == {"GPU1": "NV18", "NIC0": "PIX", "NIC1": "SYS"} and gpu0.nvlinks == {"GPU1": 18}
    assert gpu1.cpu_affinity == "56-111,168-223" and gpu1.numa_affinity == "1"
    assert (nic0.kind, nic0.device, nic1.device) == ("nic", "mlx5_0", "mlx5_1")
    assert nic1.links["GPU1"] == "PIX"


def test_every_recorded_nvlink(recorded):
    files = sorted(recorded.glob(f"{SPLIT}/*/capabilities_nvlink_s.txt")) + [
        recorded / "nvidia-smi/gpud/nvidia-smi.nvlink.status.a100",
        recorded / "azurehpc/good_nvlink_status.txt", recorded / "azurehpc/bad_nvlink_status.txt"]
    for path in files:
        assert nvsmi_nvlink.looks_like(read_head(path)), path
        result = nvsmi_nvlink.parse(path.read_text(), str(path))
        assert result.records and result.problems == [], path


def test_h100_eighteen_links(recorded):
    path = recorded / SPLIT / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01/capabilities_nvlink_s.txt"
    gpu = nvsmi_nvlink.parse(path.read_text(), str(path)).records[0]
    assert gpu.active_links == 18 and set(gpu.links.values()) == {26.562}


def test_a100_board_with_one_gpu_all_inactive(recorded):
    good = nvsmi_nvlink.parse((recorded / "azurehpc/good_nvlink_status.txt").read_text(), "good").records
    bad = nvsmi_nvlink.parse((recorded / "azurehpc/bad_nvlink_status.txt").read_text(), "bad").records
    assert [(g.gpu_index, g.active_links, g.links[0], g.all_inactive) for g in good] == [(7, 12, 25, False)]
    assert [(g.gpu_index, g.active_links, g.all_inactive) for g in bad] == [(6, 0, True)]
    assert bad[0].uuid == "GPU-9667d95e-6d22-0c22-1f57-c481f13e7c44"
    a100 = nvsmi_nvlink.parse((recorded / "nvidia-smi/gpud/nvidia-smi.nvlink.status.a100").read_text(), "a100")
    assert len(a100.records) == 8 and all(g.active_links == 12 for g in a100.records)


def test_no_nvlink_and_mig_notes(recorded):
    mig = recorded / SPLIT / "linux-x86_64__nvidia-h100-mig__590.48.01/capabilities_nvlink_s.txt"
    gpu = nvsmi_nvlink.parse(mig.read_text(), "mig").records[0]
    assert gpu.links == {} and "MIG mode" in gpu.note and not gpu.all_inactive


def test_inactive_single_link():
    text = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
    gpu = nvsmi_nvlink.parse(text, "x").records[0]
    assert gpu.links == {0: 25.0, 1: None} and gpu.active_links == 1


def test_empty_file_is_a_problem_not_an_exception(recorded):
    path = recorded / "nvidia-smi/gpud/nvidia-smi.nvlink.status.a10"
    result = nvsmi_nvlink.parse(path.read_text(), str(path))
    assert result.records == [] and "printed nothing" in result.problems[0].message


def test_list_output_is_not_nvlink(recorded):
    path = recorded / SPLIT / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01/capabilities_list_l.txt"
    assert not nvsmi_nvlink.looks_like(read_head(path)) and not nvsmi_topo.looks_like(read_head(path))


@pytest.mark.parametrize("module", [nvsmi_topo, nvsmi_nvlink])
@pytest.mark.parametrize("text", ["", "\x00\x01\x02junk\xff" * 50, "[Mon Feb 10 03:12:07 2026] NVRM: Xid 79\n"])
def test_bad_input(module, text):
    result = module.parse(text, "bad")
    assert result.records == [] and result.problems[0].source == "bad"
