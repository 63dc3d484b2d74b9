"""A GPU time series reduced to what a diagnosis reads from it, per GPU, in bounded memory.

A monitoring log (``nvidia-smi --query-gpu ... -l 5``, dmon, NVML sampling, DCGM) holds one row
per GPU every few seconds: a day of it on a 1,024-node job is millions of rows. What the diagnosis
needs from it is per GPU: *when* the GPU first throttled and why (the moment its rank began to
straggle), how long and how often it stayed throttled, the slowest throttled sample, and the range
of temperature and SM clock. :func:`summarize` folds the samples into one :class:`GpuSeries` per
GPU, whose size does not grow with the length of the log (it keeps three samples and at most
:data:`MAX_POINTS` down-sampled points), so memory stays flat in the size of the logs.

The notebooks plot full series of one evidence folder and read the samples themselves
(:meth:`gpulib.notebook.tables.EvidenceTables.gpu_samples`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from gpulib.parsers.gpu_records import GpuSample

#: Most points kept per GPU for a sparkline; more are thinned evenly (every 2nd, 4th, ...). Small on
#: purpose: 8,192 GPUs x 32 points is a few MiB.
MAX_POINTS = 32
#: Utilization from which a GPU counts as loaded (its SM clock should then be near max).
LOADED_PCT = 80


@dataclass
class Stats:
    """Minimum, maximum and mean of a reading over the samples that reported it."""

    count: int = 0
    min: float | None = None
    max: float | None = None
    total: float = 0.0

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.count += 1
        self.total += value
        self.min = value if self.min is None or value < self.min else self.min
        self.max = value if self.max is None or value > self.max else self.max

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


class Point(NamedTuple):
    """One down-sampled reading of the series (what a sparkline of the GPU shows)."""

    time_utc: str | None
    temp_c: float | None
    sm_clock_mhz: float | None
    throttle_bitmask: int | None


def _when(sample: GpuSample) -> str:
    return sample.time_utc or ""


@dataclass
class GpuSeries:
    """One GPU's samples from one source, reduced (see the module text). ``time_utc`` is the first
    sample's time, ``first_throttled`` the earliest sample slowed by heat or power delivery."""

    host: str | None
    index: int | None
    pci_bus_id: str | None
    uuid: str | None
    time_utc: str | None = None  # earliest sample
    last_time_utc: str | None = None
    samples: int = 0
    reasons_reported: bool = False  # some sample carried throttle reasons (dmon does not)
    throttled: int = 0
    reasons: set[str] = field(default_factory=set)  # every slowdown reason seen
    first_throttled: GpuSample | None = None
    last_throttled: GpuSample | None = None
    slowest_throttled: GpuSample | None = None
    hottest_throttled_c: float | None = None
    temp_c: Stats = field(default_factory=Stats)
    sm_clock_loaded_mhz: Stats = field(default_factory=Stats)  # samples at >= LOADED_PCT util
    sm_clock_max_mhz: float | None = None
    points: list[Point] = field(default_factory=list)  # down-sampled, in input order
    _stride: int = 1

    @property
    def throttled_s(self) -> float | None:
        """Seconds from the first to the last throttled sample (None without two stamped ones)."""
        a = self.first_throttled and self.first_throttled.time_utc
        b = self.last_throttled and self.last_throttled.time_utc
        if not a or not b:
            return None
        try:
            return (datetime.fromisoformat(b.rstrip("Z")) - datetime.fromisoformat(a.rstrip("Z"))).total_seconds()
        except ValueError:
            return None

    def add(self, s: GpuSample) -> None:
        when = _when(s)
        if self.samples == 0 or when < (self.time_utc or ""):
            self.time_utc = s.time_utc
        if self.samples == 0 or when > (self.last_time_utc or ""):
            self.last_time_utc = s.time_utc
        self.samples += 1
        if s.throttle_bitmask is not None or s.throttle_reasons:
            self.reasons_reported = True
        self.temp_c.add(s.temp_c)
        if s.util_gpu_pct is not None and s.util_gpu_pct >= LOADED_PCT:
            self.sm_clock_loaded_mhz.add(s.sm_clock_mhz)
        if s.sm_clock_max_mhz is not None and (self.sm_clock_max_mhz is None or s.sm_clock_max_mhz > self.sm_clock_max_mhz):
            self.sm_clock_max_mhz = s.sm_clock_max_mhz
        slowed = s.slowed_by
        if slowed:
            self._throttled(s, when, slowed)
        if (self.samples - 1) % self._stride == 0:
            self.points.append(Point(s.time_utc, s.temp_c, s.sm_clock_mhz, s.throttle_bitmask))
            if len(self.points) > MAX_POINTS:
                self.points = self.points[::2]
                self._stride *= 2

    def _throttled(self, s: GpuSample, when: str, slowed: list[str]) -> None:
        """Earliest wins ties in input order, as a stable sort by time would."""
        self.throttled += 1
        self.reasons.update(slowed)
        if self.first_throttled is None or when < _when(self.first_throttled):
            self.first_throttled = s
        if self.last_throttled is None or when >= _when(self.last_throttled):
            self.last_throttled = s
        slow = (s.sm_clock_mhz or 1e9, when)
        if self.slowest_throttled is None or slow < (self.slowest_throttled.sm_clock_mhz or 1e9,
                                                      _when(self.slowest_throttled)):
            self.slowest_throttled = s
        if s.temp_c is not None and (self.hottest_throttled_c is None or s.temp_c > self.hottest_throttled_c):
            self.hottest_throttled_c = s.temp_c


def summarize(samples: Iterable[GpuSample]) -> list[GpuSeries]:
    """One :class:`GpuSeries` per GPU (host and PCI id, else index) of ``samples``, in first-seen order."""
    out: dict[tuple, GpuSeries] = {}
    for s in samples:
        key = (s.host, s.pci_bus_id or s.index)
        series = out.get(key)
        if series is None:
            series = out[key] = GpuSeries(s.host, s.index, s.pci_bus_id, s.uuid)
        series.add(s)
    return list(out.values())
