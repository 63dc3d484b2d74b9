"""``stat -f PATH...`` (statfs): exact free space and free inodes of the file system under a path.

Why beside df: df rounds (``-h``) and hides inodes; a dataset of millions of small files can
exhaust inodes while df still shows free space, and ``/dev/shm`` is judged in bytes against
the DataLoader's need. Each path prints a block::

      File: "/dev/shm"
        ID: 0        Namelen: 255     Type: tmpfs
    Block size: 4096       Fundamental block size: 4096
    Blocks: Total: 16384      Free: 0          Available: 0
    Inodes: Total: 4116450    Free: 4116449

Sizes are ``blocks x fundamental block size``; ``Available`` is what non-root users may use.
Records are :class:`gpulib.parsers.df.FsUsage` with ``path`` set.
"""

from __future__ import annotations

import re

from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.df import FsUsage

KIND = "statfs"

_FILE = re.compile(r'^\s*File: "(?P<path>.*)"\s*$')
_TYPE = re.compile(r"\bType: (?P<type>\S+)")
_BLOCK = re.compile(r"Fundamental block size: (?P<size>\d+)")
_BLOCKS = re.compile(r"^Blocks: Total: (?P<total>\d+)\s+Free: (?P<free>\d+)\s+Available: (?P<avail>\d+)")
_INODES = re.compile(r"^Inodes: Total: (?P<total>\d+)\s+Free: (?P<free>\d+)")


def looks_like(head: str) -> bool:
    return 'File: "' in head and bool(re.search(r'(?m)^\s*File: ".*"\n\s*ID: \S+\s+Namelen: \d+\s+Type: ', head))


def parse(text: str, source: str = "<text>") -> ParseResult[FsUsage]:
    result: ParseResult[FsUsage] = ParseResult(KIND)
    block: dict | None = None

    def close() -> None:
        if block is None:
            return
        if "total" not in block or "block" not in block:
            result.problems.append(Problem(source, f"incomplete stat -f block for {block['path']!r}", block["line"]))
            return
        size, unit = block["total"] * block["block"], block["block"]
        used = size - block["free"] * unit
        avail = block["avail"] * unit
        pct = 100.0 * used / (used + avail) if used + avail else 0.0
        result.records.append(FsUsage(filesystem=None, mount=None, size_bytes=size, used_bytes=used, avail_bytes=avail,
                                      use_pct=round(pct, 1), fs_type=block.get("type"), path=block["path"],
                                      inodes_total=block.get("inodes_total"), inodes_free=block.get("inodes_free"),
                                      line=block["line"]))

    for number, line in enumerate(text.splitlines(), 1):
        if m := _FILE.match(line):
            close()
            block = {"path": m["path"], "line": number}
            continue
        if block is None:
            if line.strip():
                result.problems.append(Problem(source, f"not stat -f output: {line.strip()[:80]!r}", number))
            continue
        if m := _TYPE.search(line):
            block["type"] = m["type"]
        if m := _BLOCK.search(line):
            block["block"] = int(m["size"])
        if m := _BLOCKS.match(line.strip()):
            block.update(total=int(m["total"]), free=int(m["free"]), avail=int(m["avail"]))
        if m := _INODES.match(line.strip()):
            block.update(inodes_total=int(m["total"]), inodes_free=int(m["free"]))
    close()
    if not result.records and not result.problems:
        result.problems.append(Problem(source, "empty file: no stat -f output"))
    return result
