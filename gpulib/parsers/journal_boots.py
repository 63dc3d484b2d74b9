"""``journalctl --list-boots``: the boots the journal holds, each with its first and last entry.

Why read it: a node that lost power, tripped its supply or was reset by the button or a BMC
watchdog writes nothing about it; its journal just stops, and the next boot follows. The list
of boots says when the previous boot's journal stopped (its ``LAST ENTRY``) and when the next
one began: with the previous boot's last lines beside it (``journalctl -b -1``), a stop with no
shutdown record is visible (:mod:`gpulib.diagnose.rules.boots`).

Two layouts, both in the node's local time. systemd 255 and later print a header and columns::

    IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY
     -1 6d0a8e1f3b2c4d5e9a7f1b0c2d3e4f50 Wed 2026-08-19 21:49:02 BST Thu 2026-08-20 10:31:56 BST
      0 b41c9e2a7d6f4e3b8c5a0f1e2d3c4b5a Thu 2026-08-20 10:34:40 BST Thu 2026-08-20 11:02:19 BST

older ones no header and an em dash between the two times (``Wed 2026-08-19 21:49:02 BST—Thu
2026-08-20 10:31:56 BST``). Index 0 is the running boot, -1 the one before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem

KIND = "journal_boots"

_STAMP = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<{0}>\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d)(?: (?P<{0}_zone>[A-Za-z][\w+-]*))?"
_ROW = re.compile(r"^\s*(?P<idx>-?\d+) +(?P<id>[0-9a-f]{32}) +" + _STAMP.format("first")
                  + r"\s*(?:—|-|–|\s)\s*" + _STAMP.format("last") + r"\s*$")


@dataclass
class BootRecord:
    """One boot: its index (0 the running boot), its id, and its first and last journal entry as
    naive local ISO times (``2026-08-20T10:31:56``) with the zone as printed (``BST``, or None)."""

    line: int
    index: int
    boot_id: str
    first_local: str
    last_local: str
    zone: str | None
    text: str


def looks_like(head: str) -> bool:
    """Two or more boot rows (index, 32-hex id, two weekday-dated times)."""
    if "20" not in head:
        return False
    rows = 0
    for line in head.splitlines():
        if _ROW.match(line):
            rows += 1
            if rows >= 2:
                return True
    return False


def parse(text: str, source: str = "<text>") -> ParseResult[BootRecord]:
    """Every boot row of ``text`` (never raises); other lines (a prompt, the header) are skipped."""
    result: ParseResult[BootRecord] = ParseResult(KIND)
    for number, line in enumerate(text.splitlines(), 1):
        m = _ROW.match(line)
        if m:
            result.records.append(BootRecord(
                line=number, index=int(m["idx"]), boot_id=m["id"], first_local=m["first"].replace(" ", "T"),
                last_local=m["last"].replace(" ", "T"), zone=m["last_zone"] or m["first_zone"], text=line.strip()))
    if not result.records:
        result.problems.append(Problem(source, "no `journalctl --list-boots` rows (index, boot id, first and "
                                               "last entry) found"))
    return result


__all__ = ["KIND", "BootRecord", "looks_like", "parse"]
