"""NCCL bound to an interface that does not leave the node, on a job that spans nodes.

NCCL picks its bootstrap and socket interface itself and says which in INFO lines::

    node-x:4242:4242 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>
    node-x:4242:4300 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>

When NCCL_SOCKET_IFNAME is unset it may take a loopback (``lo``), a container bridge (``docker0``,
``br-*``, ``cni0``, ``podman0``), a libvirt bridge (``virbr0``) or a veth: addresses that exist only
inside one machine (every Docker host has 172.17.0.1). On one node that works; across nodes each
rank advertises an address its peers cannot reach, and the job hangs in ``init_process_group`` with
no error line at all, until a timeout or a person kills it. So: bootstrap lines from two or more
nodes naming such an interface, and no communicator that finished its set-up (``Init COMPLETE``)
nor any training step, is a network set-up fault: *soft*, fixed with ``NCCL_SOCKET_IFNAME``.

The other way round: ``NCCL_SOCKET_IFNAME`` names an interface some node does not have (two hosts
whose Ethernet ports are ``enp4s0`` and ``enp6s0``). That node's rank fails its bootstrap at once
(``NET/Socket : no interface found``, ``Bootstrap : no socket interface found``; the catalogue's
``socket-config`` row reads it, on the host of its NCCL prefix) and the others see an ``internal
error``. When the evidence lists the nodes' interfaces (``ip -br addr``, ``ip -o link`` per host)
and the setting (a command line, ``env``, NCCL's ``set by environment to``), the finding says which
node lacks the named interface, and what it has instead.
"""

from __future__ import annotations

import re

from gpulib.diagnose.context import Context, quote
from gpulib.diagnose.rules.fabric import AUDIT_QUESTIONS
from gpulib.evidence import kinds
from gpulib.findings import Finding
from gpulib.parsers.signatures import printers_of

#: Interfaces whose addresses do not leave the machine: loopback, container and VM bridges, veths.
LOCAL_IFACE = re.compile(r"^(?:lo|docker\d*|br-[0-9a-f]+|virbr\d+|veth\w*|cni\d+|podman\d+|lxcbr\d+|lxdbr\d+)$")
#: The catalogue's rows: NCCL found no usable socket interface; what NCCL_SOCKET_IFNAME was set to.
SOCKET_FAILURE = "sig-socket-config"
IFNAME_SETTING = "nccl-socket-ifname"


def run(ctx: Context) -> None:
    _local_interfaces(ctx)
    for f in ctx.findings:
        if f.id.startswith(SOCKET_FAILURE) and f.role == "cause":
            _missing_interface(ctx, f)


def _selects(ifname: str, interface: str) -> bool:
    """Whether NCCL_SOCKET_IFNAME selects ``interface``: a comma list of name prefixes, or exact
    names after a leading ``=``."""
    exact = ifname.startswith("=")
    names = [n for n in ifname.lstrip("=").split(",") if n]
    return any(interface == n if exact else interface.startswith(n) for n in names)


def _missing_interface(ctx: Context, f: Finding) -> None:
    """Say which node has no interface NCCL_SOCKET_IFNAME selects (an exclusion list, ``^lo``, says
    what not to use, so it names no missing interface)."""
    settings = [(file, s) for file in ctx.inputs.files for s in file.signals if s.signature == IFNAME_SETTING]
    values = {s.fields["ifname"] for _file, s in settings}
    if len(values) != 1 or next(iter(values)).startswith("^"):
        return
    ifname = values.pop()
    per_host: dict[str, list[str]] = {}
    for file, iface in ctx.records(kinds.IP_LINK):
        if file.host and iface.up and not iface.is_loopback:
            per_host.setdefault(file.host, []).append(iface.name)
    lacking = sorted(h for h, names in per_host.items() if not any(_selects(ifname, n) for n in names))
    if not lacking:
        return
    printers = {h for _file, s in settings for _r, _p, h in printers_of(s) if h}
    host = f.host if f.host in lacking else lacking[0] if len(lacking) == 1 else None
    if host is None:
        return
    having = sorted(set(per_host) - set(lacking))
    f.host = host
    f.title += (f": NCCL_SOCKET_IFNAME={ifname} names no interface of {host} (it has "
                f"{', '.join(sorted(per_host[host]))})" + (f"; {', '.join(having)} has it" if having else ""))
    file, s = settings[0]
    f.quotes.append(quote(file, s.line, s.text))
    f.extra["missing_interface"] = {"host": host, "ifname": ifname, "set_on": sorted(printers)}
    f.actions.insert(0, f"Give NCCL_SOCKET_IFNAME a name every node has: list each node's ({ifname},"
                        f"{','.join(sorted(per_host[host]))}) or a common prefix, or rename the interface on {host}, "
                        "then relaunch")


def _local_interfaces(ctx: Context) -> None:
    events = ctx.records(*kinds.JOB_LOGS)
    local = [(fl, e) for fl, e in events if e.kind == "nccl_address" and e.host
             and LOCAL_IFACE.match(e.details.get("iface") or "")]
    hosts = sorted({e.host for _fl, e in local})
    if len(hosts) < 2:  # one node talks to itself over any interface
        return
    if any(e.kind == "step" or e.kind == "nccl_init" and e.details.get("phase") == "Init COMPLETE" for _fl, e in events):
        return  # the communicators came up: the interface carried the traffic
    ifaces = sorted({e.details["iface"] for _fl, e in local})
    addrs = sorted({e.details.get("addr") for _fl, e in local if e.details.get("addr")})
    shown = [next((fl, e) for fl, e in local if e.host == h) for h in hosts[:4]]
    same = len(addrs) == 1
    f = ctx.add("nccl-local-iface", severity="error", category="network_fabric", interruption="soft", role="cause",
                title=f"NCCL bootstraps over {', '.join(ifaces)} on {len(hosts)} nodes ({', '.join(hosts[:4])}"
                      + (", ..." if len(hosts) > 4 else "") + "), an interface that does not leave the node"
                      + (f" (every node advertises {addrs[0]})" if same else "")
                      + "; no communicator finished its set-up",
                time=shown[0][1].time_utc, time_approx=True,
                quotes=[quote(fl, e.line, e.text) for fl, e in shown],
                actions=["Set NCCL_SOCKET_IFNAME to the interface the nodes reach each other on (e.g. "
                         "NCCL_SOCKET_IFNAME=eth0, or exclude the local ones: NCCL_SOCKET_IFNAME=^docker0,lo) and "
                         "GLOO_SOCKET_IFNAME alike, then relaunch; `ip -o -4 addr` on each node shows the right one",
                         *AUDIT_QUESTIONS[:1]])
    f.hardware = False


__all__ = ["LOCAL_IFACE", "run"]
