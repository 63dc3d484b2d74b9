"""The tester's timing against a bare torch.distributed loop, in the same torchrun job.

Anchor: ``for _ in range(n): dist.all_reduce(t)`` timed with a barrier and ``perf_counter`` (CUDA
synchronize on GPUs) - what anyone would write by hand. gpulib's number for the same size comes
from its own path (Case buffers, pre-call hook, CUDA events / perf_counter, rank-time combination).
A ratio near 1.0 means the tester adds no measurement overhead of its own; on a noisy shared CPU
the spread between repeats is the noise floor.

    .venv/bin/python benchmarks/nccl_busbw.py [NPROC] [MAXBYTES]   # starts torchrun itself
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

REPEATS = 5


def worker(max_bytes: int) -> None:
    import torch
    import torch.distributed as dist

    from gpulib.nccl.bandwidth import busbw_gbps
    from gpulib.nccl.collectives import Case
    from gpulib.nccl.sizes import counts, dtype, size_sweep
    from gpulib.nccl.timing import combine, gather_floats, measure_seconds

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    iters, warmup = 20, 5
    if rank == 0:
        print(f"backend={backend} nranks={n} iters={iters} best of {REPEATS}; busbw GB/s: bare loop (anchor) vs gpulib, "
              f"ratio gpulib/anchor")
    for size in size_sweep(64 << 10, max_bytes, 4):
        c = counts("all_reduce", size, 4, n)
        bare = torch.zeros(c.count, device=device)
        case = Case("all_reduce", c, dtype("float"), "sum", 0, rank, n, device)
        for _ in range(warmup):
            dist.all_reduce(bare)
            case.run(False)

        def bare_seconds(bare=bare) -> float:
            dist.barrier()
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(bare)
            if device.type == "cuda":
                torch.cuda.synchronize()
            return (time.perf_counter() - t0) / iters

        anchors, ours_all = [], []
        for _ in range(REPEATS):  # alternate, keep the best of each: the noise floor is the same for both
            anchors.append(combine(gather_floats(bare_seconds(), device)))
            ours_all.append(combine(gather_floats(measure_seconds(lambda c=case: c.run(False), iters, 1, device), device)))
        anchor, ours = min(anchors), min(ours_all)
        if rank == 0:
            a, g = busbw_gbps("all_reduce", n, c.size_bytes, anchor), busbw_gbps("all_reduce", n, c.size_bytes, ours)
            print(f"{c.size_bytes:>12d} B  anchor {a:9.4f}  gpulib {g:9.4f}  ratio {g / a:5.2f}", flush=True)
    dist.destroy_process_group()


def main() -> int:
    if "RANK" in os.environ:
        worker(int(os.environ.get("GPULIB_BENCH_MAX_BYTES", 16 << 20)))
        return 0
    nproc = sys.argv[1] if len(sys.argv) > 1 else "2"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GPULIB_BENCH_MAX_BYTES": sys.argv[2] if len(sys.argv) > 2 else str(16 << 20)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", nproc, "--master-addr", "127.0.0.1",
           "--master-port", str(port), os.path.abspath(__file__)]
    return subprocess.run(cmd, env=env, timeout=600).returncode


if __name__ == "__main__":
    raise SystemExit(main())
