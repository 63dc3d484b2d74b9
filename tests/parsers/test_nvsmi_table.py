"""Default nvidia-smi table: recorded files, ERR!, truncated names, processes, tool failures."""

from __future__ import annotations

import pytest

from gpulib.parsers import nvsmi_query, nvsmi_table, nvsmi_xml
from tests.parsers.corpus_files import read_head


def _parse(path):
    return nvsmi_table.parse(path.read_text(errors="replace"), str(path))


def test_every_recorded_table_parses(recorded, incidents):
    files = [p for p in list(recorded.rglob("*")) + list(incidents.glob("*/input/**/*"))
             if p.is_file() and nvsmi_table.looks_like(read_head(p))]
    assert len(files) == 34  # incl. the 610 drivers' 'KMD Version' banner
    for path in files:
        result = _parse(path)
        assert result.records and result.problems == [], (path, result.problems)


def test_err_fan_is_none_and_truncated_name_kept(recorded):
    result = _parse(recorded / "nvidia-smi/gpud/nvidia-smi.525.125.06.out.0.valid")
    gpu = result.records[0]
    assert gpu.name == "NVIDIA GeForce ..."
    assert gpu.fan_pct is None  # the Fan column reads ERR!
    assert gpu.temp_c == 38 and gpu.power_draw_w == 49 and gpu.power_limit_w == 450
    assert gpu.mem_used_mib == 2021 and gpu.mem_total_mib == 23028
    assert not gpu.lost  # one ERR! (the fan) is a failed reading, not a lost GPU
    assert gpu.driver_version == "525.125.06" and gpu.cuda_version == "12.0"


def test_h100_eight_gpus(recorded):
    result = _parse(recorded / "nvidia-smi/gpud/nvidia-smi.550.90.07.out.0.valid")
    assert [s.index for s in result.records] == list(range(8))
    assert result.records[0].power_draw_w == 72 and result.records[0].power_limit_w == 700
    assert result.records[0].fan_pct is None  # N/A: no fan on an SXM board


def test_processes_of_the_oom_incident(incidents):
    result = _parse(incidents / "case-03-cuda-oom-rank2/input/nvidia-smi_0918.txt")
    by_index = {s.index: s for s in result.records}
    assert by_index[2].processes == [] and by_index[2].util_gpu_pct == 0
    assert by_index[2].pci_bus_id == "0000:b1:00.0"
    assert [(p.pid, p.used_mib) for p in by_index[0].processes] == [(3318840, 76304)]
    assert by_index[0].util_gpu_pct == 100 and by_index[0].mem_used_mib == 76318
    assert result.records[0].captured_at == "2025-05-06T09:18:02"


def test_windows_processes_without_memory(recorded):
    path = recorded / ("nvidia-smi/exporter-captures-split/windows-x86_64__nvidia-geforce-rtx-2080-super__591.86/"
                       "load_nvidia_smi_default_table.txt")
    gpu = _parse(path).records[0]
    assert len(gpu.processes) == 12
    assert gpu.processes[0].name == r"C:\Windows\System32\dwm.exe" and gpu.processes[0].used_mib is None
    assert gpu.processes[0].type == "C+G"
    assert gpu.fan_pct == 38


def test_mig_table(recorded):
    path = (recorded / "nvidia-smi/exporter-captures-split/linux-x86_64__nvidia-h100-mig__590.48.01"
            / "load_nvidia_smi_default_table.txt")
    gpu = _parse(path).records[0]
    assert gpu.mig_enabled is True and gpu.util_gpu_pct is None
    assert len(gpu.processes) == 3  # MIG device rows are not mistaken for GPUs or processes


def test_gpu_is_lost_file(incidents):
    path = incidents / "case-01-xid79-fell-off-bus/input/hgx-h100-018/nvidia-smi.txt"
    assert nvsmi_table.looks_like(read_head(path))
    gpu = _parse(path).records[0]
    assert gpu.lost and gpu.pci_bus_id == "0000:ab:00.0" and gpu.index is None


def test_err_everywhere_marks_gpu_lost():
    text = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|=========================================+========================+======================|
|   5  NVIDIA H100 80GB HBM3          On  |   00000000:AB:00.0 Off |                 ERR! |
|ERR!  ERR!   ERR!          ERR! /  700W |       0MiB /  81559MiB |    ERR!      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""
    result = nvsmi_table.parse(text, "t.txt")
    gpu = result.records[0]
    assert gpu.lost and gpu.index == 5 and gpu.temp_c is None and gpu.power_limit_w == 700
    assert result.problems == []


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
     "latest NVIDIA driver is installed and running.\n", "nvidia-smi failed"),
    ("No devices were found\n", "nvidia-smi failed"),
    ("hello world\n", "not nvidia-smi table"),
    ("\x00\x01\x02junk\xff" * 50, "not nvidia-smi table"),
])
def test_bad_input(text, why):
    result = nvsmi_table.parse(text, "bad.txt")
    assert result.records == [] and why in result.problems[0].message


def test_looks_like_does_not_claim_other_kinds(recorded):
    table = read_head(recorded / "nvidia-smi/thamada/A100SXMx4__nvidia-smi.txt")
    xml = read_head(recorded / "nvidia-smi/xml/datakit/gtx-8card.xml")
    q = read_head(recorded / "nvidia-smi/thamada/A100SXMx4__nvidia-smi-q.txt")
    assert nvsmi_table.looks_like(table) and not nvsmi_table.looks_like(q) and not nvsmi_table.looks_like(xml)
    assert not nvsmi_query.looks_like(table) and not nvsmi_xml.looks_like(table)


def test_610_kmd_banner(recorded):
    path = (recorded / "nvidia-smi/exporter-captures-split/linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04"
            / "load_nvidia_smi_default_table.txt")
    gpu = _parse(path).records[0]
    assert (gpu.driver_version, gpu.cuda_version, gpu.index) == ("610.57.04", "13.3", 0)


def test_table_of_a_driver_before_410_has_no_cuda_version_in_its_banner():
    text = ("+------------------------------------------------------+\n"
            "| NVIDIA-SMI 384.111    Driver Version: 384.111        |\n"
            "|-------------------------------+----------------------+----------------------+\n"
            "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
            "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
            "|===============================+======================+======================|\n"
            "|   0  Tesla P100-PCIE...  Off  | 00000000:05:00.0 Off |                    0 |\n"
            "| N/A   30C    P0    26W / 250W |      0MiB / 16276MiB |      0%      Default |\n"
            "+-------------------------------+----------------------+----------------------+\n")
    assert nvsmi_table.looks_like(text)
    result = nvsmi_table.parse(text)
    assert [(g.index, g.pci_bus_id, g.driver_version) for g in result.records] == [(0, "0000:05:00.0", "384.111")]
