"""One GPU that takes seconds to answer a query its peers answer at once: the driver retrying hardware.

Why: NVML and nvidia-smi answer from the driver in micro- to milliseconds. When the same query
takes seconds on one GPU and nothing on its peers in the same machine, the driver is retrying an
operation on that GPU's hardware. For an NVLink or peer-to-peer query that is link training on a
link that never comes up: a bridge not pushed fully home (blocked by a cooler), a damaged
connector. The retries can stall the whole machine - the job hangs or the desktop freezes - and
nothing prints an error. Reseating the bridge (or the GPUs behind an NVSwitch link) is the fix;
a query slow on every GPU alike is the machine's load or a missing persistence daemon, not one
GPU's hardware, and says nothing here.
"""

from __future__ import annotations

import re
from collections import defaultdict
from statistics import median

from gpulib.diagnose.context import Context, place, quote
from gpulib.parsers import gpu_query_time
from gpulib.parsers.gpu_query_time import QueryTime

#: A query this slow on one GPU is the driver waiting on hardware, not computing an answer.
SLOW_QUERY_MS = 1000.0
#: ... when it is also this many times slower than the same query on the other GPUs (their median,
#: plus 1 ms so that a peer that answered in "0 ms" still compares).
OUTLIER_FACTOR = 10.0
#: Queries about links between GPUs: a slow one blames the link, not the GPU's firmware.
LINK_QUERY = re.compile(r"(?i)nvlink|p2p|peer|\blinks?\b|nvswitch|fabric")


def run(ctx: Context) -> None:
    groups: dict[tuple, list] = defaultdict(list)
    for file, rec in ctx.records(gpu_query_time.KIND):
        if isinstance(rec, QueryTime):
            groups[(file.host, file.display, rec.query)].append((file, rec))
    for (host, _display, query), timed in groups.items():
        by_gpu = {}
        for file, rec in timed:  # the slowest answer of each GPU
            key = rec.pci_bus_id or rec.gpu_index
            if key not in by_gpu or rec.elapsed_ms > by_gpu[key][1].elapsed_ms:
                by_gpu[key] = (file, rec)
        if len(by_gpu) < 2:
            continue  # one GPU alone: nothing to compare it with
        for key, (file, rec) in by_gpu.items():
            peers = [r.elapsed_ms for k, (_f, r) in by_gpu.items() if k != key]
            typical = median(peers)
            if rec.elapsed_ms >= SLOW_QUERY_MS and rec.elapsed_ms >= OUTLIER_FACTOR * (typical + 1.0):
                _add(ctx, file, host, query, rec, typical, by_gpu)


def _add(ctx: Context, file, host: str | None, query: str, rec: QueryTime, typical_ms: float, by_gpu: dict) -> None:
    link = bool(LINK_QUERY.search(query))
    what = f"'{query}'" if query else "the same query"
    gpu = f"GPU {rec.gpu_index}" + (f" ({rec.pci_bus_id})" if rec.pci_bus_id else "")
    peers = [r for k, (_f, r) in by_gpu.items() if r is not rec]
    title = (f"{gpu} took {rec.elapsed_ms:,.0f} ms to answer {what}, its peers {typical_ms:,.0f} ms: "
             + ("the driver keeps retrying an NVLink that does not come up (a bridge or link not fully seated)"
                if link else "the driver is stuck waiting on this GPU's hardware"))
    f = ctx.add("slow-query", severity="critical" if link else "error", interruption="hard", hardware=True,
                category="nvlink_error" if link else "gpu_firmware_error", title=title, host=host,
                gpu_index=rec.gpu_index, gpu_pci=rec.pci_bus_id,
                quotes=[quote(file, rec.line, rec.text), quote(file, rec.gpu_line, rec.gpu_text)]
                + [quote(file, p.line, p.text) for p in peers[:3]],
                actions=(["Power the machine off and reseat the NVLink bridge(s) on this GPU (a bridge blocked by a "
                          "cooler or bracket is the usual cause); check `nvidia-smi nvlink -s` shows every link up",
                          "Until it is fixed, run with NCCL_P2P_DISABLE=1 or without the bridge"] if link else
                         ["Check the kernel log for Xid / NVRM errors on this GPU and run `nvidia-smi -q -i` on it; "
                          "reset the GPU or reboot, and RMA it if the slowness returns"]))
    place(ctx, f, host=host, pci=rec.pci_bus_id)
