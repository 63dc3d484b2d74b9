"""``ipmitool sensor``: every BMC sensor with its reading, unit, status and six thresholds.

Why it matters: unlike ``sdr list`` this layout carries the thresholds, so a fan at 1,200 RPM
with a lower-critical of 1,000 or an inlet at 38 C against an upper-critical of 42 is visible
*before* the status flips. Fans, inlet/exhaust temperatures and PSU input power explain GPU
thermal and power-brake slowdowns the GPU logs cannot.

Ten ``|``-separated columns::

    name | reading | unit | status | lower-non-recoverable | lower-critical | lower-non-critical |
         upper-non-critical | upper-critical | upper-non-recoverable

``na`` marks a missing value; discrete sensors print a hex state (``0x0180``) as reading
and status.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem

KIND = "ipmitool_sensor"

_THRESHOLD_STATUS = {"ok": "ok", "nc": "warning", "lnc": "warning", "unc": "warning", "cr": "critical",
                     "lcr": "critical", "ucr": "critical", "nr": "critical", "lnr": "critical", "unr": "critical",
                     "na": "unknown", "ns": "unknown"}


@dataclass
class BmcSensor:
    name: str
    reading: str  # as printed
    value: float | None  # None for discrete sensors and "na"
    unit: str  # "degrees C", "RPM", "Watts", "Volts", "discrete"
    status: str  # ok, cr, nc, ... or the discrete state "0x0180"
    lower_critical: float | None = None
    upper_critical: float | None = None
    lower_non_critical: float | None = None
    upper_non_critical: float | None = None
    line: int | None = None

    @property
    def severity(self) -> str:
        """ok | warning | critical | unknown (discrete sensors are unknown: their state bits are
        sensor-specific)."""
        return _THRESHOLD_STATUS.get(self.status.lower(), "unknown")

    @property
    def kind(self) -> str:
        """temperature | fan | power | voltage | current | other, from the unit."""
        unit = self.unit.lower()
        for word, kind in (("degrees", "temperature"), ("rpm", "fan"), ("watts", "power"), ("volts", "voltage"),
                           ("amps", "current")):
            if word in unit:
                return kind
        return "other"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _row(line: str) -> list[str] | None:
    cells = [c.strip() for c in line.split("|")]
    return cells if len(cells) == 10 and cells[0] else None


def looks_like(head: str) -> bool:
    lines = [line for line in head.splitlines() if line.strip()][:20]
    good = sum(1 for line in lines if _row(line))
    return good >= min(2, len(lines)) and good > 0


def parse(text: str, source: str = "<text>") -> ParseResult[BmcSensor]:
    result: ParseResult[BmcSensor] = ParseResult(KIND)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = _row(line)
        if cells is None:
            result.problems.append(Problem(source, f"not an ipmitool sensor row (10 columns): {line.strip()[:80]!r}",
                                           number))
            if len(result.problems) >= 20 and not result.records:
                break
            continue
        name, reading, unit, status, _lnr, lcr, lnc, unc, ucr, _unr = cells
        result.records.append(BmcSensor(
            name=name, reading=reading, value=None if unit == "discrete" else _number(reading), unit=unit,
            status=status, lower_critical=_number(lcr), upper_critical=_number(ucr),
            lower_non_critical=_number(lnc), upper_non_critical=_number(unc), line=number))
    if not result.records and not result.problems:
        result.problems.append(Problem(source, "empty file: no ipmitool sensor output"))
    return result
