"""nvidia-smi -q text: every recorded file, values a human can read in them, and bad input."""

from __future__ import annotations

import pytest

from gpulib.parsers import nvsmi_query, nvsmi_xml
from tests.parsers.corpus_files import read_head


def _parse(path, **opts):
    return nvsmi_query.parse(path.read_text(errors="replace"), str(path), **opts)


def test_every_recorded_q_file_parses_without_problems(recorded, incidents):
    files = [p for p in list(recorded.rglob("*")) + list(incidents.glob("*/input/**/*"))
             if p.is_file() and nvsmi_query.looks_like(read_head(p))]
    assert len(files) == 43
    # whole exporter captures hold -q sections (idle and load) after 1,400 lines of help text
    files += sorted(recorded.glob("nvidia-smi/exporter-captures/*.txt"))
    for path in files:
        result = _parse(path)
        assert result.records, path
        if not path.name.endswith(".invalid"):
            assert result.problems == [], (path, result.problems)
        for state in result.records:
            assert state.pci_bus_id and state.pci_bus_id.startswith("0"), path


def test_h100_power_brake_on_all_eight(recorded):
    result = _parse(recorded / "nvidia-smi/gpud/nvidia-smi-query.535.161.08.out.0.valid")
    assert [s.index for s in result.records] == list(range(8))
    for state in result.records:
        assert {"hw_slowdown", "hw_power_brake_slowdown"} <= set(state.throttle_reasons)
        assert "hw_thermal_slowdown" not in state.throttle_reasons
    gpu0 = result.records[0]
    assert gpu0.pci_bus_id == "0000:19:00.0"
    assert gpu0.pcie_replay_count == 67
    assert gpu0.power_limit_w == 700 and gpu0.power_draw_w == 67.74
    assert gpu0.temp_tlimit_margin_c == 56 and gpu0.temp_slowdown_tlimit_c == -2
    assert gpu0.temp_slowdown_c is None  # T.Limit file: no absolute thresholds
    assert gpu0.driver_version == "535.161.08" and gpu0.cuda_version == "12.2"
    assert gpu0.captured_at == "2024-07-31T11:22:39" and gpu0.time_note


def test_timestamp_converted_with_tz(recorded):
    result = _parse(recorded / "nvidia-smi/gpud/nvidia-smi-query.535.161.08.out.0.valid", tz="America/New_York")
    assert result.records[0].captured_at == "2024-07-31T15:22:39Z"
    assert result.records[0].time_note is None


def test_a100_pending_row_remap(recorded):
    result = _parse(recorded / "nvidia-smi/thamada/A100SXMx4__nvidia-smi-q.txt")
    gpu1 = result.records[1]
    assert gpu1.remapped_rows_pending is True and gpu1.remapped_rows_correctable == 1
    assert gpu1.remapped_rows_failure is False
    assert gpu1.ecc_volatile_sbe == 353  # DRAM correctable
    assert [s.remapped_rows_pending for s in result.records] == [False, True, False, False]
    assert gpu1.temp_slowdown_c == 89 and gpu1.temp_shutdown_c == 92 and gpu1.sm_clock_max_mhz == 1410


def test_a40_sw_power_cap_on_two(recorded):
    result = _parse(recorded / "nvidia-smi/thamada/A40x10__nvidia-smi-q.txt")
    assert len(result.records) == 10
    assert sum("sw_power_cap" in s.throttle_reasons for s in result.records) == 2
    assert max(s.ecc_aggregate_sbe or 0 for s in result.records) == 10289


def test_minor_numbers_differ_from_index(recorded):
    result = _parse(recorded / "nvidia-smi/gpud/nvidia-smi-query.535.154.05.out.0.valid")
    assert [s.minor_number for s in result.records] == [3, 2, 1, 0, 7, 6, 5, 4]


def test_processes_and_counters(recorded):
    path = recorded / "nvidia-smi/exporter-captures-split/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01/load_query_q.txt"
    gpu = _parse(path).records[0]
    assert [(p.pid, p.name, p.used_mib) for p in gpu.processes] == [
        (11327, "/root/tools/memhog", 2566), (11328, "/root/tools/memhog", 1542), (11345, "./gpu_burn", 15690)]
    assert gpu.throttle_counters_us["sw_power_cap"] == 0
    assert gpu.util_gpu_pct == 100 and gpu.power_draw_w == 629.45


def test_mig_gpu(recorded):
    path = recorded / "nvidia-smi/exporter-captures-split/linux-x86_64__nvidia-h100-mig__590.48.01/load_query_q.txt"
    gpu = _parse(path).records[0]
    assert gpu.mig_enabled is True
    assert gpu.util_gpu_pct is None  # MIG hides utilization
    assert gpu.remapped_rows_pending is None


def test_capture_with_two_snapshots(recorded):
    result = _parse(recorded / "nvidia-smi/exporter-captures/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt")
    idle, load = result.records
    assert idle.index == load.index == 0
    assert idle.util_gpu_pct == 0 and load.util_gpu_pct == 100


def test_page_retirement_output(recorded):
    bad = _parse(recorded / "azurehpc/bad_nvsmi8_output.txt").records
    assert [(s.retired_pages_sbe, s.retired_pages_dbe, s.retired_pages_pending) for s in bad[:2]] == [
        (60, 5, False), (2, 61, True)]
    assert bad[1].pci_bus_id == "0002:00:00.0"
    orig = _parse(recorded / "azurehpc/orig_nvsmi8_output.txt").records
    assert all(s.retired_pages_dbe == 0 and s.retired_pages_pending is False for s in orig)


def test_edited_invalid_file_gives_problems_not_exception(recorded):
    result = _parse(recorded / "nvidia-smi/gpud/nvidia-smi-query.535.183.01.out.0.invalid")
    assert len(result.records) == 1
    messages = " ".join(p.message for p in result.problems)
    assert "invalid_hw_slowdown" in messages
    assert "8 GPUs attached but only 1" in messages
    assert result.records[0].pci_bus_id  # the GPU that is there is kept


def test_thermal_incident_gpu_4e(incidents):
    result = _parse(incidents / "case-02-a100-thermal-throttle/input/nvidia-smi-q_2025-04-22T1320Z.txt")
    gpu = next(s for s in result.records if s.pci_bus_id == "0000:4e:00.0")
    assert gpu.index == 3 and gpu.temp_c == 88 and gpu.sm_clock_mhz == 735
    assert set(gpu.slowed_by) == {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown"}


def test_fell_off_bus_prolog_index_5_is_ab(incidents):
    result = _parse(incidents / "case-01-xid79-fell-off-bus/input/hgx-h100-018/nvidia-smi-q.prolog-88231.txt")
    assert result.records[5].pci_bus_id == "0000:ab:00.0"


def test_gpu_is_lost_line(incidents):
    path = incidents / "case-01-xid79-fell-off-bus/input/hgx-h100-018/nvidia-smi.txt"
    result = _parse(path)
    assert len(result.records) == 1
    gpu = result.records[0]
    assert gpu.lost and gpu.pci_bus_id == "0000:ab:00.0" and "GPU is lost" in gpu.lost_reason


def test_lost_gpu_inside_q_output_marks_block_and_adds_missing():
    text = ("Unable to determine the device handle for GPU0000:AB:00.0: GPU is lost.  Reboot the system\n\n"
            "==============NVSMI LOG==============\n\nTimestamp : Tue Feb 10 03:15:00 2026\n"
            "Driver Version : 550.54.15\nCUDA Version : 12.4\n\nAttached GPUs : 2\n"
            "GPU 00000000:18:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n    Temperature\n"
            "        GPU Current Temp : 31 C\n")
    result = nvsmi_query.parse(text, "mixed")
    assert [(s.pci_bus_id, s.lost) for s in result.records] == [("0000:18:00.0", False), ("0000:ab:00.0", True)]
    assert result.records[0].temp_c == 31
    assert result.problems == []


def test_bad_field_value_degrades_one_field():
    text = ("==============NVSMI LOG==============\nAttached GPUs : 1\nGPU 00000000:18:00.0\n"
            "    FB Memory Usage\n        Used : lots\n        Total : 81559 MiB\n")
    result = nvsmi_query.parse(text, "f.txt")
    gpu = result.records[0]
    assert gpu.mem_used_mib is None and gpu.mem_total_mib == 81559
    assert result.problems[0].line == 5 and "lots" in result.problems[0].message


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    ("\x00\x01\x02junk\xff" * 50, "not nvidia-smi -q"),
    ("[Mon Feb 10 03:12:07 2026] NVRM: Xid (PCI:0000:ab:00): 79, pid=1, GPU has fallen off the bus.\n", "not"),
])
def test_bad_input_gives_problem(text, why):
    result = nvsmi_query.parse(text, "bad.txt")
    assert result.records == []
    assert why in result.problems[0].message and result.problems[0].source == "bad.txt"


def test_looks_like_does_not_claim_other_kinds(recorded):
    table = read_head(recorded / "nvidia-smi/thamada/A100SXMx4__nvidia-smi.txt")
    xml = read_head(recorded / "nvidia-smi/xml/datakit/gtx-8card.xml")
    q = read_head(recorded / "nvidia-smi/thamada/A100SXMx4__nvidia-smi-q.txt")
    assert nvsmi_query.looks_like(q) and not nvsmi_query.looks_like(table) and not nvsmi_query.looks_like(xml)
    assert nvsmi_xml.looks_like(xml) and not nvsmi_xml.looks_like(q)


def test_610_driver_renames_versions(recorded):
    path = recorded / "nvidia-smi/exporter-captures-split/windows-x86_64__nvidia-geforce-rtx-2080-super__610.62/idle_query_q.txt"
    gpu = _parse(path).records[0]
    assert (gpu.driver_version, gpu.cuda_version) == ("610.62", "13.3")


def test_old_throttle_block_with_unknown_reason():
    text = ("==============NVSMI LOG==============\nAttached GPUs : 1\nGPU 00000000:04:00.0\n"
            "    Clocks Throttle Reasons\n        Idle : Not Active\n        HW Slowdown : Active\n"
            "        HW Thermal Slowdown : Active\n        Unknown : Not Active\n")
    result = nvsmi_query.parse(text, "old.txt")
    assert result.records[0].throttle_reasons == ["hw_slowdown", "hw_thermal_slowdown"]
    assert result.problems == []


def test_ecc_incident_gpu5_dbe_and_pending_remap(incidents):
    result = _parse(incidents / "case-06-ecc-dbe-truncated-ckpt/input/nvidia-smi-q_after_16-41.txt")
    bad = [(s.index, s.pci_bus_id) for s in result.records if s.ecc_volatile_dbe]
    assert bad == [(5, "0000:bb:00.0")]
    gpu5 = result.records[5]
    assert gpu5.remapped_rows_uncorrectable == 1 and gpu5.remapped_rows_pending is True
    assert gpu5.remapped_rows_failure is False


def test_a_line_seen_in_another_section_is_read_in_its_own(monkeypatch):
    """Field lines are taken apart once and remembered with the sections open before them: the same
    line under another section must still get that section's path."""
    one = ("==============NVSMI LOG==============\n\nAttached GPUs : 1\nGPU 00000000:18:00.0\n"
           "    Clocks\n        SM                                : 1980 MHz\n"
           "    Max Clocks\n        SM                                : 1980 MHz\n")
    clocks, max_clocks = "    Clocks\n", "    Max Clocks\n"
    two = one.replace(clocks, "@", 1).replace(max_clocks, clocks, 1).replace("@", max_clocks, 1)  # the sections swapped
    nvsmi_query.parse(one)
    remembered = nvsmi_query.parse(two).records
    monkeypatch.setattr(nvsmi_query, "_STEPS", {})
    assert remembered == nvsmi_query.parse(two).records
    (gpu,) = remembered
    assert gpu.sm_clock_mhz == 1980 and gpu.sm_clock_max_mhz == 1980
