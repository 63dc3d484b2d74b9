"""The InfiniBand / RoCE adapters (HCAs) the job's traffic went through, and whether a port is one.

A node has more HCAs than a job uses: a storage or management port, a spare, a rail the job was
told not to use. A port that is down on one of those did not interrupt the job, however loudly the
kernel or ``ibstat`` reports it. The evidence says which HCAs the job used in two places:

* the job's setting, ``NCCL_IB_HCA`` (``export NCCL_IB_HCA=mlx5_0,mlx5_1``, or NCCL's echo ``NCCL_IB_HCA
  set to mlx5_0:1,...``), read as NCCL reads it: a comma list of ``name[:port]``, each a prefix of
  the device name (``mlx5_1`` also selects ``mlx5_10``) unless the list starts with ``=`` (exact
  names), and a list that starts with ``^`` names the HCAs *not* to use;
* what NCCL opened on each node: ``NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ...``.

A node whose NCCL opened fewer HCAs than another node's, or fell back to sockets, felt a missing
port at start-up: a port down there since before the job is still on the job's path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.diagnose.context import Context
from gpulib.evidence import kinds
from gpulib.findings import Finding

#: The catalogue's reading of the job's ``NCCL_IB_HCA`` setting (its ``what`` field).
WANTED = "nccl-ib-wanted"
_USING = re.compile(r"NET/IB ?: ?Using (?P<list>(?:\[\d+\]\S+\s*)+)")
_DEVICE = re.compile(r"\[\d+\](?P<dev>[A-Za-z][\w-]*?)(?::\d+)?/")
_DEVICE_NAME = re.compile(r"[A-Za-z][\w-]*")
#: RDMA device names as the kernel, ``ibstat`` and NCCL print them.
HCA_NAME = re.compile(r"\b(?:mlx\d_\d+|bnxt_re\d+|irdma\d+|hfi1_\d+|qedr\d+|efa_\d+|erdma_\d+)\b")


@dataclass
class HcaPath:
    spec: str | None = None  # NCCL_IB_HCA as the job set it
    opened: dict[str | None, set[str]] = field(default_factory=dict)  # node -> HCAs NCCL opened there
    socket_hosts: set[str] = field(default_factory=set)  # nodes whose NCCL moved data over sockets

    def known(self) -> bool:
        return bool(self.spec or self.opened)

    def selects(self, hca: str) -> bool | None:
        """Whether ``NCCL_IB_HCA`` selects ``hca`` (None when the evidence shows no setting)."""
        if not self.spec:
            return None
        spec = self.spec.strip().strip("'\"")
        exclude, spec = spec.startswith("^"), spec.lstrip("^")
        exact, spec = spec.startswith("="), spec.lstrip("=")
        names = [entry.split(":")[0] for entry in spec.split(",") if entry]
        if not names or not all(_DEVICE_NAME.fullmatch(name) for name in names):
            return None  # not a list of device names (an unexpanded ``$HCAS``): it says nothing
        hit = any(hca == name if exact else hca.startswith(name) for name in names)
        return hit != exclude

    def on_path(self, hca: str | None, host: str | None) -> bool | None:
        """Whether the job's traffic could go through ``hca`` on ``host``: the setting when the job
        shows one, else what NCCL opened (on that node, or on any when that node printed nothing).
        None when unknown (no HCA named, or nothing says which the job used)."""
        if not hca:
            return None
        selected = self.selects(hca)
        if selected is not None:
            return selected
        opened = (self.opened.get(host) or set().union(*self.opened.values())) if self.opened else None
        return hca in opened if opened else None

    def short_on(self, host: str | None) -> bool:
        """Whether NCCL on ``host`` opened fewer HCAs than on another node, or fell back to sockets."""
        if host in self.socket_hosts:
            return True
        most = max((len(v) for v in self.opened.values()), default=0)
        return host in self.opened and len(self.opened[host]) < most


def hca_path(ctx: Context) -> HcaPath:
    """The job's HCAs as the evidence shows them (:class:`HcaPath`)."""
    path = HcaPath()
    for f in ctx.inputs.files:
        for s in f.signals:
            if s.signature == WANTED and s.fields.get("what") and path.spec is None:
                path.spec = s.fields["what"]
    for _file, ev in ctx.records(kinds.TRAINING_LOG):
        if ev.kind not in ("nccl_address", "nccl_transport") or not ev.host:
            continue
        host = ctx.ids.node_of(ev.host)
        m = _USING.search(ev.text)
        if m:
            path.opened.setdefault(host, set()).update(d["dev"] for d in _DEVICE.finditer(m["list"]))
        elif ev.kind == "nccl_transport" and ev.details.get("network") == "Socket":
            path.socket_hosts.add(host)
    return path


def hca_of(f: Finding) -> str | None:
    """The HCA a finding names: the port ``ibstat`` reported, else one its kernel or tool lines name.
    NCCL's own lines are left out: an HCA NCCL reports an error on is one it used."""
    port = f.extra.get("hca_port")
    if port:
        return str(port).split()[0]
    for text in (f.title, *(q.text for q in f.quotes)):
        if "NCCL" in (text or ""):
            continue
        m = HCA_NAME.search(text or "")
        if m:
            return m[0]
    return None
