"""``df -h`` (and ``df``/``df -P``/``df -B1``): how full each file system is.

Why it matters for training: PyTorch DataLoader workers hand batches to the trainer through
``/dev/shm``. A container started with Docker's default 64 MiB ``/dev/shm`` fills it with the
first few batches, and the workers die with "Bus error ... out of shared memory" (a soft,
configuration failure: raise ``--shm-size``). A checkpoint folder at 100 % makes the next save
fail part-way, leaving a truncated checkpoint.

The header says the unit: ``Size`` (``-h``: powers of 1,024 with K/M/G/T/P/E suffixes, rounded
up to two or three digits, so byte counts are approximate), ``1K-blocks``/``1024-blocks`` or
``1B-blocks``. A long device name may push the numbers to the next line (older df); such a
pair of lines is read as one row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem

KIND = "df"

_HEADER = re.compile(r"^Filesystem\s+(?:Type\s+)?(?P<unit>Size|1K-blocks|1024-blocks|1B-blocks|\d+[KMG]?-blocks)\s+"
                     r"Used\s+Avail(?:able)?\s+(?:Use|Capacity)%\s+Mounted on\s*$")
_SUFFIX = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
_HUMAN = re.compile(r"^(?P<num>\d+(?:[.,]\d+)?)(?P<suffix>[KMGTPE]?)$")


@dataclass
class FsUsage:
    """One file system as df or ``stat -f`` saw it (``mount`` for df, ``path`` for stat -f)."""

    filesystem: str | None  # "tmpfs", "/dev/nvme0n1p1", "nfs-server:/export"
    mount: str | None  # "/dev/shm"
    size_bytes: int
    used_bytes: int
    avail_bytes: int
    use_pct: float  # of the space non-root users can have, as df computes it
    fs_type: str | None = None
    path: str | None = None  # the path asked about (stat -f)
    inodes_total: int | None = None
    inodes_free: int | None = None
    approximate: bool = False  # sizes from df -h, rounded
    line: int | None = None

    @property
    def full(self) -> bool:
        """No space left for non-root writers (or no inode left)."""
        return self.avail_bytes <= 0 or self.inodes_free == 0


def _bytes(text: str, unit_bytes: int | None) -> int | None:
    if unit_bytes is not None:
        return int(text) * unit_bytes if text.isdigit() else None
    m = _HUMAN.match(text)
    return int(float(m["num"].replace(",", ".")) * _SUFFIX[m["suffix"]]) if m else None


def _unit_bytes(unit: str) -> int | None:
    if unit == "Size":
        return None
    m = re.match(r"(\d+)([KMG]?)", unit)
    return int(m[1]) * _SUFFIX[m[2]]


def looks_like(head: str) -> bool:
    first = next((line for line in head.splitlines() if line.strip()), "")
    return bool(_HEADER.match(first.strip()))


def parse(text: str, source: str = "<text>") -> ParseResult[FsUsage]:
    result: ParseResult[FsUsage] = ParseResult(KIND)
    unit_bytes: int | None = None
    with_type = False
    pending: tuple[int, str] | None = None
    seen_header = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        header = _HEADER.match(line.strip())
        if header:
            seen_header, unit_bytes, with_type = True, _unit_bytes(header["unit"]), " Type " in line
            continue
        if not seen_header:
            result.problems.append(Problem(source, f"no df header before this line: {line.strip()[:80]!r}", number))
            continue
        cells = line.split()
        if pending:  # the device name was alone on the previous line
            cells, number = [pending[1], *cells], pending[0]
            pending = None
        elif len(cells) == 1:
            pending = (number, cells[0])
            continue
        row = _row(cells, unit_bytes, with_type, number)
        if row is None:
            result.problems.append(Problem(source, f"not a df row: {line.strip()[:80]!r}", number))
        else:
            result.records.append(row)
    if not seen_header:
        result.problems.insert(0, Problem(source, "no df header line (Filesystem Size Used Avail Use% Mounted on)"))
    return result


def _row(cells: list[str], unit_bytes: int | None, with_type: bool, number: int) -> FsUsage | None:
    want = 7 if with_type else 6
    if len(cells) < want:
        return None
    fs_type = cells[1] if with_type else None
    numbers = cells[2:6] if with_type else cells[1:5]
    mount = " ".join(cells[want - 1:])  # a mount point with spaces
    size, used, avail = (_bytes(n, unit_bytes) for n in numbers[:3])
    pct = numbers[3].rstrip("%")
    if size is None or used is None or avail is None or not (pct.isdigit() or pct == "-"):
        return None
    return FsUsage(filesystem=cells[0], mount=mount, size_bytes=size, used_bytes=used, avail_bytes=avail,
                   use_pct=float(pct) if pct.isdigit() else 0.0, fs_type=fs_type, approximate=unit_bytes is None,
                   line=number)
