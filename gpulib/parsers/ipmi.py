"""``ipmitool sdr`` output: BMC sensors, above all the power supplies.

Why it matters: a GPU node that lost a PSU (or its AC feed) can brown out under an 8-GPU load
step: GPUs fall off the bus (Xid 79) or hit the power brake (``hw_power_brake_slowdown``) for a
reason no GPU log explains. The BMC sees it.

Two layouts, both ``|``-separated:

* ``sdr list`` / ``sdr`` -- 3 columns: ``name | reading | status``
  (``PS1 Status | 0x01 | ok``, ``Inlet Temp | 22 degrees C | ok``, ``PSU2 Power | no reading | ns``);
* ``sdr elist`` / ``sdr type "Power Supply"`` -- 5 columns: ``name | id | status | entity | text``
  (``PS2 Status | 64h | ok | 10.2 | Presence detected, Power Supply AC lost``).

Status codes: ``ok``; ``ns`` no sensor/no reading; ``nc``/``lnc``/``unc`` non-critical;
``cr``/``lcr``/``ucr`` critical; ``nr``/``lnr``/``unr`` non-recoverable. A PSU row is judged by
its status and its event text (vendors word failures differently, so any ``cr``/``nr`` PSU row
is bad whatever the text says).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem

KIND = "ipmitool_sdr"

_STATUSES = {"ok", "ns", "nc", "cr", "nr", "lnc", "unc", "lcr", "ucr", "lnr", "unr", "na"}
_SEVERITY = {"ok": "ok", "ns": "unknown", "na": "unknown", "nc": "warning", "lnc": "warning", "unc": "warning",
             "cr": "critical", "lcr": "critical", "ucr": "critical", "nr": "critical", "lnr": "critical",
             "unr": "critical"}
_PSU_NAME = re.compile(r"\b(PS\d*|PSU\d*|Power ?Supply|PWS\d*)\b", re.I)
# Event texts that mean a supply is not delivering power, whatever the status column says.
_PSU_FAILURE = re.compile(r"failure|fail(ed)?\b|AC lost|input lost|out of range|predictive|redundancy lost|"
                          r"non-redundant|insufficient", re.I)
_READING = re.compile(r"^\s*(?P<value>[-+]?\d+(?:\.\d+)?)\s*(?P<unit>.*)$")


@dataclass
class SdrSensor:
    name: str
    status: str  # ok, ns, cr, ...
    reading: str | None = None  # as printed (3-column layout)
    value: float | None = None
    unit: str | None = None  # "degrees C", "Watts", "RPM", "Volts"
    sensor_id: str | None = None  # "63h" (5-column layout)
    entity: str | None = None  # "10.1" = power supply 1
    event: str | None = None  # "Presence detected, Power Supply AC lost"
    line: int | None = None

    @property
    def severity(self) -> str:
        """ok | warning | critical | unknown."""
        return _SEVERITY.get(self.status, "unknown")

    @property
    def is_power_supply(self) -> bool:
        return bool(_PSU_NAME.search(self.name)) or (self.entity or "").split(".")[0] == "10"

    @property
    def psu_failed(self) -> bool:
        """A power-supply sensor in critical state, or whose event text reports a failure."""
        if not self.is_power_supply:
            return False
        return self.severity == "critical" or bool(_PSU_FAILURE.search(self.event or ""))


def looks_like(head: str) -> bool:
    lines = [line for line in head.splitlines() if line.strip()]
    if not lines:
        return False
    good = 0
    for line in lines[:20]:
        cells = [c.strip() for c in line.split("|")]
        if len(cells) in (3, 5) and cells[2 if len(cells) == 5 else -1].lower() in _STATUSES:
            good += 1
    return good >= min(2, len(lines))


def parse(text: str, source: str = "<text>") -> ParseResult[SdrSensor]:
    """Parse ``ipmitool sdr`` (3-column) or ``sdr elist``/``sdr type`` (5-column) output."""
    result: ParseResult[SdrSensor] = ParseResult(KIND)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 3 and cells[2].lower() in _STATUSES:
            sensor = SdrSensor(name=cells[0], status=cells[2].lower(), reading=cells[1] or None, line=number)
            m = _READING.match(cells[1])
            if m and not cells[1].lower().startswith("0x"):
                sensor.value, sensor.unit = float(m["value"]), m["unit"].strip() or None
            elif sensor.reading and not m:
                sensor.event = sensor.reading  # "Fully Redundant", "no reading", "0x01" stays a reading
            result.records.append(sensor)
        elif len(cells) == 5 and cells[2].lower() in _STATUSES:
            result.records.append(SdrSensor(name=cells[0], status=cells[2].lower(), sensor_id=cells[1] or None,
                                            entity=cells[3] or None, event=cells[4] or None, line=number))
        else:
            result.problems.append(Problem(source, f"not an ipmitool sdr row: {line.strip()[:80]!r}", number))
            if len(result.problems) >= 20 and not result.records:
                break  # clearly not sdr output: stop rather than list every line
    if not result.records and not result.problems:
        result.problems.append(Problem(source, "empty file: no ipmitool output"))
    return result
