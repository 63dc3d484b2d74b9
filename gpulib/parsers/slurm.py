"""Slurm's own view of the nodes: ``sinfo -R`` (why a node is drained or down).

``Kill task failed`` means slurmd could not kill a job step: a process sat in uninterruptible
sleep (D state), almost always stuck in the GPU driver after a GPU fault. ``Not responding`` /
``NO_RESPOND`` means the node itself was lost. Both are strong hints for the culprit node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.logtime import stamp_in, zone_of

KIND = "slurm_sinfo"

_HEADER = re.compile(r"^\s*REASON\s+USER\s+TIMESTAMP\s+NODELIST\s*$")
_ROW = re.compile(r"^(?P<reason>.+?)\s{2,}(?P<user>\S+)\s+(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|Unknown)\s+"
                  r"(?P<nodes>\S+)\s*$")
_RANGE = re.compile(r"^(?P<prefix>[^\[]*)\[(?P<body>[^\]]+)\](?P<suffix>.*)$")


@dataclass
class NodeReason:
    """One ``sinfo -R`` row: why ``nodes`` are drained/down, set by ``user`` at ``time_utc``."""

    reason: str
    user: str
    time_utc: str | None
    nodes: list[str] = field(default_factory=list)
    line: int = 0


def expand_nodelist(text: str) -> list[str]:
    """``hgx-h100-[017-018],dgx-3`` -> ['hgx-h100-017', 'hgx-h100-018', 'dgx-3'] (slurm hostlist)."""
    out: list[str] = []
    for part in re.split(r",(?![^\[]*\])", text.strip()):
        m = _RANGE.match(part)
        if not m:
            if part:
                out.append(part)
            continue
        for piece in m["body"].split(","):
            lo, _, hi = piece.partition("-")
            if hi and lo.isdigit() and hi.isdigit():
                out.extend(f"{m['prefix']}{n:0{len(lo)}d}{m['suffix']}" for n in range(int(lo), int(hi) + 1))
            else:
                out.append(f"{m['prefix']}{piece}{m['suffix']}")
    return out


def looks_like(head: str) -> bool:
    return any(_HEADER.match(line) for line in head.splitlines()[:5])


def parse(text: str, source: str = "<text>", *, tz: str | None = None, **_opts) -> ParseResult[NodeReason]:
    result: ParseResult[NodeReason] = ParseResult(KIND)
    zone = zone_of(tz)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or _HEADER.match(line):
            continue
        m = _ROW.match(line)
        if not m:
            result.problems.append(Problem(source, f"not a sinfo -R row: {line[:80]!r}", number))
            continue
        result.records.append(NodeReason(m["reason"].strip(), m["user"], stamp_in(m["ts"], year=None, tz=zone),
                                         expand_nodelist(m["nodes"]), number))
    return result
