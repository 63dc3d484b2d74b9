"""A long GPU monitoring log is reduced per GPU: the diagnosis keeps O(GPUs) objects, same answer.

The log is generated here: ``nvidia-smi --query-gpu=... --format=csv -l 1`` on 4 GPUs, 25,000
samples each (100,000 rows); GPU 2 starts to throttle (mask 0x68: HW slowdown + HW/SW thermal) at
sample 20,000 and stays throttled, its SM clock falls to 735 MHz at sample 24,000.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from gpulib.diagnose import diagnose
from gpulib.evidence.gather import gather
from gpulib.parsers import gpu_series
from gpulib.parsers.gpu_records import GpuSample
from gpulib.parsers.gpu_series import MAX_POINTS, GpuSeries

HEADER = ("timestamp, index, pci.bus_id, temperature.gpu, clocks.sm [MHz], clocks.max.sm [MHz], "
          "utilization.gpu [%], clocks_event_reasons.active")
BUSES = ("07", "0F", "47", "4E")
START = datetime(2025, 4, 22, 6, 0, 0)
SAMPLES, HOT_FROM, SLOWEST_AT = 25_000, 20_000, 24_000


def _log() -> str:
    rows = [HEADER]
    for k in range(SAMPLES):
        stamp = f"{START + timedelta(seconds=k):%Y/%m/%d %H:%M:%S}"
        for i, bus in enumerate(BUSES):
            hot = i == 2 and k >= HOT_FROM
            clock = 735 if hot and k == SLOWEST_AT else 1005 if hot else 1410
            rows.append(f"{stamp}.{150 + i}, {i}, 00000000:{bus}:00.0, {88 if hot else 60 + k % 7}, {clock} MHz, "
                        f"1410 MHz, 100 %, {'0x0000000000000068' if hot else '0x0000000000000000'}")
    return "\n".join(rows) + "\n"


def _throttle(diagnosis):
    return [f for f in diagnosis.findings if f.id.startswith("throttle")]


def test_long_series_is_reduced_and_gives_the_same_answer(tmp_path):
    folder = tmp_path / "node-a07"
    folder.mkdir()
    (folder / "gpu_stats_node-a07.csv").write_text(_log(), encoding="utf-8")

    reduced = gather([tmp_path], tz="UTC")
    (f,) = reduced.of_kind("nvidia_smi_csv")
    assert not [r for r in f.records if isinstance(r, GpuSample)]
    assert [(s.index, s.samples) for s in f.records] == [(i, SAMPLES) for i in range(4)]  # O(GPUs) objects
    hot = f.records[2]
    assert isinstance(hot, GpuSeries) and len(hot.points) <= MAX_POINTS
    assert hot.throttled == SAMPLES - HOT_FROM and hot.throttled_s == SAMPLES - 1 - HOT_FROM

    summary = _throttle(diagnose([tmp_path], tz="UTC", inputs=reduced))
    full = _throttle(diagnose([tmp_path], tz="UTC", inputs=gather([tmp_path], tz="UTC", full_series=True)))
    assert [(x.time, x.gpu_index, x.title, [e.line for e in x.quotes]) for x in summary] == \
        [(x.time, x.gpu_index, x.title, [e.line for e in x.quotes]) for x in full]
    (finding,) = summary
    assert (finding.time, finding.gpu_index, finding.gpu_pci) == ("2025-04-22T11:33:20.152Z", 2, "0000:47:00.0")
    assert "5000 of 25000 samples throttled" in finding.title and "SM clock down to 735/1410 MHz" in finding.title
    assert [e.line for e in finding.quotes] == [2 + 4 * HOT_FROM + 2, 2 + 4 * SLOWEST_AT + 2]


def test_summary_keeps_the_earliest_throttled_sample_whatever_the_order():
    def sample(second: int, mask: int, clock: float) -> GpuSample:
        return GpuSample(f"2025-04-22T10:00:{second:02d}Z", index=0, pci_bus_id="0000:07:00.0", temp_c=80.0 + second,
                         sm_clock_mhz=clock, util_gpu_pct=100.0, throttle_bitmask=mask,
                         throttle_reasons=["sw_thermal_slowdown"] if mask else [], line=second)

    rows = [sample(30, 0x20, 900), sample(10, 0x20, 1000), sample(5, 0, 1400), sample(20, 0x20, 900)]
    (series,) = gpu_series.summarize(rows)
    assert series.first_throttled.line == 10 and series.last_throttled.line == 30
    assert series.slowest_throttled.line == 20  # 900 MHz twice: the earlier one
    assert (series.samples, series.throttled, series.hottest_throttled_c, series.throttled_s) == (4, 3, 110.0, 20.0)
    assert (series.temp_c.min, series.temp_c.max, series.sm_clock_loaded_mhz.mean) == (85.0, 110.0, 1050.0)
    assert series.time_utc == "2025-04-22T10:00:05Z" and series.reasons == {"sw_thermal_slowdown"}
