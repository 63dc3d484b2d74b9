"""``ipmitool chassis status``: is the node powered, and why did it last lose power?

Why it matters: ``Last Power Event : ac-failed`` says the node lost its AC feed (not a software
reboot); ``Main Power Fault : true`` or ``Power Overload : true`` name a power-path fault the BMC
latched. After a node vanished mid-job, this is the quickest out-of-band answer to "did it lose
power?". Output is ``Key : value`` lines, e.g.::

    System Power         : on
    Power Overload       : false
    Main Power Fault     : false
    Last Power Event     : ac-failed

``Last Power Event`` is empty when nothing was latched, and can hold several words
(``ac-failed overload``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.parsers.base import ParseResult, Problem

KIND = "ipmitool_chassis"

_KV = re.compile(r"^(?P<key>[A-Za-z][A-Za-z/ -]*?)\s*:\s*(?P<value>.*?)\s*$")
_KEYS = ("System Power", "Power Overload", "Main Power Fault", "Last Power Event")
_FAULT_FLAGS = ("Power Overload", "Main Power Fault", "Power Control Fault", "Power Interlock",
                "Cooling/Fan Fault", "Drive Fault")
#: ``Last Power Event`` words that mean power was lost rather than switched off by a command.
_LOSS_EVENTS = {"ac-failed", "overload", "interlock", "fault"}


@dataclass
class ChassisStatus:
    system_power: str | None  # on | off
    last_power_events: list[str] = field(default_factory=list)  # ["ac-failed"]
    faults: list[str] = field(default_factory=list)  # flags reported true/active: ["Main Power Fault"]
    fields: dict[str, str] = field(default_factory=dict)  # every line as printed
    line: int = 1

    @property
    def power_lost(self) -> bool:
        """The BMC latched a power loss or a power-path fault."""
        return bool(_LOSS_EVENTS.intersection(self.last_power_events)) or any(
            f in self.faults for f in ("Power Overload", "Main Power Fault", "Power Control Fault"))


def looks_like(head: str) -> bool:
    if sum(k in head for k in _KEYS) < 3:
        return False  # cheaper than reading every line of the head
    keys = {m["key"] for line in head.splitlines() if (m := _KV.match(line.strip()))}
    return sum(k in keys for k in _KEYS) >= 3


def parse(text: str, source: str = "<text>") -> ParseResult[ChassisStatus]:
    result: ParseResult[ChassisStatus] = ParseResult(KIND)
    fields: dict[str, str] = {}
    first = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _KV.match(line.strip())
        if not m:
            result.problems.append(Problem(source, f"not a 'Key : value' line: {line.strip()[:80]!r}", number))
            continue
        first = first or number
        fields[m["key"]] = m["value"]
    if not any(k in fields for k in _KEYS):
        result.problems.append(Problem(source, "no chassis power fields (System Power, Last Power Event, ...)"))
        return result
    result.records.append(ChassisStatus(
        system_power=fields.get("System Power"),
        last_power_events=fields.get("Last Power Event", "").split(),
        faults=[k for k in _FAULT_FLAGS if fields.get(k, "").lower() in ("true", "active")],
        fields=fields, line=first or 1))
    return result
