"""Samples of a host's memory: how much of it was still available, over time.

Why: a process that grows until the host has little memory left need not be killed to fail. Long
before the kernel's OOM killer acts, the host reclaims page cache, swaps and stalls: a data loader,
an RPC worker or an inference engine waits seconds where it waited milliseconds, and the job dies of a
time-out that names no memory at all. Unified-memory machines (one pool for CPU and GPU) reach this
state with nothing else running. A series of samples says it: available memory low up to the failure,
and back up once the process that held it exited. Three shapes engineers capture:

* a CSV of ``/proc/meminfo`` samples: a time column and ``MemAvailable`` beside ``MemTotal`` (any of
  ``mem_available_kib``, ``MemAvailable``, ``available``; ``mem_total_kib``, ``MemTotal``, ``total``),
  or an ``available_pct`` column;
* ``sar -r`` (sysstat): its banner names the host and the date, each row a time, ``kbavail`` and
  ``kbmemused`` with ``%memused`` (the total is ``kbmemused / %memused``);
* ``free`` snapshots (``free -m``, ``free -g``, ``free -h``, or KiB): the ``Mem:`` row's ``total`` and
  ``available``, timed by a stamped line above it (``date`` typed before ``free``).

``vmstat`` prints no available memory and no total, so it is not read here.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.logtime import stamp_in, zone_of

KIND = "host_memory"


@dataclass(frozen=True)
class MemSample:
    """Memory of ``host`` (None when the file does not name it) at ``time_utc``: the total and what was
    still available, in KiB, from ``line`` of the file."""

    time_utc: str | None
    host: str | None
    mem_total_kib: float
    mem_available_kib: float
    line: int
    text: str

    @property
    def available_pct(self) -> float:
        return 100.0 * self.mem_available_kib / self.mem_total_kib if self.mem_total_kib else 0.0


_TIME_COL = re.compile(r"(?i)^(?:time(?:stamp)?(?:_utc)?|date(?:time)?|ts)$")
_AVAIL_COL = re.compile(r"(?i)^(?:mem_?available(?:_kib|_kb)?|available(?:_kib|_kb)?|memavail(?:able)?)$")
_TOTAL_COL = re.compile(r"(?i)^(?:mem_?total(?:_kib|_kb)?|total(?:_kib|_kb)?)$")
_PCT_COL = re.compile(r"(?i)^(?:mem_?)?avail(?:able)?_?(?:pct|percent|%)$")
_SAR_BANNER = re.compile(r"^Linux \S+ \((?P<host>[\w.-]+)\)\s+(?P<m>\d\d)/(?P<d>\d\d)/(?P<y>\d{2,4})\b")
_SAR_HEADER = re.compile(r"^(?P<t>\d\d:\d\d:\d\d(?: [AP]M)?)\s+kbmemfree\s")
_SAR_ROW = re.compile(r"^(?P<t>\d\d:\d\d:\d\d(?: [AP]M)?)\s+(?P<vals>[\d.\s]+)$")
_FREE_HEADER = re.compile(r"^\s+total\s+used\s+free\s+shared\s+buff/cache\s+available\s*$")
_FREE_MEM = re.compile(r"^Mem:\s+(?P<vals>.+)$")
_FREE_UNIT = {"-b": 1 / 1024, "-k": 1, "-m": 1024, "-g": 1024 ** 2, "--mega": 1024, "--giga": 1024 ** 2}
_SUFFIX = {"": 1, "B": 1 / 1024, "K": 1, "Ki": 1, "M": 1024, "Mi": 1024, "G": 1024 ** 2, "Gi": 1024 ** 2,
           "T": 1024 ** 3, "Ti": 1024 ** 3}
_SIZE = re.compile(r"^(?P<v>\d+(?:[.,]\d+)?)(?P<s>[KMGT]i?|B)?$")


def looks_like(head: str) -> bool:
    lines = [x for x in head.splitlines() if x.strip() and not x.startswith("#")]
    if lines and "," in lines[0]:
        cols = [c.strip() for c in lines[0].split(",")]
        return any(_TIME_COL.match(c) for c in cols) and (
            any(_PCT_COL.match(c) for c in cols) or any(_AVAIL_COL.match(c) for c in cols)
            and any(_TOTAL_COL.match(c) for c in cols))
    return any(_SAR_HEADER.match(x) and "kbavail" in x for x in lines) or any(_FREE_HEADER.match(x) for x in lines)


def parse(text: str, source: str = "<text>", *, tz: str | None = None) -> ParseResult[MemSample]:
    result: ParseResult[MemSample] = ParseResult(KIND)
    try:
        lines = text.splitlines()
        first = next((k for k, x in enumerate(lines) if x.strip() and not x.startswith("#")), None)
        if first is not None and "," in lines[first] and not _FREE_HEADER.match(lines[first]):
            _csv(lines, first, source, tz, result)
        else:
            _sar(lines, tz, result)
            _free(lines, tz, result)
    except Exception as exc:  # noqa: BLE001 - a parser must report, never raise
        result.problems.append(Problem(source, f"could not be fully parsed: {exc}"))
    return result


def _number(cell: str) -> float | None:
    m = _SIZE.match(cell.strip())
    return float(m["v"].replace(",", ".")) * _SUFFIX[m["s"] or ""] if m else None


def _csv(lines: list[str], first: int, source: str, tz: str | None, result: ParseResult) -> None:
    rows = list(csv.reader(io.StringIO("\n".join(lines[first:]))))
    cols = [c.strip() for c in rows[0]]

    def col(pattern: re.Pattern) -> int | None:
        return next((k for k, c in enumerate(cols) if pattern.match(c)), None)

    t, avail, total, pct = col(_TIME_COL), col(_AVAIL_COL), col(_TOTAL_COL), col(_PCT_COL)
    for k, row in enumerate(rows[1:], first + 2):
        try:
            when = stamp_in(row[t], year=None, tz=zone_of(tz)) if t is not None else None
            if avail is not None and total is not None:
                total_kib, avail_kib = float(row[total]), float(row[avail])
            else:
                total_kib, avail_kib = 100.0, float(row[pct])  # a share only: per cent of a nominal total
        except (IndexError, ValueError):
            result.problems.append(Problem(source, "a row without a time or a memory reading", k))
            continue
        result.records.append(MemSample(when, None, total_kib, avail_kib, k, lines[k - 1]))


def _sar(lines: list[str], tz: str | None, result: ParseResult) -> None:
    host = day = None
    cols: list[str] = []
    for k, line in enumerate(lines, 1):
        if m := _SAR_BANNER.match(line):
            year = m["y"] if len(m["y"]) == 4 else "20" + m["y"]
            host, day = m["host"], f"{year}-{m['m']}-{m['d']}"
        elif _SAR_HEADER.match(line):
            cols = line.split()[2 if line.split()[1] in ("AM", "PM") else 1:]
        elif cols and (m := _SAR_ROW.match(line)) and "kbavail" in cols and "kbmemused" in cols:
            values = m["vals"].split()
            if len(values) < len(cols):
                continue
            row = dict(zip(cols, values, strict=False))
            used, share = float(row["kbmemused"]), float(row.get("%memused", 0) or 0)
            if not share:
                continue
            when = stamp_in(f"{day} {_clock(m['t'])}", year=None, tz=zone_of(tz)) if day else None
            result.records.append(MemSample(when, host, used * 100.0 / share, float(row["kbavail"]), k, line))


def _clock(t: str) -> str:
    """``03:10:01 PM`` -> ``15:10:01``."""
    clock, _, half = t.partition(" ")
    h, rest = clock.split(":", 1)
    hour = int(h) % 12 + (12 if half == "PM" else 0) if half else int(h)
    return f"{hour:02d}:{rest}"


def _free(lines: list[str], tz: str | None, result: ParseResult) -> None:
    unit = 1.0
    for k, line in enumerate(lines, 1):
        command = re.search(r"\bfree((?: -{1,2}\w+)*)", line) if "free" in line and not _FREE_HEADER.match(line) else None
        if command:
            unit = next((_FREE_UNIT[f] for f in command[1].split() if f in _FREE_UNIT), 1.0)
        if not (m := _FREE_MEM.match(line)) or k < 2 or not _FREE_HEADER.match(lines[k - 2]):
            continue
        values = [_number(v) for v in m["vals"].split()]
        if len(values) < 6 or values[0] is None or values[5] is None:
            continue
        scale = unit if not re.search(r"[KMGT]i?\b|B\b", m["vals"]) else 1.0
        above = reversed(lines[max(0, k - 6):k - 2])
        when = next((s for x in above if (s := stamp_in(x, year=None, tz=zone_of(tz)))), None)
        result.records.append(MemSample(when, None, values[0] * scale, values[5] * scale, k, line))
