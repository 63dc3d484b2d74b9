"""Write one node's digest (the map step; :mod:`gpulib.evidence.digest` says why and what).

The node reads its own files as the central diagnosis would, then runs the rules that judge one
node's files alone - kernel log (:mod:`.rules.kernel`), GPU snapshots and time series
(:mod:`.rules.gpu`), InfiniBand ports (:func:`.rules.other.ib_ports`) - to learn which files say
something. Those files travel with their records, so the central diagnosis judges them with the
job's rank map, folds and chains them with the other nodes' events and names the culprit exactly
as from the raw files. A *quiet* file travels as its :class:`~.record_summary.FileSummary` only:
what the steps that join nodes read from it (GPU names, config facts, the year of its stamps, the
GPUs a snapshot lists). A file is quiet only when no rule can make anything of it, whatever the
other nodes say:

* a kernel log no node-local finding cites, with no OOM-killer context lines and no reboot (a boot
  line after the log's first line: whether a reboot fell in the job is the job log's to say);
* an nvidia-smi snapshot no finding cites, whose GPUs run no process (a process left after the
  job failed is a leftover only the job's failure time can tell, and memory other processes
  hold is what an NCCL 'unhandled cuda error' elsewhere may be explained by), whose records name
  no host and in which no catalogue line matched (a failure pasted above a snapshot is read with it);
* GPU time series of a node whose every series is quiet (:func:`.rules.gpu.quiet_series`: never
  throttled, never hot without a reason) and carries throttle reasons;
* an ``ibstat`` with no port a finding cites.

A tool output inside a pasted shell session (a second input read from part of one file) always
travels with its records: only the whole file could be read again. Which host a quiet file's
records are joined under is settled centrally (:mod:`gpulib.evidence.gather` reads a node's quiet files raw
after all when a file outside the node names the same host).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from gpulib.diagnose import rules
from gpulib.diagnose.context import Context
from gpulib.diagnose.joins import IdentityMap
from gpulib.diagnose.node_facts import text_facts
from gpulib.evidence import digest, kinds
from gpulib.evidence.gather import SERIES_KINDS, InputFile, Inputs, gather_node
from gpulib.evidence.record_summary import SUMMARISED_KINDS
from gpulib.evidence.thresholds import Thresholds
from gpulib.parsers.gpu_records import GpuSample
from gpulib.parsers.gpu_series import GpuSeries

#: Records of a kernel log that a rule reads beside another line (the OOM killer's dump).
KERNEL_CONTEXT_KINDS = frozenset({"oom_invoked", "oom_constraint"})


def write(folder: str | Path, tz: str | None = None) -> Path:
    """Read ``folder`` (one node's bundle or folder) as the central diagnosis would and write
    what it found to ``folder/digest.json``; returns that path."""
    folder = Path(folder)
    seen = digest.listing(folder)
    inputs, year = gather_node(folder, tz)
    for f in inputs.files:
        text_facts(f)  # the configuration facts node_facts reads from raw text, read here once
    thresholds = Thresholds()
    keep = records_needed(inputs, tz, thresholds)
    return digest.save(folder, digest.document(folder, inputs.files, inputs, year, tz, seen, keep, thresholds))


def records_needed(inputs: Inputs, tz: str | None, thresholds: Thresholds) -> set[int]:
    """``id()`` of each file of one node whose records must travel (see the module text)."""
    ctx = Context(inputs, IdentityMap(inputs), tz, thresholds)
    rules.kernel.run(ctx)
    rules.gpu.run(ctx)
    rules.other.ib_ports(ctx)
    cited = {e.file for finding in ctx.findings for e in finding.quotes}
    keep = {id(f) for f in inputs.files if f.kind not in SUMMARISED_KINDS or f.display in cited}
    kernel = [f for f in inputs.files if f.kind == kinds.KERNEL_LOG]
    keep |= {id(f) for f in kernel if any(e.kind in KERNEL_CONTEXT_KINDS for e in f.records)}
    keep |= _rebooted(kernel)
    keep |= {id(f) for f in inputs.of_kind(*kinds.GPU_SNAPSHOT_ROWS)
             if f.signals or any(getattr(s, "processes", None) or getattr(s, "host", None)
                                 for s in f.records if hasattr(s, "lost"))}
    paths = Counter(f.path for f in inputs.files)
    keep |= {id(f) for f in inputs.files if paths[f.path] > 1}  # a pasted session and its tools' outputs
    series = inputs.of_kind(*SERIES_KINDS)
    if not all(_quiet_series(f, thresholds) for f in series):
        keep |= {id(f) for f in series}
    return keep


def _quiet_series(f: InputFile, thresholds: Thresholds) -> bool:
    return all(not isinstance(r, GpuSample) and (not isinstance(r, GpuSeries) or rules.gpu.quiet_series(
        r, thresholds.temp_limit_c)) for r in f.records)


def _rebooted(kernel: list[InputFile]) -> set[int]:
    """Kernel logs of a host whose events hold a boot after their first (the reboot rule's question,
    :func:`gpulib.diagnose.rules.other._reboots`, asked of every host's events in the same order)."""
    by_host: dict[str | None, list] = {}
    for f in kernel:
        for ev in f.records:
            by_host.setdefault(ev.host or f.host, []).append((f, ev))
    keep: set[int] = set()
    for events in by_host.values():
        events.sort(key=lambda fe: (fe[0].display, fe[1].line))
        if any(ev.kind == "boot" for _f, ev in events[1:]):
            keep |= {id(f) for f, _ev in events}
    return keep


__all__ = ["records_needed", "write"]
