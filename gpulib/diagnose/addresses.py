"""Which host an address belongs to, from what the evidence itself carries.

A network failure line names its peer by address (``Connect to 10.80.27.247<56821> failed``, ``Got
completion from peer 10.192.52.5<33092>``); the operator needs the node, to drain it or look at its
port. The evidence often says it elsewhere, and each of these is read:

* NCCL's own lines (``host:pid:tid [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>``): the identity
  map already joins them;
* a pasted reverse lookup: ``nslookup 10.0.0.5`` / ``host 10.0.0.5`` / ``dig -x 10.0.0.5`` and its
  answer (``5.0.0.10.in-addr.arpa  name = node-5.ib.example.`` or ``... domain name pointer ...``);
  the answer belongs to the address the command asked about;
* a forward lookup (``Name: node-5`` then ``Address: 10.0.0.5``);
* an ``/etc/hosts`` or ``getent hosts`` dump (a file whose lines are mostly ``<ip> <name> ...``).

A peer printed by name (``peer node-48<37948>``) is already the host. Names are shortened to their
first label (``node-5.ib.example`` -> ``node-5``): that is how schedulers and prompts name nodes.
Files are read only when an address needs a name, and only small ones (pasted sessions, dumps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.diagnose.joins import IdentityMap
from gpulib.evidence import kinds
from gpulib.evidence.gather import Inputs

#: Files larger than this are logs, not pasted lookups or host tables.
MAX_BYTES = 1 << 20
#: Kinds a tool wrote (a kernel log, a GPU snapshot): no one pastes a lookup into them. An incident of
#: 1,024 nodes has thousands; the pasted sessions and dumps worth reading are few.
MACHINE_KINDS = frozenset({kinds.KERNEL_LOG, kinds.NVIDIA_SMI_XML, kinds.NVIDIA_SMI_Q, kinds.NVIDIA_SMI_CSV,
                           kinds.NVIDIA_SMI_DMON, kinds.NVIDIA_SMI_NVLINK, kinds.NVIDIA_SMI_TOPO, kinds.NVIDIA_SMI_TABLE,
                           kinds.GPU_QUERY_TIME, kinds.IPMITOOL_SEL, kinds.IPMITOOL_SENSOR, kinds.IPMITOOL_SDR,
                           kinds.DCGMI_DIAG, kinds.DCGM_EXPORTER, kinds.NVML_SNAPSHOT, kinds.NVML_SAMPLES, kinds.IBSTAT,
                           kinds.WTMP, *kinds.FILESYSTEM_USAGE})
_IPV4 = r"\d{1,3}(?:\.\d{1,3}){3}"
_QUERY = re.compile(rf"(?:nslookup|host|dig\s+-x|getent\s+hosts)\s+(?P<ip>{_IPV4})\b")
_REVERSE = re.compile(rf"(?P<rev>{_IPV4})\.in-addr\.arpa\.?\s+(?:name\s*=|domain name pointer)\s*(?P<name>[A-Za-z][\w.-]*)")
_FORWARD = re.compile(rf"^\s*Name:\s*(?P<name>[A-Za-z][\w.-]*)\s*\n\s*Address(?:es)?:\s*(?P<ip>{_IPV4})\b", re.M)
_HOSTS_LINE = re.compile(rf"^\s*(?P<ip>{_IPV4})\s+(?P<name>[A-Za-z][\w.-]*)(?:\s+[\w.-]+)*\s*$")
_ADDRESS = re.compile(rf"^{_IPV4}$")


def short(name: str) -> str:
    """``node-5.ib.example.`` -> ``node-5`` (an address stays whole)."""
    name = name.rstrip(".")
    return name if _ADDRESS.match(name) else name.split(".")[0]


@dataclass(frozen=True)
class Named:
    """A host found for an address, and where the evidence said so (for the report)."""

    host: str
    source: str


class AddressBook:
    def __init__(self, inputs: Inputs, ids: IdentityMap) -> None:
        self._inputs = inputs
        self._ids = ids
        self._names: dict[str, Named] | None = None

    def name_of(self, peer: str | None) -> Named | None:
        """The host behind ``peer`` (an address, ``addr<port>`` or a host name), or None."""
        if not peer:
            return None
        addr = peer.split("<")[0].strip("[]")
        if addr.startswith("::ffff:"):
            addr = addr[len("::ffff:"):]
        if not _ADDRESS.match(addr):
            return Named(short(addr), "the peer's name as printed") if re.match(r"^[A-Za-z][\w.-]*$", addr) else None
        host = self._ids.host_of_addr(addr)
        if host:
            return Named(host, f"NCCL's bootstrap line of {host} ({addr})")
        return self._read().get(addr)

    def _read(self) -> dict[str, Named]:
        if self._names is None:
            self._names = {}
            for f in self._inputs.files:
                if f.kind in MACHINE_KINDS:
                    continue
                text = f.text(MAX_BYTES)
                if text is None:
                    continue
                for addr, named in _lookups(text, f.display).items():
                    self._names.setdefault(addr, named)
        return self._names


def _lookups(text: str, display: str) -> dict[str, Named]:
    found: dict[str, Named] = {}
    lines = text.splitlines()
    asked = None
    for no, line in enumerate(lines, 1):
        q = _QUERY.search(line)
        if q:
            asked = q["ip"]
        m = _REVERSE.search(line)
        if m:
            addr = asked or ".".join(reversed(m["rev"].split(".")))
            found.setdefault(addr, Named(short(m["name"]), f"{display}:{no} (reverse lookup of {addr})"))
            asked = None
    for m in _FORWARD.finditer(text):
        no = text.count("\n", 0, m.start()) + 1
        found.setdefault(m["ip"], Named(short(m["name"]), f"{display}:{no} (lookup of {m['name']})"))
    rows = [(no, m) for no, line in enumerate(lines, 1) if (m := _HOSTS_LINE.match(line))]
    content = [x for x in lines if x.strip() and not x.lstrip().startswith("#")]
    if len(rows) >= 2 and len(rows) * 2 >= len(content):  # a host table, not a log line that starts with an address
        for no, m in rows:
            found.setdefault(m["ip"], Named(short(m["name"]), f"{display}:{no} (host table)"))
    return found


def blamed_end(pairs: list[tuple[str | None, str | None]]) -> str | None:
    """The host at one end of every failing connection, given (reporting host, peer host) pairs.

    A broken link or port drops every connection through it, so every rank that used it reports an
    error, and both ends of each connection do: the node on the far side of ``gn-02 -> gn-03`` and
    ``gn-04 -> gn-03`` reports ``gn-03 -> gn-04`` and ``gn-03 -> gn-02`` as well. The errors read one
    at a time blame everyone; the one end common to all of them is the suspect. A pair whose
    reporter is unknown (a rank's "Last error" with no node) counts by its peer alone; a single
    connection reported from one end names its peer, as that line does; reported from both ends it
    names neither. None when no one host is in every pair."""
    named = [pair for pair in pairs if pair[1]]
    if not named:
        return None
    if len(set(named)) == 1:
        return named[0][1]  # one connection, reported from one end: the peer it names
    common = set.intersection(*({h for h in pair if h} for pair in named))
    return common.pop() if len(common) == 1 else None

