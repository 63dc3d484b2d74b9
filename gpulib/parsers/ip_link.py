"""``ip -o link show``: which network interfaces exist on a node and whether they are up.

Why it matters: ``NCCL_SOCKET_IFNAME`` names the interface NCCL bootstraps (and, without IB,
moves data) over. A name that exists on the login node but not on the compute nodes, or an
interface that is down, fails at init with ``unhandled system error`` / "no socket interface
found" -- on some nodes only. One line per interface::

    4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP mode DEFAULT ... link/ether ...
    7: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq state UP ... link/infiniband ...

An interface is up when its flags hold ``UP`` (administratively up) and ``LOWER_UP`` (carrier);
``lo`` reports ``state UNKNOWN`` and is up by its flags. ``eth0@if12`` (a veth pair) is named ``eth0``.

The brief form (``ip -br addr`` / ``ip -br link``, what people paste to compare nodes) is one line per
interface too: name, operational state, then its addresses (``addr``) or MAC and flags (``link``)::

    enp4s0           UP             192.168.60.11/24 fe80::3efd:feff:fe02:a1b0/64
    ibp26s0          UP             00:00:10:29:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:6b:c2:01 <BROADCAST,MULTICAST,UP,LOWER_UP>

There an interface is up when its state is ``UP`` (or ``UNKNOWN``, as ``lo`` and tunnels report).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem

KIND = "ip_link"

_LINE = re.compile(r"^(?P<index>\d+): (?P<name>[^:@\s]+)(?:@\S+)?: <(?P<flags>[^>]*)> (?P<rest>.*)$")
#: ``ip -br``: name (``@peer`` dropped), operational state, then addresses or the MAC and flags.
_BRIEF = re.compile(r"^(?P<name>[^\s@]+)(?:@\S+)?\s+(?P<state>UP|DOWN|UNKNOWN|LOWERLAYERDOWN|DORMANT|NOTPRESENT|TESTING)"
                    r"(?:\s+(?P<rest>\S.*?))?\s*$")
_STATE = re.compile(r"\bstate (?P<state>\S+)")
_LINK = re.compile(r"link/(?P<type>\S+)")


@dataclass
class NetInterface:
    name: str
    up: bool  # administratively up and carrier present
    state: str | None = None  # UP | DOWN | UNKNOWN (ip) or the sysfs operstate
    link_type: str | None = None  # ether | infiniband | loopback | none
    line: int | None = None

    @property
    def is_loopback(self) -> bool:
        return self.link_type == "loopback" or self.name == "lo"


def looks_like(head: str) -> bool:
    lines = [line for line in head.splitlines() if line.strip()][:10]
    return bool(lines) and (all(_LINE.match(line) for line in lines) or all(_BRIEF.match(line) for line in lines))


def _brief(m: re.Match, number: int) -> NetInterface:
    rest = m["rest"] or ""
    link = "loopback" if m["name"] == "lo" else "infiniband" if re.match(r"(?:[0-9a-f]{2}:){19}", rest) else None
    return NetInterface(name=m["name"], up=m["state"] in ("UP", "UNKNOWN"), state=m["state"], link_type=link, line=number)


def parse(text: str, source: str = "<text>") -> ParseResult[NetInterface]:
    result: ParseResult[NetInterface] = ParseResult(KIND)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        brief = _BRIEF.match(line)
        if brief:
            result.records.append(_brief(brief, number))
            continue
        m = _LINE.match(line)
        if not m:
            if line.startswith((" ", "\t")):
                continue  # the second line of non -o output ("    link/ether ...")
            result.problems.append(Problem(source, f"not an 'ip -o link' line: {line.strip()[:80]!r}", number))
            continue
        flags = set(m["flags"].split(","))
        state = _STATE.search(m["rest"])
        link = _LINK.search(m["rest"])
        result.records.append(NetInterface(name=m["name"], up="UP" in flags and "LOWER_UP" in flags,
                                           state=state["state"] if state else None,
                                           link_type=link["type"] if link else None, line=number))
    if not result.records and not result.problems:
        result.problems.append(Problem(source, "empty file: no ip link output"))
    return result
