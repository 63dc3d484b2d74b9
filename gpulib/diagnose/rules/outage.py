"""Several nodes lost at the same moment: the infrastructure they share, not each node.

Why: one node that stops answering is that node's fault (its power supply, a kernel panic, a GPU
that took the PCIe bus down), and the node is what to look at. Two or more that stop within the
same minute, with nothing in their own kernel logs or BMCs that explains each, are not several
independent faults striking together: they share a rack PDU, a power feed or UPS, or the
top-of-rack switch through which slurmctld reaches them. Draining and RMA-ing each node would
treat the symptoms; the call goes to facilities (power) or the network team (the switch). So the
cause is ``power_fault`` (hard) with no single culprit host - the nodes are listed - and the lost
nodes are its symptoms. Only nodes whose loss has no node-local cause in the evidence count; one
node lost, or nodes lost hours apart, stay "node lost" on each host. A cluster whose every
partition is unreachable is :func:`gpulib.diagnose.rules.other._site_outage`'s, which this defers to.
"""

from __future__ import annotations

from gpulib.diagnose.context import Context
from gpulib.evidence import kinds
from gpulib.findings import Finding
from gpulib.parsers.logtime import seconds_between

#: Nodes lost within this many seconds of the first of them were lost together (Slurm marks a node
#: "Not responding" after SlurmdTimeout, per node, so one power cut spreads over tens of seconds).
TOGETHER_S = 120
#: The fewest nodes that make a shared cause.
MIN_NODES = 2


def run(ctx: Context) -> None:
    if any(f.id.startswith("site-outage") for f in ctx.findings):
        return
    lost = _lost(ctx)
    group = _together(lost)
    if len(group) < MIN_NODES:
        return
    hosts = sorted(group)
    first = min(group.values())
    losses = [f for f in ctx.findings if _is_loss(f) and set(_hosts(f)) & group.keys()]
    found = ctx.add("nodes-lost-together", severity="critical", category="power_fault", interruption="hard",
                    hardware=True, role="cause",
                    title=f"{len(hosts)} nodes were lost within {TOGETHER_S} s of each other ({', '.join(hosts[:8])}"
                          f"{', ...' if len(hosts) > 8 else ''}) with no fault of their own in the evidence: the power "
                          "or the switch they share, not one node",
                    time=first, quotes=[q for f in losses for q in f.quotes][:4],
                    actions=["Check what these nodes share: the rack PDU, the power feed or UPS (facilities), and the "
                             "top-of-rack switch they reach slurmctld through (the network team) - a switch outage "
                             "makes the same 'Not responding' without a power cut",
                             "Read one node's BMC event log (`ipmitool sel elist`) for AC lost / power off, and "
                             "`journalctl --list-boots` for a reboot at that time, when the nodes answer again",
                             "When power or the switch is back, run `gpulib run preflight` on each node before resuming "
                             "them; do not RMA the nodes one by one"])
    found.extra["hosts"] = hosts  # the verdict links a symptom that points at any of them to this cause
    for f in losses:
        f.role, f.interruption, f.caused_by = "symptom", None, found.id


def _is_loss(f: Finding) -> bool:
    return f.category == "node_lost" and f.role == "cause"


def _hosts(f: Finding) -> list[str]:
    return [f.host] if f.host else sorted(h for h in f.pointers.hosts if h)


def _lost(ctx: Context) -> dict[str, str]:
    """host -> the earliest time the node's own state says it was lost (not a job's report), for nodes
    with no node-local cause of their own (a kernel panic, an Xid, a PSU event, the OOM killer: any
    other cause on that host)."""
    explained = {f.host for f in ctx.findings if f.role == "cause" and f.host and not _is_loss(f)}
    job_logs = {fl.display for fl in ctx.inputs.of_kind(*kinds.JOB_LOGS)}
    out: dict[str, str] = {}
    for f in ctx.findings:
        # one node per finding, told by the node's own state (sinfo, boots, BMC): a job's NODE_FAIL names every
        # node of the job, and its console's "CANCELLED ... DUE TO NODE FAILURE" the node that ran the batch script
        if not _is_loss(f) or not f.time or not f.host or f.host in explained \
                or all(q.file in job_logs for q in f.quotes):
            continue
        if f.host not in out or f.time < out[f.host]:
            out[f.host] = f.time
    return out


def _together(lost: dict[str, str]) -> dict[str, str]:
    """The largest set of hosts lost within :data:`TOGETHER_S` of the first of them."""
    best: dict[str, str] = {}
    times = sorted(lost.items(), key=lambda kv: kv[1])
    for i, (_host, start) in enumerate(times):
        group = dict(kv for kv in times[i:] if seconds_between(start, kv[1]) <= TOGETHER_S)
        if len(group) > len(best):
            best = group
    return best


__all__ = ["MIN_NODES", "TOGETHER_S", "run"]
