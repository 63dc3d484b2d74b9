"""Host memory pressure up to a failure: available memory low until the job died, freed when it exited.

Why: a host that runs out of available memory stalls before its OOM killer acts - page reclaim,
swap, a unified-memory GPU (one pool for CPU and GPU) that waits for pages - and the job's processes
miss their deadlines: an RPC times out, an engine is declared dead, a collective waits. The failure
line names a time-out, never memory. Samples of the host's memory (``/proc/meminfo`` CSV, ``sar -r``,
``free``: :mod:`gpulib.parsers.host_memory`) say what it was: available memory under
:data:`LOW_PCT` of the total at the last sample before the first failure line, and back up by at least
:data:`RELEASED_POINTS` points in a sample after it - the memory was the job's, and the job held it to
the end. That is ``host_oom``, soft, on that host (no kill needed): lower the job's memory use
(smaller KV cache / ``gpu-memory-utilization``, fewer workers, smaller batches) and relaunch.

Not pressure: memory low only after the failure (another process's), or memory steady well above the
line.
"""

from __future__ import annotations

from collections import defaultdict

from gpulib.catalog.signatures import load_signatures
from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.parsers.host_memory import MemSample
from gpulib.parsers.logtime import seconds_between
from gpulib.parsers.signatures import GENERIC, GENERIC_KINDS

#: Available memory below this share of the total is pressure.
LOW_PCT = 15.0
#: A later sample this many points higher says the memory was released when the job exited.
RELEASED_POINTS = 30.0
#: The last sample before the failure, and the release after it, must be this close to it.
BEFORE_S = 30 * 60
AFTER_S = 60 * 60
#: Catalogue roles of a line that says something failed.
_FAILING = ("cause", "symptom", GENERIC)


def run(ctx: Context) -> None:
    series: dict[tuple, list] = defaultdict(list)
    for fl, rec in ctx.records(kinds.HOST_MEMORY):
        if isinstance(rec, MemSample) and rec.time_utc:
            series[(fl.display, rec.host)].append((fl, rec))
    failed = _first_failure(ctx) if series else None  # no samples, no need to read every log's lines
    if failed is None:
        return
    when, file, signal = failed
    for (_display, host), samples in series.items():
        samples.sort(key=lambda s: s[1].time_utc)
        before = [s for s in samples if 0 <= seconds_between(s[1].time_utc, when) <= BEFORE_S]
        after = [s for s in samples if 0 < seconds_between(when, s[1].time_utc) <= AFTER_S]
        if not before or not after:
            continue
        fl, low = before[-1]
        freed = next(((f, s) for f, s in after if s.available_pct >= low.available_pct + RELEASED_POINTS), None)
        if low.available_pct >= LOW_PCT or freed is None:
            continue
        ffl, free = freed
        f = ctx.add("memory-pressure", severity="error", category="host_oom", interruption="soft", role="cause",
                    title=f"Host memory was under pressure up to the failure: {low.available_pct:.0f}% available at "
                          f"{low.time_utc}, {free.available_pct:.0f}% once the job had exited: the job held the "
                          "memory, and the host stalled its processes (no OOM kill needed)",
                    host=host or signal.host, time=low.time_utc,
                    quotes=[quote(file, signal.line, signal.text), quote(fl, low.line, low.text),
                            quote(ffl, free.line, free.text)],
                    actions=["Lower the job's host memory use (inference: a smaller --gpu-memory-utilization / KV "
                             "cache; training: fewer DataLoader workers, smaller batches) and relaunch",
                             "On unified-memory machines the GPU's allocations come out of the same pool: leave "
                             "headroom for the host; watch MemAvailable while it runs"])
        f.tier = 2
        return


def _first_failure(ctx: Context) -> tuple | None:
    """(time, file, signal) of the earliest timed line of a process log that says something failed."""
    roles = {sig.id: sig.role for sig in load_signatures()}
    found = [(s.time_utc, fl, s) for fl in ctx.inputs.of_kind(*GENERIC_KINDS) for s in fl.signals
             if s.time_utc and roles.get(s.signature) in _FAILING]
    return min(found, key=lambda x: x[0]) if found else None


__all__ = ["run"]
