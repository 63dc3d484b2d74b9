"""``python -m gpulib.collect.smoke BUNDLE``: is this bundle what a real GPU node must produce?

Used by ``scripts/gpu-smoke.sh`` once on a real GPU machine: on a GPU host, NVML, the sampler
and nvidia-smi must all have worked, every GPU must be readable, and the samples must cover
every GPU. A bundle from a host without GPUs fails with the collectors' own reasons, so the
output says what is wrong with the machine (no driver, version mismatch, lost GPU).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from gpulib import exit_codes
from gpulib.collect.capture import summary_lines
from gpulib.evidence.bundle import Bundle, verify

MUST_BE_OK = ("nvml", "nvml-samples", "nvidia-smi-q-xml", "nvidia-smi-q")


def problems(root: str | Path) -> list[str]:
    """Everything that keeps ``root`` from being a complete capture of a healthy GPU host."""
    bundle = Bundle.open(root)
    found = [f"bundle modified: {line.strip()}" for line in verify(root).lines()[1:]]
    records = {c.name: c for c in bundle.collectors}
    for name in MUST_BE_OK:
        record = records.get(name)
        if record is None:
            found.append(f"{name}: not run (sampling needs --sample-seconds)")
        elif record.status != "ok":
            found.append(f"{name}: {record.status}: {record.reason}")
    snapshot = bundle.root / "nvml" / "snapshot.json"
    if snapshot.is_file():
        doc = json.loads(snapshot.read_text())
        if not doc.get("gpu_count"):
            found.append("NVML sees no GPU")
        found += [f"GPU {g['index']} unreadable: {g.get('lost_reason')}" for g in doc.get("gpus", []) if g.get("lost")]
        samples = bundle.root / "nvml" / "samples.csv"
        if samples.is_file() and doc.get("gpu_count"):
            with open(samples, newline="") as handle:
                sampled = {row["index"] for row in csv.DictReader(handle) if row.get("temp_c")}
            missing = sorted(set(map(str, range(doc["gpu_count"]))) - sampled)
            if missing:
                found.append(f"no temperature samples for GPU(s) {', '.join(missing)}")
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gpulib.collect.smoke BUNDLE", file=sys.stderr)
        return exit_codes.USAGE
    print("\n".join(summary_lines(args[0])))
    found = problems(args[0])
    for line in found:
        print(f"SMOKE FAIL: {line}")
    print("SMOKE OK: NVML, sampling and nvidia-smi captured every GPU" if not found else f"SMOKE: {len(found)} problem(s)")
    return exit_codes.SOFT if found else exit_codes.OK


if __name__ == "__main__":
    raise SystemExit(main())
