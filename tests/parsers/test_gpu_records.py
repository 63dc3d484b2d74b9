"""Throttle bitmask decoding and the shared value readers."""

from __future__ import annotations

import pytest

from gpulib.parsers import units
from gpulib.parsers.gpu_records import (
    GpuState,
    canonical_reason,
    decode_throttle_bitmask,
    encode_throttle_reasons,
)


def test_decode_thermal_mask_from_the_a100_incident():
    # 0x68 = HW slowdown (0x8) + SW thermal (0x20) + HW thermal (0x40)
    assert decode_throttle_bitmask(0x68) == ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert decode_throttle_bitmask(0x20) == ["sw_thermal_slowdown"]
    assert decode_throttle_bitmask(0) == []
    assert decode_throttle_bitmask(0x1FF) == [
        "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
        "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"]


def test_unknown_bits_are_kept_not_dropped():
    assert decode_throttle_bitmask(0x400 | 0x4) == ["sw_power_cap", "bit_0x400"]


def test_encode_is_the_inverse():
    for mask in (0x1, 0x68, 0x88, 0x1FF):
        assert encode_throttle_reasons(decode_throttle_bitmask(mask)) == mask


@pytest.mark.parametrize("label, name", [
    ("HW Power Brake Slowdown", "hw_power_brake_slowdown"),
    ("clocks_throttle_reason_sw_power_cap", "sw_power_cap"),
    ("clocks_event_reason_display_clocks_setting", "display_clock_setting"),
    ("Idle", "gpu_idle"),
    ("power_cap", "sw_power_cap"),  # dcgm-exporter label
    ("Invalid HW Slowdown", None),
])
def test_canonical_reason(label, name):
    assert canonical_reason(label) == name


def test_slowed_by_ignores_idle_and_power_cap():
    state = GpuState(throttle_reasons=["gpu_idle", "sw_power_cap", "hw_slowdown", "hw_power_brake_slowdown"])
    assert state.slowed_by == ["hw_slowdown", "hw_power_brake_slowdown"]


@pytest.mark.parametrize("text", ["N/A", "[N/A]", "[Not Supported]", "ERR!", "-", "  ", "Unknown Error",
                                  "[Requested functionality has been deprecated]", None])
def test_placeholders_are_none(text):
    assert units.number(text) is None
    assert units.yes_no(text) is None


def test_numbers_with_units():
    assert units.number("1410 MHz") == 1410
    assert units.number("-8 C") == -8
    assert units.number("67.74 W") == 67.74
    assert units.integer("16x") == 16
    assert units.integer("0x0000000000000068") == 0x68
    with pytest.raises(ValueError):
        units.number("fast")


def test_time_naive_and_with_zone():
    iso, note = units.parse_time("Wed Jul 31 11:22:39 2024")
    assert iso == "2024-07-31T11:22:39" and "zone" in note
    iso, note = units.parse_time("2025/04/22 12:48:30.154", tz="Europe/Berlin")
    assert iso == "2025-04-22T10:48:30.154Z" and note is None
    # a bundle records `date +%z` when the zone has no IANA name: a fixed offset
    assert units.parse_time("2025/04/22 12:48:30", tz="+0200") == ("2025-04-22T10:48:30Z", None)
    assert units.parse_time("yesterday")[0] is None
