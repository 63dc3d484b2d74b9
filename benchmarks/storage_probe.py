"""storage-probe engines side by side: ``fio`` (anchor) vs the pure-Python fallback, same plan.

Builds one dataset folder in a temporary directory (deleted after): ``large/`` holds a few large
files (default 6 x 64 MiB), ``small/`` many small ones (default 4,000 of 2-200 KiB, like JPEGs),
and probes ``large/``, ``small/`` and the whole folder. For each, the scan samples the files once
and :func:`measure.make_plan` fixes what is read (files, block sizes, readers, cache policy); then
fio and the Python engine carry out that same plan, alternating ABBA, ``--rounds`` times each
(default 8 x 4 s). Prints, per dataset and cache policy, each engine's median sequential MiB/s,
random 4 KiB IOPS and latency percentiles p50/p95/p99, the ratio python / fio of the medians,
the median and quartiles of the per-round (paired) ratios, and "ok" when both ratios are within
20 % (0.8-1.25). ``--cache buffered`` forces the buffered policy (each file's cache dropped at
every open) where O_DIRECT would work, to measure that fallback too; default: both policies.
The disk and the CPUs are shared: the load average is printed with each block.

Usage: ``.venv/bin/python benchmarks/storage_probe.py [DIR ...] [--seconds S] [--threads K]
[--rounds N] [--cache direct|buffered|both] [--tmp PARENT]`` (DIR: probe existing folders instead).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

from gpulib.storage import fio, measure, scan

METRICS = (("seq_read_mib_s", "sequential MiB/s"), ("rand_read_iops", "random IOPS"), ("rand_lat_p50_us", "p50 us"),
           ("rand_lat_p95_us", "p95 us"), ("rand_lat_p99_us", "p99 us"))
LOW, HIGH = 0.8, 1.25  # the target: python within 20 % of fio (either way: 1 / 0.8 = 1.25)


def build(root: Path, large: int = 6, large_mib: int = 64, small: int = 4000) -> list[Path]:
    rng = random.Random(17)
    (root / "large").mkdir()
    for i in range(large):
        (root / "large" / f"shard-{i:06d}.tar").write_bytes(os.urandom(large_mib << 20))
    for i in range(small):
        part = root / "small" / f"part-{i // 500:03d}"
        part.mkdir(parents=True, exist_ok=True)
        (part / f"{i:07d}.jpg").write_bytes(os.urandom(rng.randint(2000, 200_000)))
    os.sync()  # O_DIRECT reads of dirty pages would wait for their write-back
    return [root / "large", root / "small", root]


def compare(root: Path, args, direct: bool | None) -> None:
    files = scan.scan(root).sample
    plan = measure.make_plan(files, args.threads)
    if direct is not None:
        plan = dataclasses.replace(plan, direct=direct and plan.direct)
    runs: dict[str, list[measure.IoMeasurement]] = {"fio": [], "python": []}
    engines = [("fio", lambda: fio.measure(files, args.seconds, args.threads, plan)),
               ("python", lambda: measure.measure(files, args.seconds, args.threads, plan=plan))]
    for i in range(args.rounds):  # ABBA: a drift in the machine's load or the disk's cache favours neither
        for name, run in engines if i % 4 in (0, 3) else engines[::-1]:
            runs[name].append(run())
    last = runs["python"][-1]
    print(f"{root}: {len(files)} sampled files, {plan.cache}, {args.threads} readers, {args.seconds:g} s per run, "
          f"{args.rounds} alternating rounds; sequential {plan.seq_block >> 10} KiB reads over {last.seq_files} files "
          f"({plan.pass_bytes / (1 << 20):,.1f} MiB a pass), random 4 KiB over {last.rand_files} files")
    for key, label in METRICS:
        fio_values = [getattr(r, key) for r in runs["fio"]]
        py_values = [getattr(r, key) for r in runs["python"]]
        paired = sorted(p / f for p, f in zip(py_values, fio_values, strict=True) if f)
        f_med, p_med = statistics.median(fio_values), statistics.median(py_values)
        quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 3
        within = all(LOW <= r <= HIGH for r in (p_med / f_med if f_med else 0, statistics.median(paired)))
        print(f"  {label:>16}: fio {f_med:10,.1f}  python {p_med:10,.1f}  ratio of medians {p_med / f_med if f_med else 0:5.2f}x"
              f"  paired rounds: median {statistics.median(paired):.2f}x, quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f},"
              f" all {paired[0]:.2f}-{paired[-1]:.2f}  {'ok' if within else 'OUTSIDE 0.8-1.25'}")
    passes = [r.seq_passes for r in runs["fio"]], [r.seq_passes for r in runs["python"]]
    print(f"  {'passes':>16}: fio {statistics.median(passes[0]):10,.1f}  python {statistics.median(passes[1]):10,.1f}"
          f"  (load average {os.getloadavg()[0]:.1f})")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dirs", nargs="*")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--cache", choices=("direct", "buffered", "both"), default="both")
    parser.add_argument("--tmp", help="parent folder of the generated dataset (default: the system's temp folder)")
    args = parser.parse_args()
    if not fio.available():
        print("fio not installed (apt-get install fio): nothing to compare against", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gpulib-bench-storage-", dir=args.tmp) as scratch:
        roots = [Path(d) for d in args.dirs] or build(Path(scratch))
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        for direct in {"direct": [True], "buffered": [False], "both": [True, False]}[args.cache]:
            for root in roots:
                compare(root, args, direct)
        print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
