"""--query-gpu / --query-compute-apps CSV and dmon: recorded files, the thermal time series, bad input."""

from __future__ import annotations

import pytest

from gpulib.parsers import nvsmi_csv, nvsmi_dmon, nvsmi_query, nvsmi_table
from gpulib.parsers.gpu_records import GpuProcess, GpuSample, GpuState
from tests.parsers.corpus_files import read_head

SPLIT = "nvidia-smi/exporter-captures-split"
THERMAL_CSV = "case-02-a100-thermal-throttle/input/monitoring/gpu_stats_dgx-a100-09_20250422.csv"


def _claimed(recorded, incidents, module):
    return [p for p in list(recorded.rglob("*")) + list(incidents.glob("*/input/**/*"))
            if p.is_file() and module.looks_like(read_head(p))]


def test_every_recorded_csv_parses(recorded, incidents):
    files = _claimed(recorded, incidents, nvsmi_csv)
    assert len(files) == 42  # 10 captures x (query-gpu + compute-apps) x (idle, load) + P100 + incident
    for path in files:
        result = nvsmi_csv.parse(path.read_text(), str(path))
        assert result.problems == [], (path, result.problems)
        assert all(isinstance(r, (GpuState, GpuSample, GpuProcess)) for r in result.records)


def test_every_recorded_dmon_parses(recorded, incidents):
    files = _claimed(recorded, incidents, nvsmi_dmon)
    assert len(files) == 20
    for path in files:
        result = nvsmi_dmon.parse(path.read_text(), str(path))
        assert len(result.records) == 5 and result.problems == [], path


def test_thermal_time_series_gpu3(incidents):
    result = nvsmi_csv.parse((incidents / THERMAL_CSV).read_text(), "gpu_stats.csv")
    assert result.problems == []
    assert all(isinstance(s, GpuSample) for s in result.records)
    gpu3 = [s for s in result.records if s.index == 3]
    assert all(s.pci_bus_id == "0000:4e:00.0" for s in gpu3)
    first_hot = next(s for s in gpu3 if s.slowed_by)
    assert first_hot.time_utc == "2025-04-22T12:48:30.270" and first_hot.throttle_bitmask == 0x20
    assert first_hot.throttle_reasons == ["sw_thermal_slowdown"] and first_hot.temp_c == 86
    assert first_hot.sm_clock_mhz == 1110 and first_hot.sm_clock_max_mhz == 1410
    masks = {s.throttle_bitmask for s in gpu3}
    assert {0x1, 0x20, 0x68} <= masks
    assert min(s.sm_clock_mhz for s in gpu3 if s.throttle_bitmask == 0x68) <= 840
    others = {s.throttle_bitmask for s in result.records if s.index != 3}
    assert 0x20 not in others and 0x68 not in others


def test_time_series_with_tz(incidents):
    result = nvsmi_csv.parse((incidents / THERMAL_CSV).read_text(), "x", tz="UTC")
    assert result.records[0].time_utc == "2025-04-22T10:58:30.154Z" and result.records[0].time_note is None


def test_exporter_csv_snapshot(recorded):
    path = (recorded / SPLIT / "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05"
            / "idle_query_gpu_csv_what_the_exporter_parses.txt")
    gpu = nvsmi_csv.parse(path.read_text(), str(path)).records[0]
    assert isinstance(gpu, GpuState)
    assert gpu.throttle_bitmask == 0x4 and gpu.throttle_reasons == ["sw_power_cap"]
    assert gpu.pcie_gen_current == 1 and gpu.pcie_gen_max == 3  # idle PCIe downshift
    assert gpu.serial is None  # [N/A]
    assert gpu.driver_version == "595.71.05"
    h100 = recorded / SPLIT / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01/load_query_gpu_csv_what_the_exporter_parses.txt"
    gpu = nvsmi_csv.parse(h100.read_text(), str(h100)).records[0]
    assert gpu.power_draw_w == 631.95 and gpu.temp_tlimit_margin_c == 26 and gpu.retired_pages_sbe is None


def test_units_in_header_only(recorded):
    gpu = nvsmi_csv.parse((recorded / "nvidia-smi/xml/netdata/tesla-p100.csv").read_text(), "p100.csv").records[0]
    assert gpu.name == "Tesla P100-PCIE-16GB" and gpu.power_draw_w == 28.16 and gpu.sm_clock_mhz == 405


def test_compute_apps(recorded):
    path = recorded / SPLIT / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01/load_query_compute_apps_per_process.txt"
    procs = nvsmi_csv.parse(path.read_text(), str(path)).records
    assert [(p.pid, p.used_mib, p.pci_bus_id) for p in procs][-1] == (11345, 15690, "0000:00:09.0")


def test_other_query_csvs_are_refused_with_reason(recorded):
    path = recorded / SPLIT / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01/load_query_retired_pages.txt"
    assert not nvsmi_csv.looks_like(read_head(path))
    result = nvsmi_csv.parse(path.read_text(), str(path))
    assert result.records == [] and "retired-pages" in result.problems[0].message


def test_bad_cell_and_short_row_degrade_per_field():
    text = ("timestamp, index, pci.bus_id, temperature.gpu, clocks.sm [MHz]\n"
            "2025/04/22 10:58:30.154, 0, 00000000:07:00.0, hot, 210 MHz\n"
            "2025/04/22 10:58:30.156, 1, 00000000:0F:00.0, 34\n")
    result = nvsmi_csv.parse(text, "m.csv")
    assert [r.temp_c for r in result.records] == [None, 34]
    assert result.records[0].sm_clock_mhz == 210 and result.records[1].sm_clock_mhz is None
    assert [(p.line, "hot" in p.message or "cells" in p.message) for p in result.problems] == [(2, True), (3, True)]


def test_dmon_date_time_and_old_columns():
    text = ("#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk  pviol  tviol"
            "     fb   bar1  sbecc  dbecc    pci  rxpci  txpci\n"
            "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %    MHz    MHz      %   bool"
            "     MB     MB   errs   errs   errs   MB/s   MB/s\n"
            " 20250422   12:48:30      3    272     86      -    100     40      0      0   1593   1110      0      0"
            "  38521     12      0      0      0    120     80\n")
    sample = nvsmi_dmon.parse(text, "d.txt", tz="UTC").records[0]
    assert sample.time_utc == "2025-04-22T12:48:30Z" and sample.index == 3
    assert sample.temp_c == 86 and sample.temp_memory_c is None and sample.mem_used_mib == 38521
    assert sample.sm_clock_mhz == 1110 and sample.power_draw_w == 272


def test_pmon_is_not_dmon(recorded):
    path = recorded / SPLIT / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01/load_pmon_per_process_monitor.txt"
    assert not nvsmi_dmon.looks_like(read_head(path))


@pytest.mark.parametrize("module", [nvsmi_csv, nvsmi_dmon])
@pytest.mark.parametrize("text", ["", "\x00\x01\x02junk\xff" * 50, "[Mon Feb 10 03:12:07 2026] NVRM: Xid 79\n"])
def test_bad_input(module, text):
    result = module.parse(text, "bad")
    assert result.records == [] and result.problems and result.problems[0].source == "bad"


def test_kinds_do_not_claim_each_other(recorded, incidents):
    csv_head = read_head(incidents / THERMAL_CSV)
    dmon_head = read_head(recorded / SPLIT / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
                          / "load_dmon_per_device_monitor_incl_pcie_rx_tx.txt")
    for module in (nvsmi_query, nvsmi_table, nvsmi_dmon):
        assert not module.looks_like(csv_head)
    for module in (nvsmi_query, nvsmi_table, nvsmi_csv):
        assert not module.looks_like(dmon_head)


def test_a_comment_above_the_header_is_not_the_header():
    """A prolog's inventory file: a comment line (with a comma) above nvidia-smi's CSV header."""
    text = ("# inventory written by the prolog of job 4410, 2026-04-09T05:58:12Z\n"
            "index, pci.bus_id, name\n0, 00000000:1B:00.0, NVIDIA H100 80GB HBM3\n"
            "1, 00000000:C3:00.0, NVIDIA H100 80GB HBM3\n")
    assert nvsmi_csv.looks_like(text)
    result = nvsmi_csv.parse(text)
    assert result.problems == []
    assert [(r.index, r.pci_bus_id) for r in result.records] == [(0, "0000:1b:00.0"), (1, "0000:c3:00.0")]
