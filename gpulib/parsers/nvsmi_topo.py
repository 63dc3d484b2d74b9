"""``nvidia-smi topo -m``: how every GPU and NIC pair is connected, and each GPU's CPU/NUMA affinity.

Why it matters after a crash: NCCL speed and failure modes follow this matrix. ``NV#`` is a
bonded set of # NVLinks (H100 SXM: ``NV18``); ``PIX``/``PXB`` stay under one PCIe switch,
``PHB``/``NODE`` cross a host bridge, ``SYS`` crosses the CPU interconnect (slowest). A GPU whose
row shows ``SYS`` to its NIC, or a missing ``NV#`` where the other GPUs have one, is a
topology problem to check before relaunch.

The header row carries ``\\x1b[4m`` underline escapes even when redirected to a file; they are
stripped first. Columns are tab separated; rows may end with empty cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.parsers import units
from gpulib.parsers.base import ParseResult, Problem

KIND = "nvidia_smi_topo"

_DEVICE = re.compile(r"^(GPU|NIC|NVSWITCH|CPU)(\d+)$")
_LEGEND_NIC = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)")
_TAIL = ("cpu affinity", "numa affinity", "gpu numa id")


@dataclass
class TopoDevice:
    """One row of the matrix: ``links`` maps the other device (``GPU3``, ``NIC0``) to its
    connection (``NV18``, ``PIX``, ``SYS``...)."""

    name: str  # "GPU0", "NIC3"
    kind: str  # "gpu" | "nic"
    index: int
    links: dict[str, str] = field(default_factory=dict)
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None
    device: str | None = None  # NIC Legend name, e.g. "mlx5_0"
    line: int | None = None

    @property
    def nvlinks(self) -> dict[str, int]:
        """Other device -> number of bonded NVLinks (``NV18`` -> 18)."""
        return {other: int(kind[2:]) for other, kind in self.links.items() if re.fullmatch(r"NV\d+", kind)}


def looks_like(head: str) -> bool:
    first = next((line for line in units.strip_ansi(head).splitlines() if line.strip()), "")
    cells = [c.strip() for c in first.split("\t")]
    return bool(cells) and not cells[0] and "CPU Affinity" in cells and bool(_DEVICE.match(cells[1] if len(cells) > 1 else ""))


def parse(text: str, source: str = "<text>") -> ParseResult[TopoDevice]:
    """Parse ``nvidia-smi topo -m`` into one :class:`TopoDevice` per GPU/NIC row (never raises)."""
    result: ParseResult[TopoDevice] = ParseResult(KIND)
    lines = units.strip_ansi(text).splitlines()
    header_at = next((i for i, line in enumerate(lines) if "CPU Affinity" in line and "\t" in line), None)
    if header_at is None:
        first = next((line.strip() for line in lines if line.strip()), "")
        why = "empty file" if not first else f"not nvidia-smi topo -m output (no 'CPU Affinity' header); starts {first[:80]!r}"
        result.problems.append(Problem(source, why))
        return result
    header = [c.strip() for c in lines[header_at].split("\t")][1:]
    devices = [h for h in header if _DEVICE.match(h)]
    tail = [h.lower() for h in header if h.lower() in _TAIL]
    legend: dict[str, str] = {}
    for line in lines[header_at + 1:]:
        m = _LEGEND_NIC.match(line)
        if m:
            legend[m[1]] = m[2]
    for number, line in enumerate(lines[header_at + 1:], header_at + 2):
        cells = [c.strip() for c in line.split("\t")]
        m = _DEVICE.match(cells[0]) if cells else None
        if not m or len(cells) < 2:
            if line.strip() == "Legend:":
                break
            continue
        row = TopoDevice(name=cells[0], kind=m[1].lower(), index=int(m[2]), line=number,
                         device=legend.get(cells[0]))
        values = cells[1:]
        if len(values) < len(devices):
            result.problems.append(Problem(source, f"{cells[0]}: {len(values)} cells for {len(devices)} devices", number))
        for other, value in zip(devices, values, strict=False):
            if other != row.name and value:
                row.links[other] = value
        rest = values[len(devices):]
        if rest and "cpu affinity" in tail:
            row.cpu_affinity = units.text_value(rest[0])
        if len(rest) > 1 and "numa affinity" in tail:
            row.numa_affinity = units.text_value(rest[1])
        if len(rest) > 2 and "gpu numa id" in tail:
            row.gpu_numa_id = units.text_value(rest[-1])
        result.records.append(row)
    if not result.records:
        result.problems.append(Problem(source, "topo header but no GPU/NIC rows"))
    return result
