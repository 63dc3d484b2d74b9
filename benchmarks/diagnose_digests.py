"""``gpulib diagnose`` over 10,240 SYNTHETIC nodes whose bundles carry per-node digests (map/reduce).

The map step runs on every node in a real incident (``gpulib collect --digest`` inside the
fan-out); here it runs for every simulated bundle in a process pool (2 cores), and its time per
node is printed. What is timed against the target is the reduce step: one fresh
``gpulib diagnose INCIDENT --format json`` process that reads 10,240 digests plus the raw job log
and joins them (wall, CPU, peak RSS, root cause found). Target (DESIGN.md): < 30 s, memory flat.
Generated in a temp dir (~1 GB) and removed afterwards.

Usage: ``.venv/bin/python benchmarks/diagnose_digests.py [NODES]`` (default 10240).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

from diagnose_scale import found, measure

from gpulib.diagnose import node_digest
from gpulib.fleet.simulate import simulate_incident


def main(nodes: int) -> int:
    with tempfile.TemporaryDirectory(prefix="gpulib-digests-") as tmp:
        folder = Path(tmp) / "incident"
        started = time.perf_counter()
        incident = simulate_incident(folder, nodes, "xid79", seed=nodes, drift_nodes=max(1, nodes // 100))
        generated = time.perf_counter() - started
        bundles = sorted(p for p in folder.iterdir() if (p / "manifest.json").is_file())
        started = time.perf_counter()
        with multiprocessing.Pool(os.cpu_count() or 1) as pool:
            pool.map(node_digest.write, bundles, chunksize=64)
        mapped = time.perf_counter() - started
        digest_kib = sum((b / "digest.json").stat().st_size for b in bundles) / len(bundles) / 1024
        result = measure([folder])
    ok = found(result["diagnosis"], incident)
    print(f"SYNTHETIC incident: {nodes:,} nodes x 8 GPUs, {incident.bytes_written / 2**20:.0f} MiB of evidence "
          f"(generated in {generated:.0f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"  map: {1000 * mapped * (os.cpu_count() or 1) / nodes:.1f} ms a node (wall x {os.cpu_count()} processes), "
          f"digest {digest_kib:.0f} KiB a node")
    print(f"  reduce: gpulib diagnose {result['wall_s']:.1f} s wall, {result['cpu_s']:.1f} s CPU, peak RSS "
          f"{result['peak_rss_mib']:.0f} MiB, root cause {'found' if ok else 'NOT found, expected ' + incident.host}")
    print(f"{nodes:,} nodes with digests: {result['wall_s']:.1f} s wall, {result['cpu_s']:.1f} s CPU (target < 30 s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10240))
