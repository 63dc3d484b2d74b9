"""One colour and one name per GPU, and one colour per kind of event, in every figure.

Why: plotly cycles ten colours over the traces of *each* figure, so in "temperature, SM clock
and power" (three traces per GPU) the throttled GPU 3's clock line took GPU 0's legend colour and
its power line GPU 7's, and the memory chart gave it yet another. An engineer matches colours
across panels; they must mean the same GPU everywhere. Likewise a picker that leaves one rank
must not turn its red ``nccl_error`` dots blue.

So colours are *assigned*, never cycled:

- a GPU is keyed by host and PCI bus id (it survives renumbering: after an Xid 79 nvidia-smi
  numbers the survivors anew, so "GPU 2" can name two GPUs), else its UUID, else its index;
  :class:`GpuPalette` gives each key of the sorted set of GPUs in the evidence a fixed colour and
  the name ``0000:4f:00.0 (GPU 2)`` (:func:`gpulib.findings.gpu_name`, the index as seen when it
  was captured), and knows which GPUs were lost and when;
- a kind of event (``nccl_error``, ``kernel log``, ...) has a fixed colour
  (:data:`KIND_COLORS`, else one derived from its name, the same in every run).

Every figure builder takes the palette, and :class:`~gpulib.notebook.widgets.FigurePanel` builds
it once from the *unfiltered* data, so a picker changes what is drawn, never its colours.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from gpulib.findings import gpu_name
from gpulib.identity import normalize_pci

#: Distinct colours for GPUs (plotly's Dark24, whose neighbours differ strongly); a 25th GPU
#: reuses the first colour, its name still tells it apart.
GPU_COLORS = ["#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86",
              "#EB663B", "#511CFB", "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE",
              "#862A16", "#A777F1", "#620042", "#1616A7", "#DA60CA", "#6C4516", "#0D2A63", "#AF0038"]
#: Fixed colours of event kinds and sources: errors red, waiting orange, progress neutral.
KIND_COLORS = {
    "nccl_error": "#d62728", "cuda_error": "#b00020", "device_assert": "#b00020", "cuda_oom": "#9c27b0",
    "ib_completion_error": "#e6550d", "socket_error": "#fd8d3c", "exception": "#8c2d04",
    "watchdog_timeout": "#ff9f1c", "watchdog_stuck": "#ffbf69", "watchdog_exception": "#f4a261",
    "nccl_warn": "#e9c46a", "store_error": "#bc6c25", "dataloader_error": "#6a4c93",
    "process_failed": "#457b9d", "child_failed": "#1d3557", "node_failure": "#000000",
    "kernel log": "#d62728", "training log": "#1f77b4", "nvidia-smi": "#2ca02c", "NVML": "#17becf",
    "launcher": "#7f7f7f", "other": "#8c564b", "root cause": "#b00020",
    "out-of-place": "#1f77b4", "in-place": "#ff7f0e", "expected (model)": "#7f7f7f",
}
_SPARE = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31",
          "#843c39", "#7b4173", "#3182bd", "#31a354"]


def kind_color(kind: object) -> str:
    """The colour of an event kind or source: fixed for known kinds, else derived from the name
    (a checksum, not Python's per-process ``hash``), so it is the same in every figure and run."""
    name = str(kind)
    return KIND_COLORS.get(name) or _SPARE[zlib.crc32(name.encode()) % len(_SPARE)]


def rank_color(rank: object) -> str:
    """A rank's colour: fixed by its number, so picking a rank does not recolour it."""
    try:
        return GPU_COLORS[int(rank) % len(GPU_COLORS)]
    except (TypeError, ValueError):
        return kind_color(rank)


def _true(value: object) -> bool:
    """True for ``True`` and numpy's ``True`` (a ``lost`` column), never for NaN or None."""
    return type(value).__name__ in ("bool", "bool_") and bool(value)


def _row_index(row: dict) -> int | None:
    """The GPU index of a table row: ``gpu_index``, else a numeric ``gpu`` column."""
    index = _index(row.get("gpu_index"))
    if index is None and isinstance(row.get("gpu"), str) and row["gpu"].isdigit():
        index = int(row["gpu"])
    return index


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _index(value: object) -> int | None:
    try:
        return None if value is None or pd.isna(value) else int(value)
    except (TypeError, ValueError):
        return None


@dataclass
class GpuPalette:
    """GPU key -> colour, name and (for lost GPUs) the time it was lost."""

    colors: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # with the host when the evidence has several
    short: dict[str, str] = field(default_factory=dict)  # without the host (tables have a host column)
    lost: dict[str, pd.Timestamp | None] = field(default_factory=dict)
    #: (host, index as captured) -> key, for rows that carry no PCI id
    by_index: dict[tuple[str, int], str] = field(default_factory=dict)
    hosts: int = 1

    @staticmethod
    def row_key(host: object, pci: object, uuid: object = None, index: object = None) -> str | None:
        """``host|0000:4f:00.0``, else ``host|GPU-uuid``, else ``host|#2``; None for no GPU at all."""
        ident = normalize_pci(_text(pci) or "") or _text(pci) or _text(uuid)
        if ident is None:
            idx = _index(index)
            if idx is None:
                return None
            ident = f"#{idx}"
        return f"{_text(host) or ''}|{ident}"

    @classmethod
    def from_frames(cls, *frames: pd.DataFrame | None, job: pd.DataFrame | None = None) -> GpuPalette:
        """The palette of every GPU in ``frames`` (GPU states, samples, kernel events: any table
        with ``host`` and ``pci_bus_id`` / ``uuid`` / ``gpu_index`` columns, and ``lost``).

        ``job`` is a table of the indices the *job* used (NCCL's ``cudaDev`` per rank): after an
        Xid 79 nvidia-smi renumbers the survivors, so the index seen at capture and the one in
        the job's logs differ, and a label must say which is which (see :meth:`_name`)."""
        seen: dict[str, dict] = {}
        by_index: dict[tuple[str, int], str] = {}
        for frame in frames:
            if frame is None or frame.empty:
                continue
            ordered = frame.sort_values("time", na_position="last", kind="stable") if "time" in frame else frame
            for row in ordered.to_dict("records"):
                row["gpu_index"] = _row_index(row)
                key = cls.row_key(row.get("host"), row.get("pci_bus_id"), row.get("uuid"), row.get("gpu_index"))
                if key is None:
                    continue
                entry = seen.setdefault(key, cls._entry(row))
                idx = _index(row.get("gpu_index"))
                if idx is not None and idx not in entry["indices"]:
                    entry["indices"].append(idx)
                    if entry["pci"]:
                        by_index.setdefault((_text(row.get("host")) or "", idx), key)
                time = row.get("time")
                if _true(row.get("lost")):
                    entry["lost_seen"] = True
                    if entry["lost"] is None and time is not None and not pd.isna(time):
                        entry["lost"] = time
                if _index(row.get("xid")) in (79,) and time is not None and not pd.isna(time):
                    entry["fell_off"] = min(time, entry.get("fell_off", time))
        for row in ([] if job is None or job.empty else job.to_dict("records")):
            key = cls.row_key(row.get("host"), row.get("pci_bus_id"), row.get("uuid"), None)
            if key is not None and _index(row.get("gpu_index")) is not None:
                seen.setdefault(key, cls._entry(row)).setdefault("job", _index(row.get("gpu_index")))
        keys = sorted(seen, key=lambda k: (k.split("|", 1)[0], k.split("|", 1)[1]))
        hosts = len({k.split("|", 1)[0] for k in keys})
        palette = cls(hosts=max(1, hosts), by_index=by_index)
        renumbered = {(k.split("|", 1)[0], seen[k]["indices"][0]) for k in keys
                      if seen[k]["indices"] and seen[k].get("job") not in (None, seen[k]["indices"][0])}
        for n, key in enumerate(keys):
            entry = seen[key]
            palette.colors[key] = GPU_COLORS[n % len(GPU_COLORS)]
            palette.short[key] = cls._name(key, entry, renumbered)
            host = key.split("|", 1)[0]
            palette.names[key] = f"{host} {palette.short[key]}" if host and hosts > 1 else palette.short[key]
            if entry["lost_seen"] or "fell_off" in entry:
                palette.lost[key] = entry.get("fell_off") or entry["lost"]
        return palette

    @staticmethod
    def _entry(row: dict) -> dict:
        return {"pci": normalize_pci(_text(row.get("pci_bus_id")) or "") or _text(row.get("uuid")), "indices": [],
                "lost": None, "lost_seen": False}

    @staticmethod
    def _name(key: str, entry: dict, renumbered: set[tuple[str, int]]) -> str:
        """``0000:54:00.0 (GPU 2)``: the PCI id and the index as seen at capture. Where the job knew
        the GPU by another index (renumbered after a loss) both are named: ``0000:54:00.0 (GPU 2 at
        capture, 3 in the job)``; a GPU whose index another GPU took at capture (the one that fell
        off) is ``0000:4f:00.0 (GPU 2 in the job)``. So no two GPUs of a host read "GPU 2"."""
        host = key.split("|", 1)[0]
        indices, job = entry["indices"], entry.get("job")
        if not entry["pci"]:
            return gpu_name(None, indices[0] if indices else job) or key.split("|", 1)[1]
        if indices and job is not None and job != indices[0]:
            return f"{entry['pci']} (GPU {indices[0]} at capture, {job} in the job)"
        if indices and len(indices) > 1:  # renumbered between captures: the index alone is ambiguous
            return f"{entry['pci']} (GPU {indices[0]}, later {', '.join(str(i) for i in indices[1:])})"
        index = indices[0] if indices else job
        if index is not None and (host, index) in renumbered:
            return f"{entry['pci']} (GPU {index} in the job)"
        return gpu_name(entry["pci"], index) or key.split("|", 1)[1]

    # ---------------------------------------------------------------- per row / per key
    def keys(self, frame: pd.DataFrame) -> pd.Series:
        """The GPU key of each row (rows without PCI id are matched by host and index)."""
        def col(name: str) -> Iterable:
            return frame[name] if name in frame.columns else [None] * len(frame)

        out = []
        indices = [_row_index({"gpu_index": i, "gpu": g}) for i, g in zip(col("gpu_index"), col("gpu"), strict=True)]
        for host, pci, uuid, index in zip(col("host"), col("pci_bus_id"), col("uuid"), indices, strict=True):
            key = self.row_key(host, pci, uuid, None)
            if key is None and _index(index) is not None:
                key = self.by_index.get((_text(host) or "", _index(index))) or self.row_key(host, None, None, index)
            out.append(key)
        return pd.Series(out, index=frame.index, dtype=object)

    def color(self, key: str | None) -> str:
        if key in self.colors:
            return self.colors[key]
        return kind_color(key)  # a GPU the palette was not built with: stable, if not distinct

    def name(self, key: str | None) -> str:
        if key in self.names:
            return self.names[key]
        host, _, ident = str(key).partition("|")
        ident = f"GPU {ident[1:]}" if ident.startswith("#") else ident
        return f"{host} {ident}".strip() if self.hosts > 1 else ident

    def gpu_names(self, frame: pd.DataFrame) -> pd.Series:
        """The GPU's name (without host) for each row of ``frame``, None for rows about no GPU: the
        ``gpu_name`` column of every table, the options of every GPU picker."""
        return pd.Series([self.short.get(k) if k is not None else None for k in self.keys(frame)],
                         index=frame.index, dtype=object)

    def names_for(self, keys: Iterable[str]) -> dict[str, str]:
        """Names of ``keys`` as one figure shows them: without the host when they are all on one
        host (a chart of one node's GPUs need not repeat it in every label), with it otherwise."""
        keys = list(keys)
        one_host = len({str(k).partition("|")[0] for k in keys}) <= 1
        return {k: (self.short.get(k) or self.name(k)) if one_host else self.name(k) for k in keys}

    def lost_label(self, key: str | None) -> str | None:
        """``lost at 2026-01-17T04:51:12Z`` for a GPU that fell off or was reported lost."""
        if key not in self.lost:
            return None
        when = self.lost[key]
        if when is None or pd.isna(when):
            return "lost"
        return f"lost at {pd.Timestamp(when).tz_convert('UTC').strftime('%Y-%m-%dT%H:%M:%SZ')}" \
            if pd.Timestamp(when).tzinfo else f"lost at {pd.Timestamp(when).strftime('%Y-%m-%dT%H:%M:%SZ')}"

    def order(self, keys: Iterable[str]) -> list[str]:
        """``keys`` in the palette's order (the legend's order in every figure)."""
        rank = {k: n for n, k in enumerate(self.colors)}
        return sorted(set(keys), key=lambda k: (rank.get(k, len(rank)), str(k)))
