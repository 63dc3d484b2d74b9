"""Steps that wait most of their time for data: the input pipeline cannot keep up (soft).

Why: trainers print, per progress line, how long the step waited for its batch beside the step's
whole time (open_clip ``Data (t)`` / ``Batch (t)``, timm ``Data:`` / ``Time:``, mmengine and
detectron2 ``data_time`` / ``time``). When the DataLoader workers cannot read and decode as fast as
the GPUs train - shared storage (NFS, Lustre, object stores) slower than the run needs, too few
workers, shards too few for the workers - the run does not fail: every N steps (N = the number of
workers, each waiting on its next file) the step waits tens of seconds with the GPUs idle. The log
has no error line, so without this reading such a run reads as "no failure found" while it trains at
a fraction of its speed; the fix is on the data side (faster or local storage, more shards or
workers), never the GPUs or the network.

The first reading of each series is left out: the first batch always waits for the workers to
start. :func:`gpulib.diagnose.rules.job._stragglers` reads the other shape, per-rank ``*_ms`` metrics compared
across ranks at one step.
"""

from __future__ import annotations

from collections import defaultdict

from gpulib.diagnose.context import Context, place, quote
from gpulib.parsers import training_log

#: A step that waited for data at least this share of its time, and at least this long, stalled.
STALLED_SHARE = 0.5
STALLED_MIN_S = 1.0
#: The stalls must repeat (one slow read is a cold cache) and add up to this share of the time read.
MIN_STALLS = 2
WAIT_SHARE = 0.3


def run(ctx: Context) -> None:
    series: dict[tuple, list] = defaultdict(list)
    for file, ev in ctx.records(training_log.KIND):
        if getattr(ev, "kind", None) == "step" and "data_s" in ev.details and ev.details.get("s_per_step"):
            series[(file.display, ev.rank, ev.host)].append((file, ev))
    for (_display, rank, host), read in series.items():
        read = read[1:]  # the first batch waits for the workers to start
        waited = sum(ev.details["data_s"] for _f, ev in read)
        took = sum(ev.details["s_per_step"] for _f, ev in read)
        stalls = [(f, ev) for f, ev in read if ev.details["data_s"] >= max(STALLED_MIN_S,
                                                                             STALLED_SHARE * ev.details["s_per_step"])]
        if len(stalls) >= MIN_STALLS and took and waited >= WAIT_SHARE * took:
            _add(ctx, rank, host, read, stalls, waited, took)


def _add(ctx: Context, rank: int | None, host: str | None, read: list, stalls: list, waited: float,
         took: float) -> None:
    file, first = stalls[0]
    longest = max(ev.details["data_s"] for _f, ev in stalls)
    who = f"Rank {rank}: " if rank is not None else ""
    title = (f"{who}{len(stalls)} of {len(read)} logged steps waited for data (up to {longest:.0f} s); waiting is "
             f"{100 * waited / took:.0f}% of the steps' time: the input pipeline cannot keep up and the GPUs idle")
    f = ctx.add("data-wait", severity="error", category="data_pipeline_stall", interruption="soft",
                title=title, rank=rank, host=host or file.host, time=first.time_utc,
                quotes=[quote(fl, ev.line, ev.text) for fl, ev in stalls[:3]],
                actions=["Measure the dataset storage while the job reads (`nfsiostat`/`iostat -x`, read latency): "
                         "stage the data on local NVMe or a faster file system, or use more shards",
                         "Raise DataLoader num_workers / prefetch_factor (and persistent_workers=True) if the "
                         "storage is not the limit"])
    f.tier = 3  # it slows the job: a process killed (host OOM of the same workers) or a fault comes first
    place(ctx, f, rank=rank, host=f.host)
