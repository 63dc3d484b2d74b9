"""NCCL's 'unhandled cuda error' at start-up joined to GPU memory that other processes held.

Why: NCCL reports any failed CUDA call as ``unhandled cuda error``, which reads like a broken GPU
or driver. The commonest cause on a shared node is mundane: an inference service, a notebook or
a leftover training process already holds nearly all of the GPU's memory, so the CUDA context or
NCCL's buffers cannot be allocated. The GPUs are healthy; the node was not free. Whose memory it
was comes from nvidia-smi:

* a process table (``nvidia-smi``, ``-q``, ``-q -x``, NVML): memory of processes that are not the
  failing job's (its PIDs come from the nccl-tests device list, NCCL's ``host:pid:tid`` prefixes
  and the job log), or
* memory in use seen by an nvidia-smi run *after* the failure in the same pasted session: the
  failing command had exited by the time the next prompt ran it, so what it saw was held by
  others.

Memory the job itself held, or a GPU with room to spare, explains nothing and is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.findings import Quote
from gpulib.parsers.gpu_records import GpuState
from gpulib.parsers.nccl_tests import NcclTestsRun
from gpulib.parsers.signatures import Signal, printers_of
from gpulib.parsers.training_log import members_of

#: Signatures of a CUDA call that failed inside NCCL (catalogue ids).
FAILURE_SIGNATURES = ("nccl-cuda-error",)
#: Kinds whose records are one GPU's state with its memory (and, for most, its processes).
SNAPSHOT_KINDS = kinds.GPU_SNAPSHOT_ROWS
#: Other processes holding at least this share of a GPU's memory leave no room for a new context
#: and NCCL's buffers (a few hundred MiB to a few GiB).
HELD_SHARE = 0.9
#: GPUs quoted per finding.
QUOTED_GPUS = 4


@dataclass
class Held:
    """One GPU whose memory others held: ``held_mib`` of ``total_mib``, by ``pids`` (empty when
    the snapshot listed no processes and came after the failed command)."""

    file: InputFile
    gpu: GpuState
    held_mib: float
    total_mib: float
    pids: list[int]


def run(ctx: Context) -> None:
    failures = [(f, s) for f in ctx.inputs.files for s in f.signals if s.signature in FAILURE_SIGNATURES]
    seen: set[str | None] = set()
    for file, signal in sorted(failures, key=lambda fs: (fs[1].time_utc or "~", fs[0].display, fs[1].line)):
        host = signal.host or file.host
        if host in seen:
            continue
        pids, devices = _job(ctx, host)
        held = [h for h in _held(ctx, host, pids, file, signal) if not devices or h.gpu.index in devices]
        if held:
            seen.add(host)
            _add(ctx, file, signal, host, held)


def _job(ctx: Context, host: str | None) -> tuple[set[int], set[int]]:
    """PIDs and GPU indices of the job on ``host``: nccl-tests' device list, NCCL prefixes, job logs."""
    pids, devices = set(), set()
    for file, rec in ctx.records(kinds.NCCL_TESTS):
        if isinstance(rec, NcclTestsRun):
            for d in rec.devices:
                if (d.host or file.host) == host:
                    pids.add(d.pid)
                    devices.add(d.device)
    for f in ctx.inputs.files:
        pids |= {pid for s in f.signals for _rank, pid, by in printers_of(s) if pid is not None and (by or f.host) == host}
    for f, e in ctx.records(kinds.TRAINING_LOG):
        printers = members_of(e) if e.folded else [{"host": e.host, "pid": e.pid}]
        pids |= {m["pid"] for m in printers if m.get("pid") is not None and (m.get("host") or f.host) == host}
    return pids, devices


def _held(ctx: Context, host: str | None, pids: set[int], failed_in: InputFile, failure: Signal) -> list[Held]:
    out = []
    for file, gpu in ctx.records(*SNAPSHOT_KINDS):
        if not isinstance(gpu, GpuState) or (gpu.host or file.host) != host or not gpu.mem_total_mib:
            continue
        if gpu.processes:
            others = [p for p in gpu.processes if p.pid not in pids]
            if any(p.used_mib is None for p in others):
                continue  # the driver did not say how much they use
            held, who = sum(p.used_mib for p in others), sorted(p.pid for p in others if p.pid is not None)
        elif file.path == failed_in.path and gpu.line and gpu.line > failure.line and gpu.mem_used_mib is not None:
            held, who = gpu.mem_used_mib, []  # seen after the failed command exited: none of it was the job's
        else:
            continue
        if held >= HELD_SHARE * gpu.mem_total_mib:
            out.append(Held(file, gpu, held, gpu.mem_total_mib, who))
    return out


def _add(ctx: Context, file: InputFile, signal: Signal, host: str | None, held: list[Held]) -> None:
    share = min(h.held_mib / h.total_mib for h in held)
    gpus = ", ".join(str(h.gpu.index) for h in held[:8]) + (" ..." if len(held) > 8 else "")
    pids = sorted({p for h in held for p in h.pids})
    whose = (f" (PIDs {', '.join(map(str, pids[:6]))})" if pids else
             " (nvidia-smi run after the failed command had exited)")
    one = held[0].gpu if len(held) == 1 else None
    ctx.add("memory-held", severity="error", category="cuda_oom", interruption="soft",
            title=f"NCCL's CUDA calls failed ('unhandled cuda error') on {host or 'the node'} while other processes "
                  f"held {share:.0%}+ of the memory of GPU(s) {gpus}{whose}: no room for a CUDA context and NCCL's "
                  "buffers; the GPUs are not at fault",
            host=host, gpu_index=one.index if one else None, gpu_pci=one.pci_bus_id if one else None,
            time=signal.time_utc, quotes=[quote(file, signal.line, signal.text)] + [
                Quote(h.file.display, h.gpu.line, f"GPU {h.gpu.index}: {h.held_mib:,.0f} MiB of "
                                                         f"{h.total_mib:,.0f} MiB held"
                             + (f" by PID(s) {', '.join(map(str, h.pids[:4]))}" if h.pids else ""))
                for h in held[:QUOTED_GPUS]],
            actions=["Find who holds the GPUs (`nvidia-smi --query-compute-apps=pid,process_name,used_memory "
                     "--format=csv`) and stop or move that service/job, or schedule onto free GPUs",
                     "Rerun the test once the memory is free; with NCCL_DEBUG=INFO the WARN line before the error "
                     "names the CUDA call that failed ('out of memory')"],
            extra={"pids": pids} if pids else {})
