"""``nvidia-smi --query-gpu`` CSV read a column at a time: every shape a row-by-row reading knew.

The parser converts a column's distinct spellings once and builds the records from columns
(:func:`gpulib.parsers.nvsmi_csv.parse`); these cases pin what that must not change: columns found
by name in any order, unknown and extra columns ignored, placeholders and units in cells, cut rows,
the header printed again, two columns naming one field, and problems in row order.
"""

from __future__ import annotations

from gpulib.parsers import nvsmi_csv
from gpulib.parsers.gpu_records import GpuProcess, GpuSample, GpuState

HEADER = "timestamp, index, pci.bus_id, temperature.gpu, clocks.sm [MHz], clocks_event_reasons.active"
ROWS = ["2025/04/22 10:58:30.154, 0, 00000000:07:00.0, 61, 1980 MHz, 0x0000000000000000",
        "2025/04/22 10:58:30.156, 1, 00000000:0F:00.0, 88, 1410 MHz, 0x0000000000000068",
        "2025/04/22 10:58:35.154, 0, 00000000:07:00.0, 62, 1980 MHz, 0x0000000000000000",
        "2025/04/22 10:58:35.156, 1, 00000000:0F:00.0, 89, 1395 MHz, 0x0000000000000068"]


def _series(text: str):
    result = nvsmi_csv.parse(text, "m.csv", tz="UTC")
    assert all(isinstance(r, GpuSample) for r in result.records)
    return result


def test_columns_in_any_order_with_unknown_ones():
    order = [5, 3, 0, 2, 1, 4]
    cells = [[c.strip() for c in line.split(",")] for line in [HEADER, *ROWS]]
    text = "\n".join(", ".join([*(row[k] for k in order), "extra"]) for row in cells) + "\n"
    text = text.replace("extra", "fan.unknown_reading", 1)  # a column gpulib does not read
    samples = _series(text).records
    assert [(s.index, s.temp_c, s.sm_clock_mhz) for s in samples] == [(0, 61, 1980), (1, 88, 1410), (0, 62, 1980),
                                                                      (1, 89, 1395)]
    assert samples[1].time_utc == "2025-04-22T10:58:30.156Z" and samples[1].pci_bus_id == "0000:0f:00.0"
    assert samples[1].throttle_reasons == ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert samples[0].throttle_reasons == [] and samples[0].line == 2


def test_each_record_owns_its_reasons():
    samples = _series("\n".join([HEADER, *ROWS]) + "\n").records
    samples[1].throttle_reasons.append("mine")
    assert "mine" not in samples[3].throttle_reasons  # the same mask decoded once, a list per record


def test_placeholders_units_and_refused_cells_in_row_order():
    text = "\n".join([
        "timestamp, index, temperature.gpu, power.draw [W], utilization.gpu [%]",
        "2025/04/22 10:58:30.154, 0, [N/A], 272.01 W, 100 %",
        "2025/04/22 10:58:30.156, 0, hot, [Not Supported], warm",
        "2025/04/22 10:58:31.154, 0, hot, 80 W, 7 %"]) + "\n"
    result = _series(text)
    assert [(s.temp_c, s.power_draw_w, s.util_gpu_pct) for s in result.records] == [
        (None, 272.01, 100), (None, None, None), (None, 80, 7)]
    # one problem per row holding a refused cell (not one per distinct spelling), read row by row
    assert [(p.line, p.message.split(":")[0]) for p in result.problems] == [
        (3, "column 'temperature.gpu'"), (3, "column 'utilization.gpu'"), (4, "column 'temperature.gpu'")]


def test_truncated_last_row_keeps_its_cells_and_is_reported():
    text = "\n".join([HEADER, *ROWS[:3], ROWS[3][:40]])  # cut inside the PCI id, no newline
    result = _series(text)
    last = result.records[-1]
    assert (last.index, last.temp_c, last.sm_clock_mhz, last.throttle_reasons) == (1, None, None, [])
    assert [(p.line, "has 3 cells, header has 6" in p.message) for p in result.problems] == [(5, True)]


def test_header_printed_again_is_skipped_but_a_lookalike_row_is_not():
    text = "\n".join([HEADER, ROWS[0], ROWS[1], HEADER, ROWS[2], ROWS[3],
                      "Timestamp, 0, 00000000:07:00.0, 63, 1980 MHz, 0x0"]) + "\n"
    result = nvsmi_csv.parse(text, "m.csv", tz="UTC")
    assert [r.line for r in result.records] == [2, 3, 5, 6, 7]
    last = result.records[-1]  # its stamp is unreadable, but it is a row, not the header again
    assert last.time_utc is None and "unreadable timestamp" in last.time_note and last.temp_c == 63


def test_two_columns_for_one_field_first_value_wins():
    text = "\n".join([
        "timestamp, index, clocks.sm [MHz], clocks.current.sm [MHz]",
        "2025/04/22 10:58:30.154, 0, 1980 MHz, 1000 MHz",
        "2025/04/22 10:58:30.156, 0, [N/A], 1410 MHz",
        "2025/04/22 10:58:31.154, 0, 1980 MHz, bogus",
        "2025/04/22 10:58:31.156, 0, bogus, 1395 MHz"]) + "\n"
    result = _series(text)
    assert [s.sm_clock_mhz for s in result.records] == [1980, 1410, 1980, 1395]
    # the second column is read only where the first gave nothing: 'bogus' on line 4 is never looked at
    assert [(p.line, p.message.split(":")[0]) for p in result.problems] == [(5, "column 'clocks.sm'")]


def test_single_reason_columns_without_the_mask():
    text = "\n".join([
        "timestamp, index, clocks_event_reasons.sw_thermal_slowdown, clocks_event_reasons.hw_slowdown",
        "2025/04/22 10:58:30.154, 0, Active, Not Active",
        "2025/04/22 10:58:31.154, 0, Active, Active",
        "2025/04/22 10:58:32.154, 0, Not Active"]) + "\n"
    assert [s.throttle_reasons for s in _series(text).records] == [
        ["sw_thermal_slowdown"], ["sw_thermal_slowdown", "hw_slowdown"], []]


def test_one_row_per_gpu_is_a_snapshot_of_states():
    text = "\n".join([HEADER, ROWS[0], ROWS[1]]) + "\n"
    states = nvsmi_csv.parse(text, "q.csv", tz="UTC").records
    assert all(isinstance(s, GpuState) for s in states)
    assert [(s.index, s.captured_at, s.source, s.temp_c) for s in states] == [
        (0, "2025-04-22T10:58:30.154Z", "q.csv", 61), (1, "2025-04-22T10:58:30.156Z", "q.csv", 88)]


def test_compute_apps_with_a_cut_row_keeps_the_other_processes():
    text = "\n".join([
        "timestamp, gpu_name, gpu_bus_id, gpu_uuid, pid, process_name, used_gpu_memory [MiB]",
        "2026/07/03 08:33:53.650, NVIDIA L40S, 00000000:01:00.0, GPU-1, 20037, ffmpeg, 538 MiB",
        "2026/07/03 08:33:53.650, NVIDIA L40S, 00000000:01:00.0, GPU-1, 20038, python, 681 MiB",
        "2026/07/03 08:33:53.650, NVIDIA L40S, 00000000:01:00.0"])  # cut before its pid
    result = nvsmi_csv.parse(text, "apps.csv")
    assert all(isinstance(p, GpuProcess) for p in result.records)
    assert [(p.pid, p.name, p.used_mib, p.pci_bus_id) for p in result.records] == [
        (20037, "ffmpeg", 538, "0000:01:00.0"), (20038, "python", 681, "0000:01:00.0"),
        (None, None, None, "0000:01:00.0")]
    assert [p.line for p in result.problems] == [4]
