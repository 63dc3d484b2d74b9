"""Loading and matching the busbw expectations in ``thresholds.yaml`` (data, not code)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from gpulib.errors import InputError
from gpulib.nccl.sizes import parse_size
from gpulib.parsers.base import read_text

DEFAULT_FILE = "thresholds.yaml"


@dataclass(frozen=True)
class Threshold:
    """One expectation: ``min_busbw_gbps`` for ``collective`` on ``gpus_per_node`` x ``gpu`` over ``nodes``."""

    id: str
    min_busbw_gbps: float
    source: str
    gpu: str | None = None
    backend: str | None = None
    collective: str = "all_reduce"
    gpus_per_node: int | None = None
    nodes: int | None = None
    reference_bytes: int | None = None


@dataclass(frozen=True)
class LatencyRule:
    small_message_max_bytes: int
    max_latency_us: float | None
    backends: tuple[str, ...]


@dataclass(frozen=True)
class ThresholdTable:
    entries: tuple[Threshold, ...]
    warn_margin: float
    default_reference_bytes: int
    latency: LatencyRule
    path: str

    def match(self, *, gpu_name: str, backend: str, collective: str, gpus_per_node: int, nodes: int) -> Threshold | None:
        name = gpu_name.lower()
        for t in self.entries:
            if t.gpu is not None and t.gpu.lower() not in name:
                continue
            if t.backend not in (None, backend) or t.collective != collective:
                continue
            if t.gpus_per_node not in (None, gpus_per_node) or t.nodes not in (None, nodes):
                continue
            return t
        return None


def load(path: str | Path | None = None) -> ThresholdTable:
    """Read the packaged table, or ``path``; a bad file raises :class:`InputError` naming it."""
    if path is None:
        text = resources.files("gpulib.nccl").joinpath(DEFAULT_FILE).read_text()
        where = f"gpulib/nccl/{DEFAULT_FILE}"
    else:
        where = str(path)
        text, problems = read_text(path)
        if problems and not text:  # missing, no permission, binary junk
            raise InputError(f"cannot read thresholds file: {problems[0].message}", path=where)
    try:
        data = yaml.safe_load(text) or {}
        latency = data.get("latency") or {}
        entries = tuple(
            Threshold(
                id=str(e["id"]), min_busbw_gbps=float(e["min_busbw_gbps"]), source=str(e.get("source", where)),
                gpu=e.get("gpu"), backend=e.get("backend"), collective=e.get("collective", "all_reduce"),
                gpus_per_node=e.get("gpus_per_node"), nodes=e.get("nodes"),
                reference_bytes=parse_size(e["reference_bytes"]) if e.get("reference_bytes") else None,
            )
            for e in data.get("entries") or []
        )
        return ThresholdTable(
            entries=entries,
            warn_margin=float(data.get("warn_margin", 0.0)),
            default_reference_bytes=parse_size(data.get("default_reference_bytes", "1G")),
            latency=LatencyRule(
                small_message_max_bytes=parse_size(latency.get("small_message_max_bytes", "64K")),
                max_latency_us=latency.get("max_latency_us", 100),
                backends=tuple(latency.get("backends", ["nccl"])),
            ),
            path=where,
        )
    except (yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"thresholds file is malformed: {exc}", path=where,
                         hint="see gpulib/nccl/thresholds.yaml for the expected shape") from exc
