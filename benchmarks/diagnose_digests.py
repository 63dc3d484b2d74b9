"""``gpulib diagnose`` over 10,240 SYNTHETIC nodes whose bundles carry per-node digests (map/reduce).

The map step runs on every node in a real incident (``gpulib collect --digest`` inside the
fan-out); here it runs for every simulated bundle in a process pool (2 cores), and its time per
node is printed. What is timed against the target is the reduce step: one fresh
``gpulib diagnose INCIDENT --format json`` process that reads the digests plus the raw job log
and joins them (wall, CPU, peak RSS, root cause found). Target (DESIGN.md): < 30 s, memory flat.

Memory is measured three ways, each an incident generated and reduced in the same run:

* the incident as simulated (40 benign kernel lines a node, a progress line every 19 s);
* **the same nodes with longer logs** (8x the kernel lines, 76x the progress lines): the peak
  must stay flat in the size of the logs (DESIGN.md) - a digest holds what a node's logs *say*,
  not their lines, and the job log is streamed;
* **a tenth of the nodes** (``--no-small`` skips it): how the peak grows with the node count. It
  cannot be flat there: the answer lists every input file (80,000 at 10,240 nodes) and the rank
  map places every rank (81,920); what is held per node and per rank is printed.

Generated in temp dirs (~1 GB each) and removed afterwards.

Usage: ``.venv/bin/python benchmarks/diagnose_digests.py [NODES] [--no-longer] [--no-small]`` (default 10240).
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


def reduce_once(nodes: int, **logs) -> dict:
    """Simulate ``nodes`` bundles, write their digests (the map), time the reduce."""
    with tempfile.TemporaryDirectory(prefix="gpulib-digests-") as tmp:
        folder = Path(tmp) / "incident"
        started = time.perf_counter()
        incident = simulate_incident(folder, nodes, "xid79", seed=nodes, drift_nodes=max(1, nodes // 100), **logs)
        generated = time.perf_counter() - started
        bundles = sorted(p for p in folder.iterdir() if (p / "manifest.json").is_file())
        started = time.perf_counter()
        with multiprocessing.Pool(os.cpu_count() or 1) as pool:
            pool.map(node_digest.write, bundles, chunksize=64)
        mapped = time.perf_counter() - started
        digest_kib = sum((b / "digest.json").stat().st_size for b in bundles) / len(bundles) / 1024
        result = measure([folder])
    result.update(nodes=nodes, mib=incident.bytes_written / 2**20, generated_s=generated, mapped_s=mapped,
                  digest_kib=digest_kib, ok=found(result["diagnosis"], incident), expected=incident.host)
    return result


def show(label: str, r: dict) -> None:
    cpus = os.cpu_count() or 1
    print(f"{label}: {r['nodes']:,} nodes x 8 GPUs, {r['mib']:.0f} MiB of evidence (generated in {r['generated_s']:.0f} s)")
    print(f"  map: {1000 * r['mapped_s'] * cpus / r['nodes']:.1f} ms a node (wall x {cpus} processes), "
          f"digest {r['digest_kib']:.1f} KiB a node")
    print(f"  reduce: gpulib diagnose {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak RSS "
          f"{r['peak_rss_mib']:.0f} MiB, root cause {'found' if r['ok'] else 'NOT found, expected ' + r['expected']}")


def main(nodes: int, longer: bool, small: bool) -> int:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    base = reduce_once(nodes)
    show("SYNTHETIC incident", base)
    runs = [base]
    if longer:
        r = reduce_once(nodes, noise_lines=320, progress_every_s=0.25)
        show("same nodes, 8x kernel lines and 76x progress lines", r)
        print(f"memory vs log size: {r['peak_rss_mib']:.0f} MiB with {r['mib']:.0f} MiB of evidence, "
              f"{base['peak_rss_mib']:.0f} MiB with {base['mib']:.0f} MiB (ratio {r['peak_rss_mib'] / base['peak_rss_mib']:.2f})")
        runs.append(r)
    if small and nodes >= 20:
        r = reduce_once(nodes // 10)
        show("a tenth of the nodes", r)
        per_node = (base["peak_rss_mib"] - r["peak_rss_mib"]) * 1024 / (base["nodes"] - r["nodes"])
        print(f"memory vs node count: {base['peak_rss_mib']:.0f} MiB at {base['nodes']:,} nodes, {r['peak_rss_mib']:.0f} MiB "
              f"at {r['nodes']:,} (ratio {base['peak_rss_mib'] / r['peak_rss_mib']:.2f} for 10x the nodes; "
              f"{per_node:.1f} KiB a node with its 8 ranks)")
        runs.append(r)
    print(f"{nodes:,} nodes with digests: {base['wall_s']:.1f} s wall, {base['cpu_s']:.1f} s CPU (target < 30 s)")
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sys.exit(main(int(args[0]) if args else 10240, "--no-longer" not in sys.argv, "--no-small" not in sys.argv))
