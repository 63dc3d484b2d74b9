"""Rules over the remaining evidence kinds: slurm ``sinfo -R``, ``dcgmi diag``, flight-recorder
dumps, ``ibstat`` port states and ``fuser`` (who still holds /dev/nvidiaN)."""

from __future__ import annotations

import re
from collections import defaultdict

from gpulib.diagnose.context import Context, place, quote
from gpulib.diagnose.drift import WHY, config_drift
from gpulib.diagnose.hca_path import hca_path
from gpulib.evidence import kinds
from gpulib.findings import LAST_RESORT_TIER, Pointers, Quote
from gpulib.parsers.slurm import NodeReason, PartitionState

#: The software stack that must be the same on every node of a job.
VERSION_FIELDS = ("driver", "cuda", "nccl", "torch")
#: Job errors a software-stack mismatch produces: NCCL refusing or losing a peer, a driver too old.
STACK_ERROR_KINDS = frozenset({"nccl_error", "nccl_error_class", "nccl_warn", "socket_error", "ib_completion_error",
                               "driver_too_old"})

_DIAG_CATEGORY = (("memory", "gpu_memory_error"), ("pcie", "gpu_fell_off_bus"), ("nvlink", "nvlink_error"),
                  ("thermal", "thermal_throttling"), ("power", "power_fault"), ("inforom", "gpu_firmware_error"))


def run(ctx: Context) -> None:
    _sinfo(ctx)
    _dcgmi(ctx)
    _flight_recorder(ctx)
    ib_ports(ctx)
    _fuser(ctx)
    _ipmi(ctx)
    _reboots(ctx)
    _version_skew(ctx)


def _job_window(ctx: Context) -> tuple[str | None, str | None]:
    times = [t for _, e in ctx.records(kinds.TRAINING_LOG) for t in (e.time_utc, e.time_last) if t]  # last: of folded lines
    return (min(times), max(times)) if times else (None, None)


def _ipmi(ctx: Context) -> None:
    for file, rec in ctx.records(kinds.IPMITOOL_SDR):
        if getattr(rec, "psu_failed", False):
            ctx.add("psu", severity="critical", category="power_fault", interruption="hard", hardware=True,
                    title=f"Power supply {rec.name} on {file.host}: {rec.event or rec.status}", host=file.host,
                    quotes=[quote(file, rec.line, f"{rec.name} | {rec.reading or ''} | {rec.status} "
                                                       f"{rec.event or ''}")],
                    actions=["Replace/reconnect the PSU or its AC feed; a node on one PSU browns out under full "
                             "GPU load (GPUs drop off the bus, power-brake slowdown)"])


def _reboots(ctx: Context) -> None:
    """A node that rebooted while the job ran was lost (power, panic, watchdog reset)."""
    start, end = _job_window(ctx)
    if not start:
        return
    by_host: dict[str | None, list] = defaultdict(list)
    for file, ev in ctx.records(kinds.KERNEL_LOG):
        by_host[ev.host or file.host].append((file, ev))
    for host, events in by_host.items():
        events.sort(key=lambda fe: (fe[0].display, fe[1].line))
        for i, (file, ev) in enumerate(events):
            if ev.kind != "boot" or i == 0:
                continue
            before = next((e for _, e in reversed(events[:i]) if e.time_utc and e.kind != "boot"), None)
            after = next((e for _, e in events[i:] if e.time_utc), None)
            when = before.time_utc if before else after.time_utc if after else None
            if when and start <= when <= end and not any(f.id.startswith("node-lost") and f.host == host
                                                          for f in ctx.findings):
                what = (f"last kernel message before the reboot at {when}" if before
                        else f"back up at {when}; it died before that")
                ctx.add("node-lost", severity="critical", category="node_lost", interruption="hard", hardware=True,
                        title=f"{host} rebooted during the job ({what})", time_approx=before is None,
                        host=host, time=when, quotes=[quote(file, ev.line, ev.text)],
                        actions=["Check the BMC event log (`ipmitool sel list`) for power loss / watchdog reset, "
                                 "and the previous boot's journal (`journalctl -k -b -1`) for a panic"])


def _version_skew(ctx: Context) -> None:
    """Driver / CUDA / NCCL / torch versions that differ across the nodes (facts and majority vote
    from :mod:`gpulib.fleet`). A skew is context - fix it before the relaunch - unless

    * the job's stack errors (NCCL init/connection errors, driver too old) all involve an odd node
      (on it, or with it as the peer) or, for NCCL, say that two ranks disagree on the wire format
      (:data:`PROTOCOL_DISAGREEMENT`): then the mismatch is what broke the job, a soft cause; or
    * it is NCCL's version, the job hung in its collectives (watchdog timeouts) and it printed no
      stack error at all: ranks on different NCCL releases do not speak the same protocol and wait
      on each other for ever. Operators (and NCCL's own developers, asked about such a hang) check
      the versions first. It is the cause of last resort (:data:`LAST_RESORT_TIER`): any other cause
      the evidence shows - a dead GPU, a stalled file system, even a bare exception - explains the
      hang better."""
    configs = ctx.configs()
    errors = [(fl, e, hosts) for fl, e, hosts in _stack_errors(ctx) if hosts]
    hang = _first_hang(ctx) if not errors else None
    for d in config_drift(configs, VERSION_FIELDS):
        odd = set(d.odd)
        explains = bool(errors) and all(hosts & odd or _disagreement(d.field, e) for _, e, hosts in errors)
        first = min(errors, key=lambda t: t[1].time_utc or "~") if explains else None
        hung = hang if d.field in HANG_FIELDS else None
        if explains:
            _skew_finding(ctx, d, configs, first, "and the job's errors involve only the odd node(s)")
        elif hung:
            # the timeout line dates the hang but is not cited: its rank is a waiting peer, not the odd node
            f = _skew_finding(ctx, d, configs, hung, "and the job hung in its collectives with no other cause",
                              cite=False)
            f.tier = LAST_RESORT_TIER
        else:
            _skew_finding(ctx, d, configs, None, None)


#: NCCL errors that say two ranks disagree on the wire format (a message of another size, an address
#: it cannot decode, a call it calls invalid). Both ends of a pair on different releases print them,
#: so with an NCCL skew they are the skew's wherever they appear, even on a majority node whose odd
#: peer the line does not name (NCCL's developers read "message truncated" as "a version or
#: configuration mismatch between two ranks" first).
PROTOCOL_DISAGREEMENT = re.compile(r"(?i)message truncated|collective mismatch error|neither AF_INET|invalid usage")


def _disagreement(field: str, event) -> bool:
    return field == "nccl" and bool(PROTOCOL_DISAGREEMENT.search(event.text or ""))


#: Fields whose skew alone can hang a job's collectives (mixed NCCL releases do not interoperate).
HANG_FIELDS = ("nccl",)


def _first_hang(ctx: Context) -> tuple | None:
    """(file, event) of the job's first NCCL watchdog timeout, or None."""
    hangs = [(fl, e) for fl, e in ctx.records(kinds.TRAINING_LOG) if e.kind == "watchdog_timeout"]
    return min(hangs, key=lambda t: t[1].time_utc or "~") if hangs else None


def _skew_finding(ctx: Context, d, configs: dict, first: tuple | None, why: str | None, cite: bool = True):
    """One version-skew finding: a soft cause when ``why`` says what it explains (``first``: the
    job's line it explains, first in time; ``cite``: whether that line is quoted), else context
    for the relaunch."""
    values = "; ".join(f"{h}: {getattr(c, d.field)}" for h, c in configs.items() if getattr(c, d.field) is not None)
    odd = set(d.odd)
    return ctx.add(f"version-skew-{d.field}", severity="error" if why else "warning", category="driver_mismatch",
                   role="cause" if why else "context", interruption="soft" if why else None,
                   title=f"{d.label} versions differ across nodes" + (f", {why}" if why else "") + f": {values[:400]}",
                   host=next(iter(odd)) if len(odd) == 1 else None, time=first[1].time_utc if first else None,
                   quotes=[Quote(configs[h].sources.get(d.field, "?"), None, f"{h}: {d.label} {v}")
                             for h, v in sorted(d.odd.items())[:8]]
                   + ([quote(first[0], first[1].line, first[1].text)] if first and cite else []),
                   actions=[f"Install one {d.label} on every node of the job"
                            + (f" (the majority runs {d.majority})" if d.majority is not None else "")
                            + f": {WHY[d.field]}"])


def _stack_errors(ctx: Context) -> list[tuple]:
    """(file, event, hosts it involves) of every job error that a software-stack mismatch produces:
    NCCL errors/WARNs, socket and IB connection errors (with the peer's host), driver too old."""
    out = []
    many = _multi_host_files(ctx)
    for fl, e in ctx.records(kinds.TRAINING_LOG):
        if e.kind not in STACK_ERROR_KINDS:
            continue
        hosts = {e.host or (None if fl.display in many else fl.host)} - {None}
        peer = ctx.ids.host_of_addr(e.details.get("peer") or e.details.get("addr"))
        if peer:
            hosts.add(peer)
        out.append((fl, e, hosts))
    return out


def _multi_host_files(ctx: Context) -> set[str]:
    """Job logs whose lines name two or more hosts (NCCL ``host:pid:tid`` prefixes, pdsh, pasted
    sessions of several nodes one after the other). The file's own host is then only a guess, so
    an error line that names no host of its own is not pinned on it: a version skew must not be
    judged "explained" or "unexplained" by the node a concatenated paste happened to be filed under."""
    hosts: dict[str, set[str]] = {}
    for fl, e in ctx.records(kinds.TRAINING_LOG):
        if e.host:
            hosts.setdefault(fl.display, set()).add(e.host)
    return {name for name, seen in hosts.items() if len(seen) > 1}


#: Unreachable nodes (``down*``) in a sinfo table that make an outage site-wide rather than a node's:
#: at least this many, and at least this share of every node the table lists.
SITE_WIDE_NODES = 4
SITE_WIDE_SHARE = 0.9


def _sinfo(ctx: Context) -> None:
    _site_outage(ctx)
    for file, rec in ctx.records(kinds.SLURM_SINFO):
        if not isinstance(rec, NodeReason):
            continue
        reason = rec.reason.lower()
        if "not responding" in reason or "no_respond" in reason or "unexpectedly rebooted" in reason:
            for node in rec.nodes:
                ctx.add("node-lost", severity="critical", category="node_lost", interruption="hard", hardware=True,
                        title=f"Slurm: {node} {rec.reason}", host=node, time=rec.time_utc,
                        quotes=[quote(file, rec.line, f"{rec.reason} ({rec.user}) {node}")],
                        actions=["Check power/BMC of the node (`ipmitool sel list`) and its console log"])
        else:
            ctx.add("slurm-drain", severity="warning", category="application_error", role="symptom",
                    title=f"Slurm drained {', '.join(rec.nodes)}: {rec.reason}", time=rec.time_utc,
                    host=rec.nodes[0] if len(rec.nodes) == 1 else None,
                    quotes=[quote(file, rec.line, f"{rec.reason} ({rec.user}) {','.join(rec.nodes)}")],
                    pointers=Pointers(hosts=set(rec.nodes)) if "kill task failed" in reason else Pointers(),
                    actions=["'Kill task failed' = a process stuck in the GPU driver: reboot the node before "
                             "resuming it (`scontrol update nodename=... state=resume`)"])


def _site_outage(ctx: Context) -> None:
    """Every node of the cluster unreachable at once (``sinfo``: all partitions ``down*``).

    One node that stops answering is that node's fault (power supply, kernel panic, a GPU that
    took the PCIe bus down). All of them at the same moment is not: no per-node fault strikes
    36 machines together, but a lost power feed, a tripped PDU or UPS, or the management network
    going away does. The head node that still answers is the tell. The engineer's first call is
    to facilities/the network team, not an RMA."""
    for file in ctx.inputs.of_kind(kinds.SLURM_SINFO):
        rows = [r for r in file.records if isinstance(r, PartitionState)]
        every = {n for r in rows for n in r.nodes}
        gone = {n for r in rows if r.unreachable and r.state in ("down", "idle", "alloc", "mix", "drain", "drng",
                                                                  "comp", "unk", "fail")
                for n in r.nodes}
        if len(gone) < SITE_WIDE_NODES or len(gone) < SITE_WIDE_SHARE * len(every):
            continue
        ctx.add("site-outage", severity="critical", category="power_fault", interruption="hard", hardware=True,
                title=f"Slurm cannot reach {len(gone)} of {len(every)} nodes at once (every partition "
                      f"unreachable): a site power or network outage, not one node's fault",
                quotes=[quote(file, r.line, f"{r.partition} {r.available} {r.node_count} {r.state}* "
                                                  f"{','.join(r.nodes[:3])}{'...' if len(r.nodes) > 3 else ''}")
                          for r in rows if r.unreachable][:4],
                actions=["Check the facility: power feeds, PDUs/UPS and the management network of the racks; "
                         "read one node's BMC event log (`ipmitool sel elist`) for AC lost / power off when it "
                         "answers again",
                         "When power returns, run `gpulib run preflight` on every node before resuming them"],
                )


def _dcgmi(ctx: Context) -> None:
    for file, rec in ctx.records(kinds.DCGMI_DIAG):
        if rec.verdict != "fail":
            continue
        category = next((c for k, c in _DIAG_CATEGORY if k in rec.test.lower()), "gpu_memory_error")
        if NVLINK_ONLY.search(rec.message or "") and not NON_NVLINK_REASON.search(rec.message or ""):
            # DCGM's PCIe test also checks NVLink state: on a PCIe card without a bridge every link is
            # "down" by design. Only a node whose GPUs should have NVLink (compare nvidia-smi topo) cares.
            ctx.add("dcgm-diag-nvlink", severity="warning", category="nvlink_error", role="context", host=file.host,
                    title=f"dcgmi diag: {rec.test} reports NVLink links down (expected on GPUs without NVLink)",
                    quotes=[quote(file, rec.line, f"{rec.test}: Fail {rec.message}")],
                    actions=["If these GPUs should have NVLink (SXM, bridged), check `nvidia-smi nvlink -s`; "
                             "on PCIe cards without a bridge this failure is expected"])
            continue
        for gpu in rec.gpus or [None]:
            f = ctx.add("dcgm-diag", severity="critical", category=category, interruption="hard", hardware=True,
                        title=f"dcgmi diag: {rec.test} FAILED" + (f" on GPU {gpu}" if gpu is not None else "")
                              + (f" on {file.host}" if file.host else ""),
                        host=file.host, gpu_index=gpu, quotes=[quote(file, rec.line, f"{rec.test}: Fail "
                                                                                          f"{rec.message}")],
                        actions=["Drain the node; attach the dcgmi diag output to the RMA request"])
            if gpu is not None:
                f.gpu_pci = ctx.ids.pci_at(file.host, gpu)
                place(ctx, f, host=file.host, pci=f.gpu_pci)


#: A dcgmi diag failure whose only reason is an NVLink link being down.
NVLINK_ONLY = re.compile(r"(?i)nvlink link \d+ is currently down")
NON_NVLINK_REASON = re.compile(r"(?i)replay|bandwidth|error count|crc|pcie.*(?:gen|width)|timeout|uncorrect")


def _flight_recorder(ctx: Context) -> None:
    dumps = [(file, rec) for file, rec in ctx.records(kinds.FLIGHT_RECORDER) if rec.rank is not None]
    if len(dumps) < 2:
        return
    completed: dict[str, dict[int, int]] = defaultdict(dict)
    for _file, rec in dumps:
        for pg, status in rec.pg_status.items():
            if status.get("last_completed_collective") is not None:
                completed[pg][rec.rank] = status["last_completed_collective"]
    ranks_with_dump = {rec.rank for _, rec in dumps}
    world = ctx.ids.world_size or max(ranks_with_dump) + 1
    missing = set(range(world)) - ranks_with_dump
    for pg, per_rank in completed.items():
        if len(set(per_rank.values())) < 2 and not missing:
            continue
        low = min(per_rank.values())
        behind = {r for r, c in per_rank.items() if c == low and low < max(per_rank.values())}
        file = dumps[0][0]
        ctx.add("flight-recorder", severity="error", category="application_error", role="symptom",
                title=f"Flight recorder (PG {pg}): rank(s) {sorted(behind | missing)} behind - last completed "
                      f"collective {low} vs {max(per_rank.values())}"
                      + (f"; no dump from rank(s) {sorted(missing)}" if missing else ""),
                quotes=[quote(file, None, f"last completed per rank: {dict(sorted(per_rank.items()))}")],
                pointers=Pointers(ranks=behind | missing))


def ib_ports(ctx: Context) -> None:
    """An InfiniBand port that is not Active/LinkUp: the node's link to the fabric (read per node).
    A RoCE port (link layer Ethernet) counts when the job's NCCL used it (:mod:`gpulib.diagnose.hca_path`):
    the same adapters also carry plain Ethernet, where a down port is no concern of the job's. A port
    on an HCA the job does not use is said, as context: it did not interrupt the job."""
    path = hca_path(ctx)
    for file, rec in ctx.records(kinds.IBSTAT):
        state = str(getattr(rec, "state", "") or "").lower()
        link = str(getattr(rec, "link_layer", "") or "InfiniBand")
        if "down" not in state and "init" not in state and "polling" not in str(getattr(rec, "physical_state", "")).lower():
            continue
        ca = getattr(rec, "ca", None) or getattr(rec, "device", None) or "HCA"
        used = path.on_path(ca, ctx.ids.node_of(file.host))
        if link.lower() != "infiniband" and not used:
            continue
        port = getattr(rec, "port", None)
        unused = "" if used is not False else "; not an HCA the job's NCCL uses" + (
            f" (NCCL_IB_HCA={path.spec})" if path.spec else "")
        ctx.add("ib-port", severity="warning" if unused else "critical", category="network_fabric",
                interruption=None if unused else "soft", role="context" if unused else "cause", hardware=True,
                title=f"{file.host or 'host'}: {ca} port {port} is {getattr(rec, 'state', '?')} "
                      f"({getattr(rec, 'physical_state', '?')}){unused}", host=file.host,
                quotes=[quote(file, getattr(rec, "line", None), f"{ca} port {port}: State "
                                                                    f"{getattr(rec, 'state', '?')}, Physical state "
                                                                    f"{getattr(rec, 'physical_state', '?')}")],
                actions=["Reseat/replace the cable or transceiver; the port must be Active/LinkUp before relaunch"],
                extra={"hca_port": f"{ca} port {port}"})  # the headline names the port to reseat


def _fuser(ctx: Context) -> None:
    for file, rec in ctx.records(kinds.FUSER):
        pid = getattr(rec, "pid", None)
        device = str(getattr(rec, "device", "") or getattr(rec, "path", ""))
        if pid is None or not device.rstrip("0123456789").endswith("nvidia"):
            continue
        f = ctx.add("gpu-held", severity="warning", category="application_error", role="context",
                    title=f"pid {pid} ({getattr(rec, 'command', '?')}) still holds {device} on {file.host}",
                    host=file.host, quotes=[quote(file, getattr(rec, "line", None), f"{device}: {pid}")],
                    actions=[f"Kill pid {pid} before relaunch; if it is in D state (stuck in the driver), reboot"])
        place(ctx, f, host=file.host, pid=pid)
        f.extra["pids"] = [int(pid)]  # the remediation's kill list
