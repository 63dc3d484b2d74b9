"""``nvidia-smi nvlink -s`` (``--status``): per GPU, each NVLink's speed or ``<inactive>``.

Why it matters: on an NVSwitch/HGX board every GPU should show the same number of links at the
same speed (A100 SXM: 12 x 25 GB/s; H100 SXM: 18 x 26.562 GB/s). A GPU with fewer active links,
or ``NVML: Unable to retrieve NVLink information as all links are inactive`` while its
neighbours have links, is an NVLink fault (Xid 74 territory) and slows or hangs NCCL.

Other texts are normal and reported in ``note``: GeForce/PCIe boards say ``Device does not have
or support Nvlink``; MIG GPUs say ``Nvlink queries are not supported for Devices in MIG mode``;
an A10 prints nothing at all (an empty file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.parsers import units
from gpulib.parsers.base import ParseResult, Problem

KIND = "nvidia_smi_nvlink"

_GPU = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?) \(UUID: (?P<uuid>[^)]+)\)\s*$")
_LINK = re.compile(r"^\s*Link (?P<link>\d+): (?P<value>.+?)\s*$")


@dataclass
class NvlinkStatus:
    """One GPU: ``links`` maps link number -> GB/s, or None for an inactive link; ``link_lines``
    maps link number -> its line, so a finding can quote the ``<inactive>`` line itself."""

    gpu_index: int
    name: str | None
    uuid: str | None
    links: dict[int, float | None] = field(default_factory=dict)
    link_lines: dict[int, int] = field(default_factory=dict)
    all_inactive: bool = False  # NVML said every link is down (a fault on an NVLink board)
    note: str | None = None  # what nvidia-smi printed instead of links
    line: int | None = None

    @property
    def active_links(self) -> int:
        return sum(1 for speed in self.links.values() if speed)


def looks_like(head: str) -> bool:
    lines = [line for line in head.splitlines() if line.strip()]
    if not lines or not _GPU.match(lines[0]):
        return False
    return any(_LINK.match(line) or "nvlink" in line.lower() for line in lines[1:6])


def parse(text: str, source: str = "<text>") -> ParseResult[NvlinkStatus]:
    """Parse ``nvidia-smi nvlink -s`` into one :class:`NvlinkStatus` per GPU (never raises)."""
    result: ParseResult[NvlinkStatus] = ParseResult(KIND)
    if not text.strip():
        result.problems.append(Problem(
            source, "empty: nvidia-smi nvlink -s printed nothing (a GPU without NVLink, e.g. A10, or a failed capture)"))
        return result
    gpu: NvlinkStatus | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _GPU.match(line)
        if m:
            gpu = NvlinkStatus(int(m["index"]), m["name"], m["uuid"], line=number)
            result.records.append(gpu)
            continue
        if gpu is None:
            continue
        link = _LINK.match(line)
        if link:
            value = link["value"]
            try:
                gpu.links[int(link["link"])] = None if "inactive" in value.lower() else units.number(value)
                gpu.link_lines[int(link["link"])] = number
            except ValueError as exc:
                result.problems.append(Problem(source, f"GPU {gpu.gpu_index} link {link['link']}: {exc}", number))
        elif gpu.note is None:  # the tool's one-line explanation; later lines are not ours
            gpu.note = line.strip()
            gpu.all_inactive = "all links are inactive" in line.lower()
    if not result.records:
        result.problems.append(Problem(source, "not nvidia-smi nvlink -s output (no 'GPU n: ... (UUID: ...)' lines)"))
    return result
