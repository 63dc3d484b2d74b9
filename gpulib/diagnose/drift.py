"""Job-scoped configuration diff: which nodes differ from the rest, in what, and how.

Why majority vote: in a job there is no "correct" driver written down anywhere, but there is the
version most nodes run. The nodes that differ from the majority are the ones to look at - a
node on another NCCL fails the first collective, a node on another driver or VBIOS is the one
that was serviced by hand. When no value has a majority (half the nodes on each side) the diff
says so instead of picking a side. Nodes that did not report a field are listed as unknown,
never as odd: missing evidence is not a mismatch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpulib.diagnose.node_facts import FIELDS, NodeConfig

LABELS = {
    "driver": "NVIDIA driver", "cuda": "CUDA (driver API)", "nccl": "NCCL", "torch": "torch",
    "kernel": "Linux kernel", "os": "OS", "gpu_model": "GPU model", "gpu_count": "GPU count",
    "vbios": "VBIOS", "persistence_mode": "persistence mode", "ecc_mode": "ECC mode", "mig_mode": "MIG mode",
    "ib_ports_active": "IB ports active", "ib_rate_gbps": "IB rate (Gb/s)",
}
#: Why a difference in the field matters, in the words an operator needs.
WHY = {
    "driver": "different drivers behave differently under NCCL/CUDA and one may lack a fix; align every node",
    "cuda": "the CUDA driver API follows the driver: an older one may not run the job's CUDA build",
    "nccl": "NCCL versions must match across ranks: mixed versions hang or fail at the first collective",
    "torch": "mixed torch builds change collective semantics and checkpoint formats",
    "kernel": "a node on another kernel was serviced by hand; nvidia/peermem modules are built per kernel",
    "os": "a node on another OS image was not re-imaged with the rest",
    "gpu_model": "a job expects identical GPUs; a different model is the straggler",
    "gpu_count": "a node that shows fewer GPUs has lost one (fell off the bus) or was booted without it",
    "vbios": "a VBIOS differing from its peers usually means a replaced board not brought to the fleet level",
    "persistence_mode": "without persistence mode the driver re-initialises GPUs per job: slow starts, "
                        "and NCCL timeouts at init",
    "ecc_mode": "ECC off on one node hides memory errors (and changes usable memory)",
    "mig_mode": "MIG enabled makes the GPU invisible to a full-GPU job",
    "ib_ports_active": "a node with fewer Active IB ports falls back to fewer rails or to TCP sockets",
    "ib_rate_gbps": "a port trained at a lower rate makes its node the slowest link of every ring",
}


@dataclass
class FieldDrift:
    """One field on which the nodes disagree."""

    field: str
    majority: object  # the value most nodes have (None when there is no majority)
    majority_count: int
    odd: dict[str, object]  # host -> its value
    known: int  # nodes that reported the field
    unknown: list[str] = field(default_factory=list)
    split: bool = False  # no value held by more than half of the nodes that reported it

    @property
    def label(self) -> str:
        return LABELS.get(self.field, self.field)

    def describe(self, limit: int = 6) -> str:
        """``NCCL: 2 of 64 nodes differ from 2.21.5 (62 nodes): synth-gpu-0003 2.18.3, ...``."""
        odd = sorted(self.odd.items())
        names = ", ".join(f"{h} {v}" for h, v in odd[:limit]) + (f", +{len(odd) - limit} more" if len(odd) > limit
                                                                   else "")
        if self.split:
            return f"{self.label}: no majority among {self.known} nodes; {names}"
        return (f"{self.label}: {len(odd)} of {self.known} node(s) differ from {self.majority} "
                f"({self.majority_count} nodes): {names}")

    def to_dict(self) -> dict:
        return {"field": self.field, "label": self.label, "majority": self.majority,
                "majority_count": self.majority_count, "known": self.known, "split": self.split,
                "odd": dict(sorted(self.odd.items())), "unknown": sorted(self.unknown), "why": WHY.get(self.field)}


def config_drift(configs: dict[str, NodeConfig], fields: tuple[str, ...] = FIELDS) -> list[FieldDrift]:
    """Every field on which at least one node differs from the majority, most odd nodes last."""
    out = []
    for name in fields:
        values = {host: getattr(cfg, name) for host, cfg in configs.items()}
        known = {h: v for h, v in values.items() if v is not None}
        counts = Counter(known.values())
        if len(counts) < 2:
            continue
        (top, top_n), (_second, second_n) = counts.most_common(2)
        split = top_n == second_n or top_n * 2 <= len(known)
        majority = None if split else top
        odd = {h: v for h, v in known.items() if split or v != top}
        out.append(FieldDrift(name, majority, 0 if split else top_n, odd, len(known),
                              sorted(h for h, v in values.items() if v is None), split))
    return sorted(out, key=lambda d: (len(d.odd), FIELDS.index(d.field) if d.field in FIELDS else 99))


def odd_nodes(drifts: list[FieldDrift]) -> dict[str, dict[str, object]]:
    """host -> {field: its odd value} over every drifting field (split fields included)."""
    out: dict[str, dict[str, object]] = {}
    for d in drifts:
        for host, value in d.odd.items():
            out.setdefault(host, {})[d.field] = value
    return dict(sorted(out.items()))


def diff_table(configs: dict[str, NodeConfig], drifts: list[FieldDrift]) -> list[dict]:
    """Rows for a table: one per odd node, with its value and the majority value of each drifting
    field (``"2.18.3 (majority 2.21.5)"``), so the odd cells stand out."""
    majority = {d.field: d.majority for d in drifts}
    rows = []
    for host, odd in odd_nodes(drifts).items():
        row: dict[str, object] = {"host": host}
        for d in drifts:
            value = getattr(configs[host], d.field)
            row[d.label] = (f"{value} (majority {majority[d.field]})" if d.field in odd and majority[d.field]
                            is not None else value)
        rows.append(row)
    return rows


def text_report(configs: dict[str, NodeConfig], drifts: list[FieldDrift]) -> str:
    """The ``gpulib fleet diff`` output."""
    lines = [f"CONFIG DIFF across {len(configs)} node(s)"]
    if not configs:
        return lines[0] + ": no node configuration found (no nvidia-smi, versions or ibstat files)\n"
    if not drifts:
        lines.append("  every node agrees on every reported field")
    for d in drifts:
        lines.append(f"  {d.describe()}")
        lines.append(f"      why it matters: {WHY.get(d.field, '')}")
    common = [f"{LABELS[n]} {v}" for n in FIELDS if n not in {d.field for d in drifts}
              for v in {getattr(c, n) for c in configs.values()} - {None}]
    if common:
        lines.append("  same everywhere: " + "; ".join(common))
    return "\n".join(lines) + "\n"
