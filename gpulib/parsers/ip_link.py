"""``ip -o link show``: which network interfaces exist on a node and whether they are up.

Why it matters: ``NCCL_SOCKET_IFNAME`` names the interface NCCL bootstraps (and, without IB,
moves data) over. A name that exists on the login node but not on the compute nodes, or an
interface that is down, fails at init with ``unhandled system error`` / "no socket interface
found" -- on some nodes only. One line per interface::

    4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP mode DEFAULT ... link/ether ...
    7: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq state UP ... link/infiniband ...

An interface is up when its flags hold ``UP`` (administratively up) and ``LOWER_UP`` (carrier);
``lo`` reports ``state UNKNOWN`` and is up by its flags. ``eth0@if12`` (a veth pair) is named ``eth0``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem

KIND = "ip_link"

_LINE = re.compile(r"^(?P<index>\d+): (?P<name>[^:@\s]+)(?:@\S+)?: <(?P<flags>[^>]*)> (?P<rest>.*)$")
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
    return bool(lines) and all(_LINE.match(line) for line in lines)


def parse(text: str, source: str = "<text>") -> ParseResult[NetInterface]:
    result: ParseResult[NetInterface] = ParseResult(KIND)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
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
