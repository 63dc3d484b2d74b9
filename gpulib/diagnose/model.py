"""The shapes a diagnosis is made of: evidence lines, findings, timeline entries.

A finding has a *role*: ``cause`` (something that can stop a job by itself: an Xid, an OOM, a
thermal slowdown, a lost IB link), ``symptom`` (what the job printed because of a cause:
watchdog timeouts, remote errors, torchrun's ChildFailedError) or ``context`` (facts that support
or locate a cause: the AER report before an Xid, a GPU still held by a zombie process). Symptoms
carry *pointers* - the ranks, hosts and GPUs they blame - which is how the root cause is linked
to the interruption.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EvidenceLine:
    """One line of one input file (``file`` as the user gave it, ``line`` 1-based or None)."""

    file: str
    line: int | None
    text: str

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "text": self.text[:500]}


@dataclass
class Pointers:
    """Whom a symptom blames: ranks/hosts/GPUs (``(host, pci)``) and peer IP addresses."""

    ranks: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    gpus: set[tuple[str | None, str]] = field(default_factory=set)
    peer_addrs: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.ranks or self.hosts or self.gpus or self.peer_addrs)


@dataclass
class Finding:
    id: str
    severity: str
    category: str
    title: str
    role: str = "cause"  # cause | symptom | context
    interruption: str | None = None  # hard | soft, for causes
    host: str | None = None
    gpu_index: int | None = None
    gpu_pci: str | None = None
    gpu_uuid: str | None = None
    rank: int | None = None
    time: str | None = None
    time_approx: bool = False
    observed: bool = False  # ``time`` is when a snapshot saw the state; it began earlier
    evidence: list[EvidenceLine] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    caused_by: str | None = None
    pointers: Pointers = field(default_factory=Pointers)
    hardware: bool = False
    benign: bool = False
    tier: int | None = None  # catalogue tier (1 needs service ... 5 bare exception); None: derived

    def to_dict(self) -> dict:
        return {
            "id": self.id, "severity": self.severity, "category": self.category, "title": self.title,
            "role": self.role, "host": self.host, "gpu_index": self.gpu_index, "gpu_pci": self.gpu_pci,
            "rank": self.rank, "time": self.time, "evidence": [e.to_dict() for e in self.evidence[:12]],
            "actions": list(self.actions), "caused_by": self.caused_by,
        }


@dataclass
class TimelineEntry:
    time: str | None
    host: str | None
    source: str
    event: str

    def to_dict(self) -> dict:
        return {"time": self.time, "host": self.host, "source": self.source, "event": self.event}
