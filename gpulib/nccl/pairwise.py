"""Run the pairwise sendrecv rounds of :mod:`gpulib.nccl.slowlink` on the live process group."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from gpulib.nccl.report import DeviceInfo
from gpulib.nccl.slowlink import PairResult, SlowLinkReport, localize, round_robin
from gpulib.nccl.timing import gather_floats, measure_seconds
from gpulib.nccl.watchdog import Watchdog


def schedule(mode: str, devices: list[DeviceInfo]) -> list[list[tuple[int, int, int, int]]]:
    """Rounds of ``(endpoint_a, endpoint_b, rank_a, rank_b)``; endpoints are ranks or node ranks."""
    if mode == "ranks":
        return [[(a, b, a, b) for a, b in rnd] for rnd in round_robin([d.rank for d in devices])]
    lanes: dict[int, list[int]] = {}
    for d in sorted(devices, key=lambda d: (d.node, d.local_rank)):
        lanes.setdefault(d.node, []).append(d.rank)
    rounds = []
    for rnd in round_robin(sorted(lanes)):
        rounds.append([(a, b, ra, rb) for a, b in rnd for ra, rb in zip(lanes[a], lanes[b], strict=False)])
    return rounds


def run_pairwise(mode: str, devices: list[DeviceInfo], size_bytes: int, iters: int, warmup: int,
                 device: torch.device, watchdog: Watchdog, before_call: Callable[[], None],
                 slow_ratio: float) -> SlowLinkReport:
    """Every rank runs every round (idle ranks time a no-op), so all ranks build the same report."""
    rank = dist.get_rank()
    count = max(1, size_bytes // 4)
    send = torch.full((count,), float(rank + 1), device=device)
    recv = torch.zeros(count, device=device)
    results: dict[tuple[int, int], list[tuple[float, int]]] = {}
    for k, rnd in enumerate(schedule(mode, devices)):
        partner = next((rb if ra == rank else ra for _, _, ra, rb in rnd if rank in (ra, rb)), None)

        def exchange(peer: int | None = partner) -> None:
            if peer is None:
                return
            before_call()
            ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        watchdog.step(f"pairwise {mode} round {k + 1}")
        for _ in range(warmup):
            exchange()
        times = gather_floats(measure_seconds(exchange, iters, 1, device), device)
        watchdog.done()
        for a, b, ra, rb in rnd:
            results.setdefault((a, b), []).append((max(times[ra], times[rb]), ra))
    by_rank = {d.rank: d for d in devices}
    pairs = []
    for (a, b), lanes in sorted(results.items()):
        seconds, lane_rank = max(lanes)
        if mode == "ranks":
            da, db = by_rank[a], by_rank[b]
            where = "intra-node" if da.node == db.node else "inter-node"
            label = f"{where} {da.host}:dev{da.device} <-> {db.host}:dev{db.device}"
            slowest_lane = None
        else:
            label = f"node {a} <-> node {b}, slowest lane {by_rank[lane_rank].where}"
            slowest_lane = by_rank[lane_rank].local_rank
        pairs.append(PairResult(a, b, size_bytes / 1e9 / seconds if seconds > 0 else 0.0, seconds * 1e6,
                                label, slowest_lane))
    if mode == "ranks":
        names = {d.rank: d.where for d in devices}
    else:
        names = {d.node: f"node {d.node} ({d.host})" for d in devices}
    return localize(pairs, mode=mode, size_bytes=count * 4, names=names, slow_ratio=slow_ratio)
