"""The tester under torchrun: one process per rank, results printed and written by rank 0.

Flow (every rank runs it; collective calls must match across ranks):
init the process group -> gather each rank's host/GPU -> for each size and placement: warm up,
time ``-n`` calls, gather per-rank times, check correctness ``-c`` times -> verdict (identical on
every rank, since every rank holds the gathered numbers) -> optional pairwise rounds -> rank 0
prints the nccl-tests table, writes ``--json`` and ``--bundle``.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from gpulib import __version__
from gpulib.errors import InputError
from gpulib.evidence.bundle import BundleWriter, CollectorRecord
from gpulib.nccl import nics, thresholds
from gpulib.nccl import status as run_status
from gpulib.nccl.arguments import validate_args
from gpulib.nccl.bandwidth import algbw_gbps, bus_factor
from gpulib.nccl.collectives import REDUCING, ROOTED, Case, has_in_place, sleep_before
from gpulib.nccl.injection import RAISE_RANK, Injections
from gpulib.nccl.pairwise import run_pairwise
from gpulib.nccl.report import (
    DeviceInfo,
    Placement,
    Row,
    RunConfig,
    TestResult,
    footer_lines,
    header_lines,
    render,
    row_line,
)
from gpulib.nccl.sizes import counts, dtype, size_sweep
from gpulib.nccl.timing import combine, gather_floats, measure_seconds, sum_ints
from gpulib.nccl.verdict import RunShape, judge
from gpulib.nccl.watchdog import Watchdog


def _nccl_version(backend: str) -> str:
    if backend != "nccl" or not torch.cuda.is_available():
        return "none"
    try:
        return ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:  # torch built without NCCL, or ROCm's RCCL under the same name
        return "unknown"


def _device_info(rank: int, device: torch.device) -> dict:
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    info = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "local_rank": local_rank,
            "node": int(os.environ.get("GROUP_RANK", 0))}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        pci = None
        if hasattr(props, "pci_bus_id"):
            pci = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        return {**info, "device": device.index, "pci_bus_id": pci, "name": props.name}
    return {**info, "device": local_rank, "pci_bus_id": None, "name": platform.processor() or "CPU"}


def _select_device(backend: str) -> torch.device:
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise InputError("backend nccl needs CUDA GPUs, and torch sees none",
                             hint="run on a GPU node, or use --backend gloo to test on CPU")
        index = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def _check_args(args, backend: str) -> None:
    """Everything that can be wrong with the command line fails here, before any rank waits for another."""
    validate_args(args)
    if args.collective == "sendrecv" and os.environ.get("WORLD_SIZE") == "1" and backend == "gloo":
        raise InputError("sendrecv on gloo needs at least 2 ranks (gloo cannot send to itself)",
                         hint="start torchrun with --nproc-per-node 2")
    if args.root >= int(os.environ.get("WORLD_SIZE", "1")) or args.root < 0:
        raise InputError(f"root rank {args.root} does not exist in a job of {os.environ.get('WORLD_SIZE', 1)} ranks",
                         hint="-r takes a rank number from 0 to nranks-1")
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise InputError("not started by torchrun (RANK/WORLD_SIZE unset)",
                         hint="torchrun --nproc-per-node N -m gpulib.nccl ..., or `gpulib nccl-test` which starts torchrun")


def _emit(result: TestResult, args, started: float) -> None:
    """Rank 0: footer, JSON, bundle, and the verdict for the launcher's exit code."""
    print("\n".join(footer_lines(result)), flush=True)
    run_status.record(result.verdict.status, result.verdict.reason)
    data = result.to_dict()
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    if args.bundle:
        name = result.config.collective
        with BundleWriter(args.bundle, command_line=list(sys.argv)) as bundle:
            files = [bundle.write_text(f"nccl/{name}_perf.txt", render(result)), bundle.write_json(f"nccl/{name}.json", data)]
            status = ("timeout", result.failure) if result.failure else ("ok", None)
            bundle.record(CollectorRecord("nccl-test", status[0], status[1], round(time.monotonic() - started, 3), files))


def run(args) -> int:
    started = time.monotonic()
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    _check_args(args, backend)
    inj = Injections.from_env()
    device = _select_device(backend)
    dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout + 60))
    try:
        return _run(args, backend, device, inj, started)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _measure(case: Case, in_place: bool, args, device: torch.device, inj: Injections, watchdog: Watchdog) -> Placement:
    """One placement of one size: warm up, time, gather every rank's time, check correctness."""
    if inj.hang_rank == case.rank:
        time.sleep(24 * 3600)  # test injection: this rank never arrives
    if inj.raise_rank == case.rank:  # test injection: the call fails on this rank (a crashed run, not a verdict)
        raise RuntimeError(f"injected failure ({RAISE_RANK}={case.rank}): the collective call raised")
    watchdog.step(f"{case.collective} {case.counts.size_bytes} B {'in-place' if in_place else 'out-of-place'}")
    for _ in range(args.warmup_iters):
        case.run(in_place)
    times = gather_floats(measure_seconds(lambda: case.run(in_place), args.iters, args.agg_iters, device), device)
    wrong = None
    if args.check:
        wrong = 0
        for _ in range(args.check):  # every rank sees the same sum, so all stop at the same repetition
            wrong += sum_ints(case.check(in_place, corrupt=inj.wrong_rank == case.rank), device)
            if wrong:
                break
    watchdog.done()
    seconds = combine(times, args.average)
    alg = algbw_gbps(case.counts.size_bytes, seconds)
    return Placement(seconds * 1e6, alg, alg * bus_factor(case.collective, case.nranks), wrong, [t * 1e6 for t in times])


def _run(args, backend: str, device: torch.device, inj: Injections, started: float) -> int:
    rank, world = dist.get_rank(), dist.get_world_size()
    gathered: list[dict | None] = [None] * world
    dist.all_gather_object(gathered, _device_info(rank, device))
    devices = [DeviceInfo(**d) for d in gathered]
    nodes = len({d.node for d in devices})
    dt = dtype(args.datatype)
    sizes = size_sweep(args.minbytes, args.maxbytes, args.stepfactor, args.stepbytes)
    config = RunConfig(args.collective, backend, dt.name, args.op, args.root, args.minbytes, args.maxbytes,
                       args.stepfactor, args.stepbytes, args.iters, args.warmup_iters, args.agg_iters, args.check,
                       args.average, world, nodes, args.timeout)
    tool = {"gpulib": __version__, "torch": torch.__version__, "nccl": _nccl_version(backend), "backend": backend}
    result = TestResult(tool, config, devices, injections=inj.active())
    table = thresholds.load(args.thresholds)
    gpus_per_node = max(sum(d.node == n for d in devices) for n in {d.node for d in devices})
    shape = RunShape(args.collective, backend, devices[0].name if device.type == "cuda" else "cpu", gpus_per_node, nodes,
                     world, nics.from_flags(args.nic_gbps, args.nics))

    def verdict_now(failure: str | None = None):
        return judge(result.rows, shape, table, wrong_total=result.wrong_total, failure=failure,
                     expect_busbw=args.expect_busbw, max_latency_us=args.max_latency_us)

    def on_timeout(message: str, reporter: bool) -> None:
        run_status.record("FAIL", message)  # every rank that sees the hang: the first one's words are kept
        if reporter:
            result.failure = message
            result.verdict = verdict_now(message)
            _emit(result, args, started)

    watchdog = Watchdog(dist.distributed_c10d._get_default_store(), rank, world, args.timeout, on_timeout)
    if rank == 0:
        print("\n".join(header_lines(result)), flush=True)
    delay = sleep_before(inj.delay_ms / 1000) if inj.delay_rank == rank else (lambda: None)
    for size in sizes:
        c = counts(args.collective, size, dt.nbytes, world)
        case = Case(args.collective, c, dt, args.op, args.root, rank, world, device, before_call=delay)
        oop, ip = (_measure(case, in_place, args, device, inj, watchdog) if not in_place or has_in_place(args.collective)
                   else None for in_place in (False, True))
        row = Row(c.size_bytes, c.count, dt.name, args.op if args.collective in REDUCING else "none",
                  args.root if args.collective in ROOTED else -1, oop, ip)
        result.rows.append(row)
        if rank == 0:
            print(row_line(row), flush=True)
        case = None  # free this size's buffers before the next size allocates (16 GiB rows)
    result.verdict = verdict_now()
    bandwidth = next(ch for ch in result.verdict.checks if ch.name == "busbw")
    mode = args.pairwise
    if mode == "auto":
        mode = ("nodes" if nodes > 1 else "ranks") if bandwidth.status in ("WARN", "FAIL") else "off"
    if mode != "off" and world > 1:
        report = run_pairwise(mode, devices, args.pairwise_bytes or max(sizes), args.iters, args.warmup_iters,
                              device, watchdog, delay, args.slow_ratio)
        result.pairwise = report.to_dict()
        if report.suspect_labels and result.verdict.status != "PASS":
            result.verdict.reason += f"; pairwise suspect: {'; '.join(report.suspect_labels)}"
    if rank == 0:
        _emit(result, args, started)
    dist.barrier()
    watchdog.close()
    return run_status.verdict_exit(result.verdict.status)
