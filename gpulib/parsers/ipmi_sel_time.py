"""``ipmitool sel time get``: the BMC's clock at the moment of capture.

Why it matters: SEL entries are stamped by the BMC's own clock, which has no time zone and
drifts. Read together with the bundle's UTC capture time, this one line gives the offset that
puts SEL entries on the incident timeline (:func:`gpulib.parsers.ipmi_sel.align_to_utc`).
Output is one line, ``03/15/2025 02:14:07`` (month/day/year, 24-hour clock).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from gpulib.parsers.base import ParseResult, Problem

KIND = "ipmitool_sel_time"

_CLOCK = re.compile(r"^\s*(?P<date>\d\d/\d\d/\d{4}) (?P<time>\d\d:\d\d:\d\d)\s*$")


@dataclass
class SelClock:
    time_text: str  # as printed
    time_bmc: str  # ISO, no zone: the BMC's clock
    line: int


def looks_like(head: str) -> bool:
    lines = [line for line in head.splitlines() if line.strip()]
    return len(lines) == 1 and bool(_CLOCK.match(lines[0]))


def parse(text: str, source: str = "<text>") -> ParseResult[SelClock]:
    result: ParseResult[SelClock] = ParseResult(KIND)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _CLOCK.match(line)
        try:
            stamp = datetime.strptime(f"{m['date']} {m['time']}", "%m/%d/%Y %H:%M:%S") if m else None
        except ValueError:
            stamp = None
        if stamp is None:
            result.problems.append(Problem(source, f"not a BMC clock reading (MM/DD/YYYY HH:MM:SS): {line.strip()[:80]!r}",
                                           number))
            continue
        result.records.append(SelClock(line.strip(), stamp.isoformat(), number))
    if not result.records and not result.problems:
        result.problems.append(Problem(source, "empty file: no ipmitool sel time output"))
    return result
