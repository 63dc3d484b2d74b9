"""storage-probe engines side by side: ``fio`` (anchor) vs the pure-Python fallback, same files.

Builds a dataset in a temporary folder (default: 24 files of 16 MiB), samples it once, then runs
both engines on the same sample, alternating, ``ROUNDS`` times each (``direct`` as the file
system allows, the same threads and seconds). Prints each engine's best sequential MiB/s,
random 4 KiB IOPS and p99 latency, and the ratios python / fio (the target: within 20 %, i.e.
0.8-1.2). Usage: ``.venv/bin/python benchmarks/storage_probe.py [DIR] [--seconds S] [--threads K]``
(DIR: probe an existing folder instead of the generated one).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from gpulib.storage import fio, measure, scan

ROUNDS = 3


def build(root: Path, files: int = 24, mib: int = 16) -> Path:
    for i in range(files):
        (root / f"shard-{i:06d}.tar").write_bytes(os.urandom(mib << 20))
    return root


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", nargs="?")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    if not fio.available():
        print("fio not installed (apt-get install fio): nothing to compare against", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gpulib-bench-storage-") as scratch:
        root = Path(args.dir) if args.dir else build(Path(scratch))
        files = scan.scan(root).sample
        direct = measure.direct_supported(files[0])
        best = {"fio": [], "python": []}
        for _ in range(ROUNDS):
            best["fio"].append(fio.measure(files, args.seconds, args.threads, direct))
            best["python"].append(measure.measure(files, args.seconds, args.threads))
    print(f"{len(files)} files under {root}, {args.threads} readers, {args.seconds:g} s per run, "
          f"{'O_DIRECT' if direct else 'buffered'}, best of {ROUNDS} alternating runs")
    summary = {}
    for engine, runs in best.items():
        seq = max(r.seq_read_mib_s for r in runs)
        iops = max(r.rand_read_iops for r in runs)
        p99 = min(r.rand_lat_p99_us for r in runs)
        summary[engine] = (seq, iops, p99)
        print(f"  {engine:>6}: sequential {seq:8.1f} MiB/s  random 4 KiB {iops:9.0f} IOPS  p99 {p99:7.0f} us")
    (fs, fi, fp), (ps, pi, pp) = summary["fio"], summary["python"]
    print(f"  python / fio: sequential {ps / fs:.2f}x, IOPS {pi / fi:.2f}x, p99 latency {pp / fp:.2f}x "
          "(target 0.8-1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
