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
"""

from __future__ import annotations

import re

from gpulib.diagnose.context import Context, quote
from gpulib.diagnose.rules.fabric import AUDIT_QUESTIONS
from gpulib.evidence import kinds

#: Interfaces whose addresses do not leave the machine: loopback, container and VM bridges, veths.
LOCAL_IFACE = re.compile(r"^(?:lo|docker\d*|br-[0-9a-f]+|virbr\d+|veth\w*|cni\d+|podman\d+|lxcbr\d+|lxdbr\d+)$")


def run(ctx: Context) -> None:
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
