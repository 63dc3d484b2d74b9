"""Slurm's own view of the nodes: ``sinfo -R`` (why a node is drained or down) and the default
``sinfo`` partition table (how many nodes of each partition are in which state).

``Kill task failed`` means slurmd could not kill a job step: a process sat in uninterruptible
sleep (D state), almost always stuck in the GPU driver after a GPU fault. ``Not responding`` /
``NO_RESPOND`` means the node itself was lost. Both are strong hints for the culprit node. A ``*``
after a state (``down*``, ``idle*``) means slurmctld gets no answer from the node's slurmd: when
that is *every* node at once, no single node is the culprit - the site lost power or its network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.logtime import stamp_in, zone_of

KIND = "slurm_sinfo"

_HEADER = re.compile(r"^\s*REASON\s+USER\s+TIMESTAMP\s+NODELIST\s*$")
_TABLE_HEADER = re.compile(r"^\s*PARTITION\s+AVAIL\s+TIMELIMIT\s+NODES\s+STATE\s+NODELIST\s*$")
_TABLE_ROW = re.compile(r"^(?P<partition>\S+?)(?P<default>\*)?\s+(?P<avail>up|down|drain|inact)\S*\s+\S+\s+"
                        r"(?P<count>\d+)\s+(?P<state>[a-z]+)(?P<flags>[*~#!%$@^-]*)\s+(?P<nodes>\S+)\s*$")
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


@dataclass
class PartitionState:
    """One row of the default ``sinfo`` table: ``node_count`` nodes of ``partition`` in ``state``.
    ``unreachable`` is the ``*`` flag: slurmctld gets no answer from those nodes' slurmd."""

    partition: str
    available: str
    node_count: int
    state: str
    unreachable: bool
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
    return any(_HEADER.match(line) or _TABLE_HEADER.match(line) for line in head.splitlines()[:5])


def parse(text: str, source: str = "<text>", *, tz: str | None = None, **_opts) -> ParseResult[NodeReason]:
    result: ParseResult[NodeReason] = ParseResult(KIND)
    zone = zone_of(tz)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or _HEADER.match(line) or _TABLE_HEADER.match(line):
            continue
        t = _TABLE_ROW.match(line)
        if t:
            result.records.append(PartitionState(t["partition"], t["avail"], int(t["count"]), t["state"],
                                                 "*" in t["flags"], expand_nodelist(t["nodes"]), number))
            continue
        m = _ROW.match(line)
        if not m:
            result.problems.append(Problem(source, f"not a sinfo row: {line[:80]!r}", number))
            continue
        result.records.append(NodeReason(m["reason"].strip(), m["user"], stamp_in(m["ts"], year=None, tz=zone),
                                         expand_nodelist(m["nodes"]), number))
    return result
