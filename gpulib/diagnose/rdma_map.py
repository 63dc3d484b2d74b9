"""How the nodes' RDMA ports are addressed, as the operator's own commands printed it.

Two questions about a RoCE fabric can only be answered from the nodes' addressing, not from NCCL's
lines alone, and an on-call engineer usually pastes exactly the commands that answer them:

* **Which NIC holds an address?** ``ibdev2netdev`` maps an RDMA device to its network interface
  (``mlx5_5 port 1 ==> rail5 (Up)``) and ``ip -br addr`` gives that interface's address
  (``rail5  UP  10.65.5.6/24``). On a rail-optimised fabric NIC index *i* of every node is on rail
  *i*, and the rails do not reach each other: a queue pair from one node's ``mlx5_5`` to an address
  another node holds on its ``mlx5_1`` has no path.
* **Which GID does each index hold?** ``show_gids`` lists a device's GID table (index, GID, IPv4,
  RoCE v1/v2). A job that pins ``NCCL_IB_GID_INDEX`` needs the RoCE v2 GID of the routable IPv4
  address at that index on *every* node; the table is rebuilt when an address changes, and the
  index can move under a running job.

Lines are read as any shell paste holds them: bare, behind a ``pdsh`` ``host: `` prefix, or below a
prompt (``[root@node ~]#``) or an ``ssh node show_gids`` that says which node answered.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from gpulib.diagnose.addresses import short
from gpulib.evidence import kinds
from gpulib.evidence.gather import Inputs

#: Larger files are job consoles, not pasted commands.
MAX_BYTES = 4 * 1024 * 1024
#: The kinds a paste of shell commands is read as.
PASTE_KINDS = (kinds.TEXT, kinds.UNKNOWN, kinds.TRAINING_LOG)
_PDSH = re.compile(r"^(?P<host>[A-Za-z][\w.-]*): (?P<rest>.*)$")
_PROMPT = re.compile(r"^\[?[\w.-]+@(?P<host>[A-Za-z][\w.-]*)[: ][^\]#$]*\]?[#$] ?(?P<cmd>.*)$")
_SSH = re.compile(r"\bssh (?:-\S+ )*(?:\w+@)?(?P<host>[A-Za-z][\w.-]*) ")
_IBDEV = re.compile(r"^(?P<dev>\w+) port (?P<port>\d+) ==> (?P<iface>[\w.-]+) \((?:Up|Down)\)")
_ADDR = re.compile(r"^(?P<iface>[\w.@-]+)\s+(?:UP|DOWN|UNKNOWN)\s+(?P<cidr>\d+\.\d+\.\d+\.\d+/\d+)")
_GID = re.compile(r"^(?P<dev>\w+)\s+(?P<port>\d+)\s+(?P<index>\d+)\s+(?P<gid>[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7})"
                  r"\s+(?:(?P<ipv4>\d+\.\d+\.\d+\.\d+)\s+)?(?P<ver>v[12])\b")


@dataclass(frozen=True)
class GidEntry:
    """One row of ``show_gids`` on ``host``: the GID at ``index`` of ``dev``, its IPv4 address (none
    for a link-local GID) and RoCE version."""

    host: str | None
    dev: str
    index: int
    gid: str
    ipv4: str | None
    version: str
    where: str  # file:line

    @property
    def routable_v2(self) -> bool:
        """What a pinned RoCE v2 GID index must hold: an IPv4-mapped GID, RoCE v2."""
        return self.ipv4 is not None and self.version == "v2"


@dataclass
class RdmaMap:
    """Per node: RDMA device -> interface, interface -> its address; and the GID tables shown."""

    netdev: dict[tuple[str | None, str], str] = field(default_factory=dict)  # (host, dev) -> iface
    subnets: dict[tuple[str | None, str], ipaddress.IPv4Interface] = field(default_factory=dict)  # (host, iface)
    gids: list[GidEntry] = field(default_factory=list)

    def holder(self, ip: str) -> tuple[str | None, str, str] | None:
        """(host, device, interface) of the RDMA port whose interface has address ``ip``, when the
        map shows it."""
        addr = ipaddress.IPv4Address(ip)
        for (host, dev), iface in self.netdev.items():
            have = self.subnets.get((host, iface))
            if have is not None and have.ip == addr:
                return host, dev, iface
        return None


def read_map(inputs: Inputs) -> RdmaMap:
    """The RDMA addressing every pasted command output of ``inputs`` shows."""
    out = RdmaMap()
    for f in inputs.of_kind(*PASTE_KINDS):
        text = f.text(MAX_BYTES)
        if text is None:
            continue
        if "==>" not in text and "show_gids" not in text and "n_gids_found" not in text:
            continue
        _read(out, text, f.display, f.host)
    return out


def _read(out: RdmaMap, text: str, display: str, file_host: str | None) -> None:
    host = file_host
    for no, raw in enumerate(text.splitlines(), 1):
        line, at = raw.strip(), host
        prompt = _PROMPT.match(line)
        if prompt:
            ssh = _SSH.search(prompt["cmd"])
            host = short(ssh["host"] if ssh else prompt["host"])
            continue
        pdsh = _PDSH.match(line)
        if pdsh and not _GID.match(line):
            at, line = short(pdsh["host"]), pdsh["rest"].strip()
        if m := _IBDEV.match(line):
            out.netdev[(at, m["dev"])] = m["iface"]
        elif m := _ADDR.match(line):
            out.subnets[(at, m["iface"])] = ipaddress.IPv4Interface(m["cidr"])
        elif m := _GID.match(line):
            out.gids.append(GidEntry(at, m["dev"], int(m["index"]), m["gid"].lower(), m["ipv4"], m["ver"],
                                     f"{display}:{no}"))


def mapped_ipv4(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID as NCCL prints it (``::ffff:10.1.2.3``), else None."""
    m = re.fullmatch(r"(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)", gid.strip().lower())
    return m.group(1) if m else None


__all__ = ["GidEntry", "RdmaMap", "mapped_ipv4", "read_map"]
