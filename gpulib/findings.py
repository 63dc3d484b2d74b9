"""The finding: one fact about an incident, with one id, one severity and one category everywhere.

The diagnosis, each notebook step (``findings-NN.json``), the runbook's ``findings.json``, the HTML
report and ``gpulib archive diff`` all read and write this one record. Why it matters at 03:00:
``archive diff`` compares two runs by finding id, and a report that counts the same Xid 79 four
times under three ids and two severities sends the engineer chasing ghosts.

The id names the *event*, not the order it was found in: :func:`event_id` builds it from the rule
and whom the fact is about (host, GPU, rank), so the diagnosis and a notebook's threshold check
that see the same throttled GPU give it the same id, and last night's report and tonight's can be
compared line by line.

Roles (what the fact is to the interruption): ``cause`` (can stop a job by itself: an Xid, an
OOM, a thermal slowdown, a lost IB link), ``symptom`` (what the job printed because of a cause:
watchdog timeouts, torchrun's ChildFailedError), ``context`` (supports or locates a cause: the AER
report before an Xid, a GPU still held by a process). Symptoms carry :class:`Pointers` - the
ranks, hosts and GPUs they blame - which is how the root cause is linked to the interruption.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from gpulib.vocabulary import CATEGORIES, OUT_OF_SERVICE, SEVERITIES, SEVERITY_CEILING

#: Keys every serialised finding has, in this order (the JSON contract of docs/ARCHITECTURE.md).
KEYS = ("id", "severity", "category", "title", "role", "host", "gpu_index", "gpu_pci", "rank", "time",
        "evidence", "actions", "caused_by")
#: Quotes kept per finding in JSON (the first ones: where the fact was first seen).
QUOTES_KEPT = 12


#: Tier of a cause that explains an interruption only when nothing else does (a bare exception is 5):
#: an inference from what is missing (a silent rank 0, mixed NCCL releases behind a hang).
LAST_RESORT_TIER = 6


@dataclass
class Quote:
    """A quote: one line of one input file that a finding rests on (``file`` as the user gave it,
    ``line`` 1-based or None)."""

    file: str
    line: int | None
    text: str

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "text": self.text[:500]}

    @classmethod
    def from_dict(cls, data: dict) -> Quote:
        line = data.get("line")
        return cls(str(data.get("file") or ""), None if line is None else int(line), str(data.get("text") or ""))


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
    """One fact. ``severity`` is one of :data:`gpulib.vocabulary.SEVERITIES`, ``category`` one of
    :data:`gpulib.vocabulary.CATEGORIES`. ``extra`` keeps what a step adds for its own commands
    (``pids`` of processes still holding a GPU, ``power_limit_w`` of a throttled one, ``step``).

    ``quotes`` are the input lines the fact rests on (:class:`Quote`). The JSON calls them
    ``"evidence"``, as the contract of docs/ARCHITECTURE.md fixes it; the code calls them quotes,
    because everywhere else in gpulib "evidence" names the captured files (the bundle, ``--evidence``)."""

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
    quotes: list[Quote] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    caused_by: str | None = None
    xid: int | None = None
    pointers: Pointers = field(default_factory=Pointers)
    hardware: bool = False
    benign: bool = False
    tier: int | None = None  # catalogue tier (1 needs service ... 5 bare exception, 6 last resort); None: derived
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> Finding:
        """Raise ValueError unless severity and category are words of the vocabulary."""
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.id}: severity {self.severity!r} is not one of {SEVERITIES}")
        if self.category not in CATEGORIES:
            raise ValueError(f"finding {self.id}: category {self.category!r} is not in the vocabulary (gpulib/vocabulary.py)")
        return self

    def gpu_label(self) -> str | None:
        """``0000:4f:00.0 (GPU 2)`` (:func:`gpu_name`): the PCI id survives renumbering, the index is
        the one seen at capture."""
        return gpu_name(self.gpu_pci, self.gpu_index, self.gpu_uuid)

    def where(self, *, when: bool = True) -> str:
        """``host gx-a800-102, 0000:4f:00.0 (GPU 2), rank 10, at 2026-03-10T03:12:44Z`` (known parts
        only). A time read off a snapshot says so: the state began before it was seen."""
        port = self.extra.get("hca_port")  # a fabric cause: the one cable of eight to reseat
        pod = self.extra.get("pod")  # a Kubernetes pod's node: the node is drained, the pod is how the job named it
        parts = [f"host {self.host}" + (f" (pod {pod})" if pod else "") + (f", {port}" if port else "")
                 if self.host else "", self.gpu_label() or "",
                 f"rank {self.rank}" if self.rank is not None else ""]
        if when and self.time:
            parts.append(f"seen at {self.time} (began earlier)" if self.observed else
                         f"at {self.time}" + (" (approx.)" if self.time_approx else ""))
        return ", ".join(p for p in parts if p)

    def to_dict(self) -> dict:
        out = {
            "id": self.id, "severity": self.severity, "category": self.category, "title": self.title,
            "role": self.role, "host": self.host, "gpu_index": self.gpu_index, "gpu_pci": self.gpu_pci,
            "rank": self.rank, "time": self.time, "evidence": [e.to_dict() for e in self.quotes[:QUOTES_KEPT]],
            "actions": list(self.actions), "caused_by": self.caused_by,
        }
        if self.xid is not None:
            out["xid"] = self.xid
        return out | {k: v for k, v in self.extra.items() if k not in out}

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        """A finding from its JSON (any extra keys are kept in ``extra``); missing keys take defaults."""
        known = {f.name for f in fields(cls)} - {"quotes", "pointers", "extra", "actions"}
        values = {k: data[k] for k in known if k in data}
        values.setdefault("gpu_pci", data.get("pci_bus_id"))
        for key in ("gpu_index", "rank", "xid"):
            if values.get(key) is not None:
                values[key] = int(values[key])
        quotes = [e if isinstance(e, Quote) else Quote.from_dict(e) for e in data.get("evidence") or []]
        extra = {k: v for k, v in data.items()
                 if k not in known and k not in ("evidence", "actions", "pointers", "pci_bus_id")}
        return cls(**{"id": str(data.get("id")), "severity": data.get("severity") or "info",
                      "category": data.get("category") or "none", "title": data.get("title") or "",
                      **{k: v for k, v in values.items() if k not in ("id", "severity", "category", "title")}},
                   quotes=quotes, actions=list(data.get("actions") or []), extra=extra)


def finding_dict(id: str, severity: str, category: str, title: str, *, host: str | None = None,
                 gpu_index: int | None = None, rank: int | None = None, time: str | None = None,
                 quotes: Sequence[dict] = (), actions: Sequence[str] = (), **extra: Any) -> dict:
    """One finding as its JSON dict from plain values (extra keys such as ``pids`` or ``step`` are
    kept); raises ValueError for a severity or category outside the vocabulary. The notebook face's
    ``gpulib.notebook.steps.finding`` takes table cells (pandas' missing values, timestamps) too."""
    data = {"id": id, "severity": severity, "category": category, "title": title, "host": host,
            "gpu_index": gpu_index, "rank": rank, "time": time, "evidence": [dict(e) for e in quotes],
            "actions": list(actions), **extra}
    return Finding.from_dict(data).check().to_dict()


def gpu_name(pci: str | None, index: int | None = None, uuid: str | None = None) -> str | None:
    """``0000:4f:00.0 (GPU 2)``: a GPU named by what survives renumbering (its PCI bus id, else its
    UUID), with the index nvidia-smi showed when it was captured. After an Xid 79 nvidia-smi
    numbers the survivors anew, so "GPU 2" alone can name two GPUs in one incident; the figures,
    the report and the diagnosis headline all use this one form."""
    ident = pci or uuid
    if ident and index is not None:
        return f"{ident} (GPU {index})"
    if ident:
        return ident
    return None if index is None else f"GPU {index}"


def severity_rank(severity: str) -> int:
    """0 for critical ... 3 for info; unknown words sort last."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def weigh(finding: Finding, interruption: str | None, *, root: bool = False) -> Finding:
    """Settle a finding's severity and actions by the interruption it belongs to
    (:data:`gpulib.vocabulary.SEVERITY_CEILING`): one rule for every rule's findings, so no soft
    incident shows a red "critical" or a "drain the node" that ``diagnose`` (exit 1: fix and
    relaunch) contradicts. ``interruption``: the finding's own, or the soft root's it is the
    cascade of. A soft finding is at most ``error`` and loses the clauses of its actions that take
    hardware out of service (``Check the fans; drain the node if ...`` keeps ``Check the fans``); a
    hard ``root`` cause is ``critical``. Other findings keep what their rule said."""
    if interruption == "soft":
        ceiling = SEVERITY_CEILING["soft"]
        if severity_rank(finding.severity) < severity_rank(ceiling):
            finding.severity = ceiling
        finding.actions = [a for a in (_in_service(action) for action in finding.actions) if a]
    elif interruption == "hard" and root:
        finding.severity = SEVERITY_CEILING["hard"]
    return finding


def _in_service(action: str) -> str:
    """An action without its clauses (``;``-separated) that drain, RMA or replace hardware."""
    return "; ".join(c for c in action.split("; ") if not _OUT_OF_SERVICE.search(c)).strip()


_OUT_OF_SERVICE = re.compile(r"\b(?:" + "|".join(map(re.escape, OUT_OF_SERVICE)) + ")", re.IGNORECASE)


def event_id(rule: str, *, host: str | None = None, gpu: str | int | None = None, rank: int | None = None,
             detail: str | int | None = None) -> str:
    """The id of an event: the rule's name and whom it is about, e.g. ``xid79-gx_a800_102-0000_4f_00.0``.

    ``gpu`` is the PCI bus id where known (it survives renumbering), else the index; the rank
    names the event only when no GPU does (a rank's GPU is learnt late, from NCCL lines, and the
    same GPU event seen in a snapshot knows no rank). Unknown parts are left out; ``detail``
    separates two events of one rule on one GPU (two Xid codes)."""
    parts = [host, gpu, f"r{rank}" if rank is not None and gpu is None else None, detail]
    return "-".join([rule] + [re.sub(r"[^0-9A-Za-z.]+", "_", str(p)) for p in parts if p is not None and p != ""])


def ordered(items: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then by time (unknown times last)."""
    return sorted(items, key=lambda f: (severity_rank(f.severity), f.time is None, f.time or ""))


def summarize(items: Sequence[Finding], *, step: str = "") -> str:
    """The text people read under a list of findings: counts, then one line per finding."""
    head = f"{step}: " if step else ""
    if not items:
        return f"{head}no findings (nothing abnormal in this evidence for this step)"
    counts = ", ".join(f"{n} {s}" for s in SEVERITIES if (n := sum(f.severity == s for f in items)))
    lines = [f"{head}{len(items)} finding(s): {counts}"]
    for f in items:
        where = f.where()
        lines.append(f"  [{f.severity.upper()}] {f.category}: {f.title}" + (f" ({where})" if where else ""))
        lines += [f"      -> {a}" for a in f.actions][:3]
    return "\n".join(lines)
