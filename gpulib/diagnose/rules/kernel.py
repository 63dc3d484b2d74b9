"""Kernel-side rules: Xid (via the catalog), fallen off the bus, AER, OOM killer, hung tasks,
IB link loss, NVSwitch SXid, PCIe downgrades, segfaults in libnccl, panics.

The kernel sees a GPU die before the job does, so these findings are the usual root causes.
Repeated lines of one event (eight Xid 94 lines, the AER detail lines) become one finding; an
Xid that the driver says was "caused by previous Xid N", or that follows a harder Xid on the
same GPU within a minute (48 -> 63 -> 94), is chained to it with ``caused_by``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpulib.catalog import xid_info
from gpulib.diagnose.context import Context, place, quote
from gpulib.evidence import kinds
from gpulib.findings import Finding, Pointers
from gpulib.parsers import prom_text
from gpulib.parsers.line_identity import names_a_port
from gpulib.parsers.logtime import seconds_between

BURST_S = 60  # lines of one event arrive within this many seconds
#: A link that goes down (NVLink5 Xid 144-150 "Fatal") is echoed by "Nonfatal" errors of the GPUs whose
#: traffic crossed it, on every node of the NVLink domain, within a few seconds.
LINK_ECHO_S = 5

_LINK_KINDS = ("ib_link_down", "ib_module_error")
_SEVERITY = {"hard": "critical", "soft": "error", "info": "info"}


def _near(a: str | None, b: str | None, limit: float = BURST_S) -> bool:
    return bool(a and b) and abs(seconds_between(a, b)) <= limit


def _same_burst(f: Finding, host: str | None, pci: str | None, time: str | None) -> bool:
    return f.host == host and f.gpu_pci == pci and (_near(f.time, time) or f.time == time)


def _dcgm_xids(ctx: Context) -> list[tuple]:
    """Xid events from dcgm-exporter's Xid gauge (Prometheus history), placed on a PCI id through
    the GPU's UUID or DCGM index when the exporter did not label one."""
    out = []
    for file, ev in prom_text.xid_events(ctx.records(kinds.DCGM_EXPORTER)):
        ev.host = ev.host or file.host
        uuid, index = ev.details.get("uuid"), ev.details.get("gpu")
        place = ctx.ids.place_of_uuid(uuid) if ev.pci_bus_id is None else None
        if place is not None:
            ev.pci_bus_id = place[1]
        if ev.pci_bus_id is None and index is not None:
            ev.pci_bus_id = ctx.ids.pci_at(ev.host, index)
        out.append((file, ev))
    return out


@dataclass
class _Scan:
    """One pass over a context's kernel events, in time order: what the handlers share."""

    ctx: Context
    events: list[tuple]
    by_gpu: dict[tuple, list[Finding]] = field(default_factory=dict)  # Xid findings per (host, PCI id)
    nvlink: list[tuple[Finding, str | None]] = field(default_factory=list)  # NVLink5 Xids and their severity


#: A handler reads one kernel event (``file``, ``ev``, the event's ``host``) into findings.
Handler = Callable[[_Scan, object, object, str | None], None]


def run(ctx: Context) -> None:
    """Every kernel event (the kernel logs and dcgm-exporter's Xid gauge) through its kind's handler
    (:data:`HANDLERS`); kinds without one are read by other rules or are only context."""
    events = sorted(ctx.records(kinds.KERNEL_LOG) + _dcgm_xids(ctx), key=lambda fr: (fr[1].time_utc or "", fr[1].line))
    scan = _Scan(ctx, events)
    for file, ev in events:
        handler = HANDLERS.get(ev.kind)
        if handler is not None:
            handler(scan, file, ev, ev.host or file.host)
    _link_down_echo(ctx, scan.nvlink)


def _on_xid(scan: _Scan, file, ev, host: str | None) -> None:
    f = _xid(scan.ctx, file, ev, host, scan.by_gpu)
    if ev.details.get("nvlink_unit"):
        scan.nvlink.append((f, ev.details.get("severity")))


def _on_fell_off(scan: _Scan, file, ev, host: str | None) -> None:
    _fell_off(scan.ctx, file, ev, host, scan.by_gpu)


def _on_aer(scan: _Scan, file, ev, host: str | None) -> None:
    _aer(scan.ctx, file, ev, host)


def _on_ib_link(scan: _Scan, file, ev, host: str | None) -> None:
    _ib_link(scan.ctx, file, ev, host)


def _on_oom_kill(scan: _Scan, file, ev, host: str | None) -> None:
    ctx = scan.ctx
    dump = [quote(fl, e.line, e.text) for fl, e in scan.events
            if e.kind in ("oom_invoked", "oom_constraint") and (e.host or fl.host) == host
            and _near(e.time_utc, ev.time_utc, 5)]
    f = ctx.add("host-oom", severity="critical", category="host_oom", interruption="soft", hardware=True,
                title=f"Kernel OOM killer killed pid {ev.pid} ({ev.process}) on {host}",
                host=host, time=ev.time_utc, quotes=[quote(file, ev.line, ev.text), *dump],
                actions=["Host RAM ran out: lower DataLoader num_workers / prefetch, avoid copying the "
                         "dataset into each worker (copy-on-write growth), or request more memory",
                         "Check `free -g` and swap; set a memory limit per job (cgroup) so one job cannot "
                         "starve the node"])
    place(ctx, f, host=host, pid=ev.pid)


def _on_memory_pressure(scan: _Scan, file, ev, host: str | None) -> None:
    scan.ctx.add("memory-pressure", severity="warning", category="host_oom", role="context",
                 title=f"Host memory pressure on {host}: {ev.text.split(': ', 1)[-1][:90]}", host=host,
                 time=ev.time_utc, quotes=[quote(file, ev.line, ev.text)])


def _on_hung_task(scan: _Scan, file, ev, host: str | None) -> None:
    ctx = scan.ctx
    again = next((f for f in ctx.findings if f.id.startswith("hung-task-") and f.host == host
                  and f"{ev.process}:{ev.pid} " in f.title), None)
    if again:
        again.quotes.append(quote(file, ev.line, ev.text))
        return
    f = ctx.add("hung-task", severity="error", category="application_error", role="symptom",
                title=f"Process {ev.process}:{ev.pid} stuck in D state on {host}"
                      + (" inside the NVIDIA driver" if ev.details.get("in_nvidia_driver") else ""),
                host=host, time=ev.time_utc, quotes=[quote(file, ev.line, ev.text)],
                pointers=Pointers(hosts={host} if host else set()))
    place(ctx, f, host=host, pid=ev.pid)
    if f.rank is not None:
        f.pointers.ranks.add(f.rank)


def _on_sxid(scan: _Scan, file, ev, host: str | None) -> None:
    fatal = ev.details.get("severity") == "fatal"
    scan.ctx.add("sxid", severity="critical" if fatal else "warning", category="nvlink_error",
                 interruption="hard" if fatal else None, role="cause" if fatal else "context", hardware=True,
                 title=f"NVSwitch SXid {ev.details.get('sxid')} ({ev.details.get('severity')}) on {host}",
                 host=host, time=ev.time_utc, quotes=[quote(file, ev.line, ev.text)],
                 actions=["Check nv-fabricmanager logs and `nvidia-smi nvlink -s`; a fatal SXid needs a node "
                          "reboot and often an NVSwitch tray replacement"])


def _on_pcie_degraded(scan: _Scan, file, ev, host: str | None) -> None:
    f = scan.ctx.add("pcie-degraded", severity="warning", category="gpu_fell_off_bus", role="context",
                     title=f"PCIe link of {ev.pci_bus_id} runs below its capability on {host}", host=host,
                     time=ev.time_utc, quotes=[quote(file, ev.line, ev.text)],
                     actions=["Reseat the GPU/riser; compare `nvidia-smi -q -d PCI` link width/gen with max"])
    place(scan.ctx, f, host=host, pci=ev.pci_bus_id)


def _on_segfault(scan: _Scan, file, ev, host: str | None) -> None:
    """Only a segfault in libnccl is a finding here (others are the job's own, read by the job rules)."""
    if "nccl" not in (ev.details.get("library") or ev.text).lower():
        return
    f = scan.ctx.add("segfault", severity="error", category="application_error", interruption="soft",
                     title=f"Segfault in libnccl ({ev.process}:{ev.pid}) on {host}", host=host, time=ev.time_utc,
                     quotes=[quote(file, ev.line, ev.text)],
                     actions=["Check NCCL / driver / torch version compatibility; rerun with NCCL_DEBUG=INFO"])
    place(scan.ctx, f, host=host, pid=ev.pid)


def _on_panic(scan: _Scan, file, ev, host: str | None) -> None:
    scan.ctx.add("panic", severity="critical", category="node_lost", interruption="hard", hardware=True,
                 title=f"Kernel panic on {host}", host=host, time=ev.time_utc,
                 quotes=[quote(file, ev.line, ev.text)],
                 actions=["Drain the node; collect the crash dump / BMC SEL (`ipmitool sel list`)"])


def _on_driver_mismatch(scan: _Scan, file, ev, host: str | None) -> None:
    scan.ctx.add("driver-mismatch", severity="critical", category="driver_mismatch", interruption="hard",
                 hardware=True, title=f"NVIDIA kernel module and user-space driver differ on {host}",
                 host=host, time=ev.time_utc, quotes=[quote(file, ev.line, ev.text)],
                 actions=["Reinstall one driver version (kernel module and libraries) and reboot the node"])


def _on_gpu_reset(scan: _Scan, file, ev, host: str | None) -> None:
    f = scan.ctx.add("gpu-reset", severity="critical", category="gpu_fell_off_bus", role="context",
                     hardware=True, title=f"GPU {ev.pci_bus_id} on {host}: {ev.kind.replace('_', ' ')}",
                     host=host, time=ev.time_utc, quotes=[quote(file, ev.line, ev.text)])
    place(scan.ctx, f, host=host, pci=ev.pci_bus_id)


#: The kernel event kinds this module judges, each with its handler (as the parser registry lists
#: parsers): adding a kernel event is one handler and one line here.
HANDLERS: dict[str, Handler] = {
    "xid": _on_xid,
    "fell_off_bus": _on_fell_off,
    "aer": _on_aer,
    "oom_kill": _on_oom_kill,
    "memory_pressure": _on_memory_pressure,
    "hung_task": _on_hung_task,
    **dict.fromkeys(_LINK_KINDS, _on_ib_link),
    "sxid": _on_sxid,
    "pcie_link_degraded": _on_pcie_degraded,
    "nccl_segfault": _on_segfault,
    "segfault": _on_segfault,
    "kernel_panic": _on_panic,
    "driver_mismatch": _on_driver_mismatch,
    "gpu_reset_required": _on_gpu_reset,
    "gpu_init_failed": _on_gpu_reset,
}


def _link_down_echo(ctx: Context, nvlink: list[tuple[Finding, str | None]]) -> None:
    """Non-fatal NVLink5 errors within :data:`LINK_ECHO_S` of a fatal one (a link that went down),
    on any GPU of any node, are that link's echo: chained to it whatever order the lines arrived in
    (pdsh interleaves nodes; one second holds both), and their lines are judged (the catalogue does
    not tell them again as causes). Non-fatal errors alone stay causes."""
    fatal = [f for f, severity in nvlink if severity == "fatal" and not f.caused_by]
    for f, severity in nvlink:
        if severity == "fatal" or f.caused_by:
            continue
        down = next((d for d in fatal if _near(d.time, f.time, LINK_ECHO_S)), None)
        if down is not None:
            f.caused_by, f.role = down.id, "context"
            ctx.judged |= {(e.file, e.line) for e in f.quotes if e.line is not None}


def _xid(ctx: Context, file, ev, host: str | None, by_gpu: dict) -> Finding:
    code = ev.xid
    info = xid_info(code) if code is not None else None
    key = (host, ev.pci_bus_id)
    earlier = by_gpu.setdefault(key, [])
    same = next((f for f in earlier if f.id.startswith(f"xid{code}-") and _same_burst(f, host, ev.pci_bus_id,
                                                                                      ev.time_utc)), None)
    if same:
        same.quotes.append(quote(file, ev.line or None, ev.text))
        return same
    interruption = info.interruption if info else "soft"
    category = info.category if info and info.category != "none" else "application_error"
    name = info.name if info else "unknown Xid"
    f = ctx.add(f"xid{code}", severity=_SEVERITY.get(interruption, "error"), category=category, xid=code,
                interruption=interruption if interruption in ("hard", "soft") else None,
                role="cause" if interruption in ("hard", "soft") else "context", hardware=True,
                title=f"Xid {code} ({name}) on GPU {_gpu_name(ev)} of {host}", host=host, time=ev.time_utc,
                time_approx=bool(ev.details.get("before_window")), quotes=[quote(file, ev.line or None, ev.text)],
                actions=[info.action] if info and info.action else ["Look the Xid up in NVIDIA's Xid catalog"])
    place(ctx, f, host=host, pci=ev.pci_bus_id)
    if ev.pci_bus_id is None:  # dcgm-exporter without a pci_bus_id label: its index and UUID still name the GPU
        f.gpu_index = f.gpu_index if f.gpu_index is not None else ev.details.get("gpu")
        f.gpu_uuid = f.gpu_uuid or ev.details.get("uuid")
    cause_xid = ev.details.get("caused_by_xid")
    parent = None
    if cause_xid is not None:
        parent = next((p for p in reversed(earlier) if p.id.startswith(f"xid{cause_xid}-")), None)
    if parent is None:  # a follow-up of a harder error on the same GPU (48 -> 63 -> 94)
        parent = next((p for p in reversed(earlier) if p.interruption == "hard" and _near(p.time, f.time)), None)
    if parent is not None and parent is not f:
        f.caused_by, f.role = parent.id, "context"
    earlier.append(f)
    return f


def _gpu_name(ev) -> str:
    if ev.pci_bus_id or ev.details.get("gpu") is None:
        return str(ev.pci_bus_id)
    return f"index {ev.details['gpu']}" + (f" ({ev.details['uuid']})" if ev.details.get("uuid") else "")


def _fell_off(ctx: Context, file, ev, host, by_gpu: dict) -> None:
    earlier = by_gpu.setdefault((host, ev.pci_bus_id), [])
    same = next((f for f in earlier if f.category == "gpu_fell_off_bus" and (_near(f.time, ev.time_utc)
                                                                            or f.time == ev.time_utc)), None)
    if same:
        same.quotes.append(quote(file, ev.line, ev.text))
        return
    info = xid_info(79)
    f = ctx.add("fell-off-bus", severity="critical", category="gpu_fell_off_bus", interruption="hard",
                hardware=True, title=f"GPU {ev.pci_bus_id} of {host} fell off the bus", host=host, time=ev.time_utc,
                quotes=[quote(file, ev.line, ev.text)], actions=[info.action] if info else [])
    place(ctx, f, host=host, pci=ev.pci_bus_id)
    earlier.append(f)


def _aer(ctx: Context, file, ev, host) -> None:
    """PCIe AER reports, one finding per burst. The error is received and reported by the *port*
    above the link (``pcieport 0000:00:02.0``, a root port or switch port: not a GPU); the GPU on
    that link is named by its own driver's line in the same burst (``nvidia 0000:04:00.0: AER:
    can't recover``). The finding names that GPU, never the port."""
    fatal = ev.details.get("severity") == "fatal" or ev.details.get("surprise_down")
    port = names_a_port(ev.text, ev.pci_bus_id)
    gpu = ev.details.get("gpu") or (None if port else ev.pci_bus_id)
    for f in reversed(ctx.findings):
        if f.id.startswith("aer-") and f.host == host and _near(f.time, ev.time_utc, 10):
            f.quotes.append(quote(file, ev.line, ev.text))
            if fatal and f.role == "context":
                f.role, f.severity, f.interruption = "cause", "critical", "hard"
            if gpu and not f.gpu_pci:
                f.gpu_pci = gpu
                place(ctx, f, host=host, pci=gpu)
                f.title += f" (GPU {gpu} on that link)"
            return
    on_link = f" (GPU {gpu} on that link)" if gpu and gpu != ev.pci_bus_id else ""
    f = ctx.add("aer", severity="critical" if fatal else "warning", category="gpu_fell_off_bus",
                interruption="hard" if fatal else None, role="cause" if fatal else "context", hardware=True,
                title=f"PCIe AER {ev.details.get('severity', '')} error at {'port ' if port else ''}{ev.pci_bus_id} "
                      f"on {host}{on_link}".replace("  ", " "),
                host=host, time=ev.time_utc, quotes=[quote(file, ev.line, ev.text)],
                actions=["Reseat/replace the GPU, riser or PCIe switch on that path; check BMC logs"])
    f.gpu_pci = gpu  # None when only a port is named: a port is not a GPU
    place(ctx, f, host=host, pci=gpu)


def _ib_link(ctx: Context, file, ev, host) -> None:
    for f in reversed(ctx.findings):
        if f.id.startswith("ib-link-") and f.host == host and _near(f.time, ev.time_utc, 300):
            f.quotes.append(quote(file, ev.line, ev.text))
            return
    ctx.add("ib-link", severity="critical", category="network_fabric", interruption="soft", hardware=True,
            title=f"InfiniBand link lost on {host} ({ev.details.get('iface') or ev.details.get('reason') or 'HCA'})",
            host=host, time=ev.time_utc, quotes=[quote(file, ev.line, ev.text)],
            actions=["Reseat or replace the cable/transceiver of that HCA port; check `ibstat` shows State: Active "
                     "and Physical state: LinkUp before relaunch",
                     "Port still Down/Polling with a good cable: check the switch port; State Init means no subnet "
                     "manager answers (`sminfo`). Relaunch only once it is Active: NCCL falls back to TCP otherwise"])
