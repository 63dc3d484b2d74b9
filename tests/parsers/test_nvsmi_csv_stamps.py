"""Monitoring-log timestamps are converted once per second and the milliseconds appended: the
answer must be exactly what units.parse_time gives for the whole cell, in every zone."""

from __future__ import annotations

import pytest

from gpulib.parsers import nvsmi_csv, units

CELLS = ["2025/04/22 10:58:30.154", "2025/04/22 10:58:30.000", "2025/04/22 10:58:30.1234567",
         "2025/03/30 02:30:00.500",  # does not exist in Berlin (clocks jump 02:00 -> 03:00)
         "2024/10/27 02:30:00.250",  # exists twice in Berlin
         "2025-04-22 10:58:30.0001", "2025/04/22 10:58:30.", "2025/13/22 10:58:30.154", "[N/A]",
         "Wed Jul 31 11:22:39 2024"]


@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Berlin", "Nowhere/Zone"])
def test_stamps_match_parse_time(tz):
    header = "timestamp, index, pci.bus_id, temperature.gpu"
    text = "\n".join([header, *(f"{c}, {i % 2}, 00000000:07:00.{i % 2}, 60" for i, c in enumerate(CELLS * 2))])
    records = nvsmi_csv.parse(text, "gpu.csv", tz=tz).records
    assert [(r.time_utc, r.time_note) for r in records] == [units.parse_time(c, tz) for c in CELLS * 2]
    if tz == "Europe/Berlin":
        assert records[0].time_utc == "2025-04-22T08:58:30.154Z"
