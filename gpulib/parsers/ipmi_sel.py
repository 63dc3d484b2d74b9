"""The BMC's System Event Log: ``ipmitool sel elist`` / ``sel list``, and FreeIPMI ``ipmi-sel``.

Why it matters: ``ipmitool sdr`` shows the power supplies *now*; a PSU that lost its AC feed for
two seconds at 03:12 and came back is ``ok`` again by the time anyone looks. The SEL keeps the
*history*: "Power Supply AC lost", "Failure detected", "Redundancy Lost", "Power off/down". A
GPU that fell off the bus in the same minute as an AC-lost event on its node was browned out,
not broken: fix the feed, do not RMA the GPU.

Layouts (``|``-separated, record ids in hex for ipmitool):

* ``ipmitool sel elist``:
  ``  1a | 03/15/2025 | 02:11:58 | Power Supply PS2 Status | Power Supply AC lost | Asserted``
  (``sel list`` prints ``Power Supply #0x51`` instead of the sensor name; before the BMC clock
  was set an entry reads ``Pre-Init  |0000000009|`` and has no usable time);
* FreeIPMI ``ipmi-sel``, with a header row naming its columns:
  ``ID | Date | Time | Name | Type | [State |] Event [| Event Direction]``
  (dates ``Dec-09-2024``, or ``PostInit`` when the clock was not set).

The BMC clock has no time zone and is often minutes off. ``time_bmc`` is the entry's time on
that clock, as an ISO string without zone. :func:`align_to_utc` turns it into UTC with the
offset between ``ipmitool sel time get`` (the BMC's "now", see :mod:`gpulib.parsers.ipmi_sel_time`)
and the capture's own UTC time, so SEL entries can be placed on the incident timeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpulib.parsers.base import ParseResult, Problem

KIND = "ipmitool_sel"

_IPMITOOL_ROW = re.compile(
    r"^\s*(?P<id>[0-9a-fA-F]+)\s*\|\s*(?P<date>[^|]*?)\s*\|\s*(?P<time>[^|]*?)\s*\|\s*(?P<sensor>[^|]*?)\s*\|"
    r"\s*(?P<event>[^|]*?)\s*(?:\|\s*(?P<direction>Asserted|Deasserted)\s*)?(?:\|\s*(?P<extra>.*?))?\s*$")
_FREEIPMI_HEADER = re.compile(r"^\s*ID\s*\|\s*Date\s*\|\s*Time\s*\|", re.I)
_DATE_FORMATS = ("%m/%d/%Y %H:%M:%S", "%b-%d-%Y %H:%M:%S")

#: Sensor types / names that are about the node's power (IPMI sensor types 08h Power Supply,
#: 09h Power Unit, and the ACPI power state / system event sensors that log power cycles).
_POWER_SENSOR = re.compile(r"power supply|power unit|pwr unit|\bPSU?\d*\b|\bPWS\d*|system acpi power|"
                           r"power state|\bAC\b", re.I)
#: Event texts that mean the node lost (part of) its power. Vendors word them differently; these
#: are the IPMI specification's offsets for sensor types 08h/09h plus the common OEM wordings.
_POWER_LOSS = re.compile(r"AC lost|input lost|failure detected|predictive failure|redundancy lost|"
                         r"non-redundant|insufficient resources|power off/down|power cycle|AC/DC lost|"
                         r"out of range|power supply (?:input )?lost|soft power control failure|"
                         r"power unit failure|power supply failure", re.I)


@dataclass
class SelEvent:
    """One SEL entry. ``time_bmc`` is on the BMC's clock (ISO, no zone); ``time_utc`` is filled
    by :func:`align_to_utc`; both are None for ``Pre-Init``/``PostInit`` entries."""

    record_id: str
    time_text: str  # "03/15/2025 02:11:58" as printed
    sensor: str  # "Power Supply PS2 Status"
    event: str  # "Power Supply AC lost"
    direction: str | None  # Asserted | Deasserted | None (not printed)
    time_bmc: str | None = None
    time_utc: str | None = None
    sensor_type: str | None = None  # FreeIPMI's Type column ("Power Supply")
    state: str | None = None  # FreeIPMI's State column (Nominal | Warning | Critical)
    line: int | None = None

    @property
    def is_power_event(self) -> bool:
        """An entry about the node's power: a supply, the power unit, a power state change."""
        return bool(_POWER_SENSOR.search(f"{self.sensor_type or ''} {self.sensor}") or _POWER_LOSS.search(self.event))

    @property
    def is_power_loss(self) -> bool:
        """A power event that says power was lost or degraded (and not its deassertion, which is
        the recovery)."""
        return (self.is_power_event and self.direction != "Deasserted"
                and (bool(_POWER_LOSS.search(self.event)) or (self.state or "").lower() == "critical"))


def looks_like(head: str) -> bool:
    lines = [line for line in head.splitlines() if line.strip()][:20]
    if lines and _FREEIPMI_HEADER.match(lines[0]):
        return True
    good = sum(1 for line in lines if (m := _IPMITOOL_ROW.match(line)) and m["direction"])
    return good >= min(2, len(lines)) and good > 0


def _bmc_time(date: str, time: str) -> str | None:
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(f"{date} {time}", fmt).isoformat()
        except ValueError:
            continue
    return None


def parse(text: str, source: str = "<text>") -> ParseResult[SelEvent]:
    """Parse ``ipmitool sel elist``/``sel list`` or FreeIPMI ``ipmi-sel`` output."""
    result: ParseResult[SelEvent] = ParseResult(KIND)
    columns: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or set(line.strip()) <= set("-+|"):
            continue
        if _FREEIPMI_HEADER.match(line):
            columns = [c.strip().lower() for c in line.split("|")]
            continue
        event = _freeipmi_row(line, columns, number) if columns else _ipmitool_row(line, number)
        if event is None:
            result.problems.append(Problem(source, f"not a SEL entry: {line.strip()[:80]!r}", number))
            if len(result.problems) >= 20 and not result.records:
                break  # clearly not SEL output
            continue
        result.records.append(event)
    if not result.records and not result.problems:
        result.problems.append(Problem(source, "empty SEL listing (the log was cleared, or the BMC returned nothing)"))
    return result


def _ipmitool_row(line: str, number: int) -> SelEvent | None:
    m = _IPMITOOL_ROW.match(line)
    if not m or not (m["direction"] or m["event"]):
        return None
    event = m["event"]
    if m["extra"]:  # OEM data after the direction ("| Asserted | OEM data ...") stays with the event text
        event = f"{event} ({m['extra']})"
    return SelEvent(record_id=m["id"].lower(), time_text=f"{m['date']} {m['time']}".strip(), sensor=m["sensor"],
                    event=event, direction=m["direction"], time_bmc=_bmc_time(m["date"], m["time"]), line=number)


def _freeipmi_row(line: str, columns: list[str], number: int) -> SelEvent | None:
    cells = [c.strip() for c in line.split("|")]
    if len(cells) != len(columns) or not cells[0].isdigit():
        return None
    row = dict(zip(columns, cells, strict=True))
    direction = row.get("event direction")
    return SelEvent(record_id=row["id"], time_text=f"{row.get('date', '')} {row.get('time', '')}".strip(),
                    sensor=row.get("name", ""), event=row.get("event", ""),
                    direction={"assertion event": "Asserted", "deassertion event": "Deasserted"}.get(
                        (direction or "").lower(), direction),
                    time_bmc=_bmc_time(row.get("date", ""), row.get("time", "")),
                    sensor_type=row.get("type"), state=row.get("state"), line=number)


def align_to_utc(events: list[SelEvent], bmc_now: str, captured_at_utc: str) -> timedelta:
    """Fill ``time_utc`` of each event, assuming the BMC clock ran at a fixed offset from UTC.

    ``bmc_now`` is the BMC's clock at capture (``SelClock.time_bmc``), ``captured_at_utc`` the
    bundle's ISO time (a trailing ``Z`` or ``+00:00`` is accepted). Returns that offset (BMC minus
    UTC), which the caller should show: a BMC several hours off is on local time, minutes off is
    drift, and either way the SEL times were corrected by it.
    """
    bmc = datetime.fromisoformat(bmc_now)
    utc = datetime.fromisoformat(captured_at_utc.replace("Z", "+00:00")).replace(tzinfo=None)
    offset = timedelta(seconds=round((bmc - utc).total_seconds()))  # the BMC clock ticks in whole seconds
    for event in events:
        if event.time_bmc:
            event.time_utc = (datetime.fromisoformat(event.time_bmc) - offset).isoformat() + "Z"
    return offset
