"""Timing one collective the way nccl-tests does, and combining the ranks' times.

On GPUs the calls are asynchronous: wall-clock time would measure only the launch. CUDA events
recorded on the current stream bracket the work (torch makes the current stream wait for the NCCL
stream), so their elapsed time is the GPU time of ``iters`` back-to-back collectives. On CPU/gloo
every call blocks, so ``time.perf_counter`` around the loop is the same measure. Both start after a
barrier so that no rank's clock includes waiting for a late peer from the previous step.

nccl-tests then combines the per-rank times with ``-a``: 0 = rank 0's, 1 = mean (default),
2 = min, 3 = max. The per-rank times are kept too: their spread shows skew between ranks.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from gpulib.nccl.collectives import all_gather_single


def measure_seconds(fn: Callable[[], None], iters: int, agg_iters: int, device: torch.device) -> float:
    """Local seconds per collective: ``iters`` x ``agg_iters`` calls of ``fn`` after a barrier."""
    calls = max(1, iters) * max(1, agg_iters)
    if device.type == "cuda":
        dist.barrier(device_ids=[device.index]) if device.index is not None else dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0 / calls
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def gather_floats(value: float, device: torch.device) -> list[float]:
    """Every rank's ``value``, in rank order (float64 all_gather)."""
    world = dist.get_world_size()
    mine = torch.tensor([value], dtype=torch.float64, device=device)
    out = torch.zeros(world, dtype=torch.float64, device=device)
    all_gather_single(out, mine)
    return out.cpu().tolist()


def sum_ints(value: int, device: torch.device) -> int:
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t)
    return int(t.item())


def combine(times: list[float], mode: int = 1) -> float:
    """nccl-tests ``-a``: how per-rank times become the printed one (0 rank 0, 1 mean, 2 min, 3 max)."""
    if mode == 0:
        return times[0]
    if mode == 2:
        return min(times)
    if mode == 3:
        return max(times)
    return sum(times) / len(times)
