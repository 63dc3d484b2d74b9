"""A job log that stops mid-run while a later GPU snapshot shows the job still on its GPUs: a stall.

Why: a log that stops without a normal end is either a process that died or one that hangs. A
snapshot taken *after* the last progress line (``date; nvidia-smi --query-gpu=...``, ``nvidia-smi``'s
table, ``-q``) tells them apart: processes that died free their GPU memory; the job's GPUs still
holding it minutes later mean its processes are alive and make no progress. That is never a
healthy run ("none"); the cause is not shown, so the verdict is ``unknown``, with what to collect
while it hangs (a stack of every rank).

Which GPU to look at first: in a hang inside a collective, the ranks that arrived spin in NCCL's
kernels, which an ``nvidia-smi`` sample reads as 100 % utilisation (at low power: spinning is not
computing), while the rank that never arrived sits at 0 % on its GPU. One GPU idle among busy
siblings of the same snapshot is therefore the suspect - a lead to check first, not a verdict:
that rank may wait on data, a corrupt sample or a dead peer. All GPUs alike name no suspect.
"""

from __future__ import annotations

from gpulib.diagnose import generic
from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.findings import Pointers
from gpulib.parsers.gpu_records import GpuState

#: A GPU holding at least this much memory holds a job's context and tensors (an idle GPU shows a
#: few MiB; a display or persistence daemon a few hundred).
HELD_MIB = 1024
#: Utilisation at or above which a GPU of a stalled job counts as busy (spinning in a collective),
#: and at or below which it counts as idle.
BUSY_PCT = 90
IDLE_PCT = 5
#: Busy siblings needed before one idle GPU stands out.
MIN_BUSY = 2


def run(ctx: Context) -> None:
    stops = generic.stopped_logs(ctx)
    if not stops:
        return
    snapshots = _snapshots(ctx)
    for stop in stops:
        last = next((ev for ev in stop.file.records if getattr(ev, "line", None) == stop.line
                     and getattr(ev, "kind", None) == "step"), None)
        if last is None or not last.time_utc:
            continue
        host = last.host or stop.file.host
        for (_name, shot_host, when), (file, gpus) in snapshots.items():
            if when <= last.time_utc or host and shot_host and host != shot_host:
                continue
            held = [g for g in gpus if (g.mem_used_mib or 0) >= HELD_MIB]
            if held:
                _stalled(ctx, stop, last, file, shot_host, when, held)
                return


def _snapshots(ctx: Context) -> dict[tuple, tuple[InputFile, list[GpuState]]]:
    """GPU states of one moment with their file, by (file, host, UTC time); states of no known time
    are left out."""
    out: dict[tuple, tuple[InputFile, list[GpuState]]] = {}
    for file, rec in ctx.records(*kinds.GPU_SNAPSHOT_ROWS):
        if not isinstance(rec, GpuState):
            continue
        when = ctx.utc(rec.captured_at, file)
        if when:
            out.setdefault((file.display, rec.host or file.host, when), (file, []))[1].append(rec)
    return out


def _stalled(ctx: Context, stop, last, file, host, when, held: list[GpuState]) -> None:
    idle = [g for g in held if g.util_gpu_pct is not None and g.util_gpu_pct <= IDLE_PCT]
    busy = [g for g in held if g.util_gpu_pct is not None and g.util_gpu_pct >= BUSY_PCT]
    suspect = idle[0] if len(idle) == 1 and len(busy) >= MIN_BUSY else None
    where = f" on {host}" if host else ""
    title = (f"The job log stops at {stop.file.display}:{stop.line} ({last.time_utc}) without a normal end, and "
             f"{len(held)} GPU(s){where} still held its memory at {when}: the processes were alive and made no "
             "progress (a hang)")
    if suspect is not None:
        title += (f"; GPU {suspect.index} ({suspect.pci_bus_id}) sat idle at {suspect.util_gpu_pct:g} % while "
                  f"{len(busy)} sibling(s) spun at 100 % (ranks waiting in a collective for the rank on it)")
    quotes = [quote(stop.file, stop.line, stop.text)] + [
        quote(file, getattr(g, "line", None), _row(g)) for g in ([suspect] if suspect else held[:2])]
    pointers = Pointers(hosts={host} if host else set(),
                        gpus={(host, suspect.pci_bus_id)} if suspect is not None and suspect.pci_bus_id else set())
    steps = ["While it hangs, dump every rank's stack (`py-spy dump --pid <pid>` for each process on the GPUs) "
             "and relaunch with NCCL_DEBUG=INFO: the rank that is not in the collective is the cause"]
    if suspect is not None:
        steps.insert(0, f"Start with the process on GPU {suspect.index} ({suspect.pci_bus_id}){where}: its stack "
                        "and the last sample it read (a corrupt or huge input stalls one rank)")
    f = ctx.add("stall", severity="error", category="application_error", role="symptom", title=title, host=host,
                gpu_index=suspect.index if suspect is not None else None,
                gpu_pci=suspect.pci_bus_id if suspect is not None else None, time=last.time_utc, quotes=quotes,
                actions=steps, pointers=pointers)
    f.extra["stall"] = ("The job hangs, cause not shown: its log stopped without a normal end while its GPUs stayed "
                        "held" + (f"; GPU {suspect.index} ({suspect.pci_bus_id}){where} is the suspect, idle among "
                                  "busy siblings" if suspect is not None else "") + ".")


def _row(g: GpuState) -> str:
    return (f"GPU {g.index} {g.pci_bus_id}: {g.util_gpu_pct if g.util_gpu_pct is not None else '?'} % busy, "
            f"{g.mem_used_mib if g.mem_used_mib is not None else '?'} MiB used, "
            f"{g.power_draw_w if g.power_draw_w is not None else '?'} W")
