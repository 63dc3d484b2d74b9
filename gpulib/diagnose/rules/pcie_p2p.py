"""A first collective that never completes over PCIe peer-to-peer: ACS or the IOMMU in the way.

NCCL moves data between two GPUs of one machine with peer-to-peer writes (``via P2P/IPC``,
``P2P/CUMEM``, ``P2P/direct pointer``). Over NVLink they never leave the GPUs; over PCIe (topology
``PIX``/``PXB``/``PHB``, no ``NV#``) they cross the PCIe switches and root ports. Where Access
Control Services redirect peer requests upstream (``lspci -vvv``: ``ACSCtl: ... ReqRedir+
CmpltRedir+`` on a bridge above the GPUs) or the IOMMU translates every DMA (``iommu: Default
domain type: Translated``), the writes are routed through the root complex and, on many
platforms, silently dropped: the communicators come up (``Init COMPLETE``) and the very first
collective waits forever, on every rank at once, until the watchdog fires at SeqNum 1. Nothing
is broken: the platform's configuration blocks P2P. So: a time-out of the first collective after
init, on a P2P transport, with ACS redirection or IOMMU translation in the evidence and no NVLink
between the GPUs, is a transport set-up fault: network_fabric, *soft*, on that machine. The same
holds when, instead of the platform's settings, the evidence shows the run passing with P2P off: a
command with ``NCCL_P2P_DISABLE=1`` followed by the run's normal end and no failure in between.
"""

from __future__ import annotations

from gpulib.catalog.signatures import load_signatures
from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.parsers.signatures import printers_of

#: The catalogue's identity rows: a P2P channel, a bridge with ACS redirection on, IOMMU translation.
P2P_CHANNEL = "nccl-p2p-channel"
PLATFORM_BLOCKS = ("pcie-acs-redirect", "iommu-translated")
#: The catalogue's setting row for NCCL_P2P_DISABLE=1, and the roles that say a run went on to its end
#: (or did not).
P2P_OFF = "nccl-p2p-disable"
#: The sequence numbers of a job's first collectives (a barrier may come before the first all-reduce).
FIRST_SEQ = 2


def run(ctx: Context) -> None:
    events = ctx.records(*kinds.JOB_LOGS)
    timeouts = [(fl, e) for fl, e in events if e.kind == "watchdog_timeout"]
    if not timeouts or not _first_collective(events, timeouts):
        return
    signals = [(file, s) for file in ctx.inputs.files for s in file.signals]
    p2p = [(file, s) for file, s in signals if s.signature == P2P_CHANNEL]
    blocks = [(file, s) for file, s in signals if s.signature in PLATFORM_BLOCKS] or _passes_without_p2p(ctx)
    if not p2p or not blocks:
        return
    hosts = {h for _file, s in p2p for _r, _p, h in printers_of(s) if h} | {e.host or fl.host for fl, e in timeouts}
    hosts.discard(None)
    if len(hosts) > 1 or _nvlinked(ctx, hosts):
        return  # P2P is one machine's; over NVLink neither ACS nor the IOMMU is on the path
    host = hosts.pop() if hosts else None
    ordered = sorted(timeouts, key=lambda fe: (fe[1].time_utc or "~", fe[1].line))
    tfile, first = ordered[0]
    # every rank waited: the time-outs of two ranks are quoted, so that no one rank reads as the culprit
    other = next(((fl, e) for fl, e in ordered if e.rank != first.rank), None)
    pfile, channel = p2p[0]
    bfile, block = blocks[0]
    why = {"pcie-acs-redirect": "ACS redirects peer requests on a PCIe bridge above the GPUs",
           "iommu-translated": "the IOMMU translates every DMA"}.get(
        block.signature, "the same run with NCCL_P2P_DISABLE=1 completed")
    f = ctx.add("pcie-p2p-blocked", severity="error", category="network_fabric", interruption="soft", role="cause",
                title=f"The first collective never completed over PCIe peer-to-peer (via P2P/{channel.fields.get('what')})"
                      f" and {why}: the platform blocks P2P (ACS or the IOMMU route it through the root complex)",
                host=host, time=first.time_utc, time_approx=True,
                quotes=[quote(tfile, first.line, first.text),
                        *([quote(other[0], other[1].line, other[1].text)] if other else []),
                        quote(pfile, channel.line, channel.text),
                        quote(bfile, block.line, block.text)],
                actions=["Disable ACS on the PCIe bridges above the GPUs (BIOS: ACS off; at runtime `setpci -s "
                         "<bridge> ECAP_ACS+6.w=0000` for each bridge `lspci -vvv` shows with ReqRedir+), and put the "
                         "IOMMU in pass-through (`iommu=pt`, or off) on bare metal, then relaunch",
                         "Check with nccl-tests (`all_reduce_perf -b 8 -e 128M -g <gpus>`) before the job; "
                         "NCCL_P2P_DISABLE=1 works around it at the cost of staging through host memory"])
    f.hardware = False
    f.extra["scope"] = "node"  # the machine's PCIe path, not a rank's


def _passes_without_p2p(ctx: Context) -> list[tuple]:
    """The NCCL_P2P_DISABLE=1 setting of a run that reached its normal end: a completion line after the
    setting in the same file, and no failure line between them."""
    roles = {sig.id: sig.role for sig in load_signatures()}
    for file in ctx.inputs.files:
        for off in (s for s in file.signals if s.signature == P2P_OFF):
            after = sorted((s for s in file.signals if s.line > off.line and roles.get(s.signature) in
                            ("cause", "symptom", "failure", "completion")), key=lambda s: s.line)
            if after and roles[after[0].signature] == "completion":
                return [(file, off)]
    return []


def _first_collective(events, timeouts) -> bool:
    """The time-outs are of the job's first collectives after its communicators came up."""
    if not any(e.kind == "nccl_init" and e.details.get("phase") == "Init COMPLETE" for _fl, e in events):
        return False
    seqs = {e.details.get("seq") for _fl, e in timeouts}
    if None in seqs:
        return not any(e.kind == "step" for _fl, e in events)
    return max(seqs) <= FIRST_SEQ


def _nvlinked(ctx: Context, hosts: set[str]) -> bool:
    """Whether an ``nvidia-smi topo -m`` of these hosts shows NVLink between its GPUs."""
    return any(dev.kind == "gpu" and any(o.startswith("GPU") for o in dev.nvlinks)
               for fl, dev in ctx.records(kinds.NVIDIA_SMI_TOPO) if not hosts or fl.host in hosts or fl.host is None)


__all__ = ["run"]
