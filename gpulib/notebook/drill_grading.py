"""The drill's questions, choices and grading: pure functions, no widgets.

A drill asks what the on-call engineer must name at 3 a.m. (docs/ARCHITECTURE.md): the root-cause
**category**, **hard or soft**, and the culprit **host**, **GPU** and **rank**. Each is scored on
its own (partial credit), because a trainee who found the right node but blamed the waiting rank
has learnt something different from one who read the cascade as the cause.

Why the choices come from the whole evidence: a picker that offers only the culprit gives the
answer away. Every host, GPU and rank the evidence mentions is offered - the hosts of every file
read, of every finding and of the NCCL rank map; the GPUs of the rank map, the findings and the
nvidia-smi snapshots; every rank placed or named - so choosing is reading the evidence.

GPUs are named by host, PCI id and index (``node-b 0000:4f:00.0 (GPU 2)``, as everywhere in gpulib). After an Xid 79,
nvidia-smi numbers the surviving GPUs anew, so "GPU 2" after the crash may be another board than
the GPU 2 the job ran on: the PCI id is the identity, and the index shown is the one the job saw
(the NCCL rank map's ``cudaDev``), else the diagnosis's, else the snapshot's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from gpulib.findings import gpu_name
from gpulib.identity import normalize_pci
from gpulib.notebook.widgets import natural_key

#: The facets a drill asks, in the order they are shown, with the question people read.
FACETS = (("category", "root-cause category"), ("interruption", "hard or soft"), ("host", "culprit host"),
          ("gpu", "culprit GPU"), ("rank", "culprit rank"))
#: ``interruption`` choices (the diagnosis's words) and what each means to the trainee.
INTERRUPTIONS = (("hard: a GPU, node or its power failed", "hard"),
                 ("soft: the process failed, the hardware is fine", "soft"),
                 ("none: the job ended normally", "none"),
                 ("unknown: the evidence cannot tell", "unknown"))
#: Each category in words (the picker shows these; the raw id follows in brackets, as the
#: diagnosis and the report name it).
CATEGORY_WORDS = {
    "gpu_fell_off_bus": "a GPU fell off the bus (PCIe link lost, Xid 79)",
    "gpu_memory_error": "GPU memory error (ECC double-bit, row remap failure)",
    "gpu_firmware_error": "GPU firmware / GSP error",
    "nvlink_error": "NVLink error between GPUs",
    "thermal_throttling": "a GPU overheated and throttled",
    "power_fault": "power fault (PSU, power brake)",
    "cuda_oom": "CUDA out of memory (one process)",
    "host_oom": "host out of memory (kernel OOM killer)",
    "network_fabric": "network fabric (InfiniBand / RoCE link, NIC)",
    "driver_mismatch": "driver / CUDA / NCCL version mismatch",
    "application_error": "the training code failed (exception, assert)",
    "data_pipeline_stall": "data loading stalled (storage, dataloader)",
    "node_lost": "a whole node was lost (reboot, crash, hang)",
    "none": "nothing failed: the job ended normally",
}
#: A facet not answered (the picker left at its prompt): scored wrong, "not answered".
UNANSWERED = "?"
#: "No single host / GPU / rank": the right answer when the cause is job-wide (an OOM of the
#: whole host has no GPU, a healthy run has no culprit at all).
NOBODY = "-"

#: Where to look, shown for a wrong facet while the trainee may still try again. They point at
#: the method, never at the answer.
HINTS = {
    "category": "Find the FIRST abnormal event in time (the timeline above), not the loudest: NCCL "
                "timeouts on many ranks at once say who waited, not why.",
    "interruption": "hard = a GPU, a node or its power failed (drain or repair before relaunch); soft = the "
                    "process failed and the hardware is fine. What does the first event say about the hardware?",
    "host": "The host of the first abnormal event, not the host whose rank the launcher reported first.",
    "gpu": "Kernel lines name a GPU by PCI id (PCI:0000:xx:00); nvidia-smi after a crash may renumber the "
           "survivors, so match the PCI id, not the index.",
    "rank": "The rank that did NOT time out, or failed first; NCCL init lines place each rank on a host and "
            "GPU (rank R ... cudaDev D ... busId B).",
}
#: Categories a trainee picks when reading the cascade as the cause.
CASCADE_LOOKALIKES = ("network_fabric", "application_error")


@dataclass(frozen=True)
class GpuChoice:
    """One GPU of the evidence: its host, PCI id (the identity) and the index the job saw."""

    host: str
    pci: str | None
    index: int | None
    #: the GPU's name in every figure and table of the evidence (its palette), when known
    name: str | None = field(default=None, compare=False)

    def label(self) -> str:
        return f"{self.host} {self.name or gpu_name(self.pci, self.index) or 'GPU ?'}"

    def matches(self, host: str | None, pci: str | None, index: int | None) -> bool:
        """Same board: same host and PCI id, or (no PCI id known on one side) same index."""
        if host != self.host:
            return False
        if self.pci and pci:
            return self.pci == pci
        return index is not None and index == self.index


@dataclass(frozen=True)
class Choices:
    """What the drill's pickers offer: every host, GPU and rank seen in the evidence."""

    hosts: tuple[str, ...]
    gpus: tuple[GpuChoice, ...]
    ranks: tuple[int, ...]
    #: rank -> "gx-a800-102 0000:4f:00.0 (GPU 2)" from the NCCL rank map (for the answer's why)
    placement: dict[int, str] = field(default_factory=dict, compare=False)


def _int(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _rows(frame: pd.DataFrame | None) -> list[dict]:
    return [] if frame is None or frame.empty else frame.to_dict("records")


def drill_choices(diagnosis: dict, ranks: pd.DataFrame | None = None,
                  gpu_states: pd.DataFrame | None = None, gpu_names: dict[str, str] | None = None) -> Choices:
    """Every host, GPU and rank in the diagnosis (its inputs, findings, timeline and root cause),
    the NCCL rank map (``EvidenceTables.ranks()``) and the GPU snapshots (``gpu_states()``).
    ``gpu_names`` (``"host|pci"`` -> name, the evidence palette's ``short``) names each GPU as the
    figures and tables do."""
    root = diagnosis.get("root_cause") or {}
    findings = [*(diagnosis.get("findings") or []), root]
    hosts = {i.get("host") for i in diagnosis.get("inputs") or []}
    hosts |= {f.get("host") for f in findings} | {t.get("host") for t in diagnosis.get("timeline") or []}
    rank_rows, state_rows = _rows(ranks), _rows(gpu_states)
    hosts |= {r.get("host") for r in rank_rows} | {s.get("host") for s in state_rows}
    # (host, pci, index) sightings, the most trustworthy index first: the job's own (rank map),
    # the diagnosis's, then the snapshot's (which may be renumbered after a loss)
    seen = [(r.get("host"), r.get("pci_bus_id"), _int(r.get("gpu_index"))) for r in rank_rows]
    seen += [(f.get("host"), f.get("gpu_pci"), _int(f.get("gpu_index"))) for f in findings
             if not _nic_only(f)]
    seen += [(s.get("host"), s.get("pci_bus_id"), _int(s.get("gpu_index"))) for s in state_rows]
    gpus = [GpuChoice(g.host, g.pci, g.index, (gpu_names or {}).get(f"{g.host}|{g.pci}")) for g in _merge_gpus(seen)]
    rank_set = {_int(r.get("rank")) for r in rank_rows} | {_int(f.get("rank")) for f in findings}
    placement = {}
    for r in rank_rows:
        gpu = next((g for g in gpus if g.matches(r.get("host"), normalize_pci(r.get("pci_bus_id") or ""),
                                                 _int(r.get("gpu_index")))), None)
        placement[int(r["rank"])] = gpu.label() if gpu else str(r.get("host"))
    return Choices(
        hosts=tuple(sorted({str(h) for h in hosts if h and not pd.isna(h)}, key=natural_key)),
        gpus=tuple(sorted(gpus, key=lambda g: (natural_key(g.host), g.index if g.index is not None else 1 << 20,
                                               g.pci or ""))),
        ranks=tuple(sorted(r for r in rank_set if r is not None)),
        placement=placement,
    )


def _nic_only(finding: dict) -> bool:
    """A network finding naming a PCI id but no GPU index: the id is the NIC's (an IB link
    finding carries the HCA's), and offering it as a GPU would teach a wrong board."""
    return finding.get("category") == "network_fabric" and _int(finding.get("gpu_index")) is None


def _merge_gpus(seen: Iterable[tuple]) -> list[GpuChoice]:
    """One choice per board: by (host, PCI id); a sighting without a PCI id joins the board of
    that host with the same index, else stands alone."""
    by_pci: dict[tuple[str, str], int | None] = {}
    bare: list[tuple[str, int]] = []
    for host, pci, index in seen:
        if not host or (isinstance(host, float) and pd.isna(host)):
            continue
        pci = normalize_pci(pci) if isinstance(pci, str) and pci else None
        if pci:
            if by_pci.get((host, pci)) is None:
                by_pci[(host, pci)] = index
        elif index is not None:
            bare.append((host, index))
    gpus = [GpuChoice(host, pci, index) for (host, pci), index in by_pci.items()]
    for host, index in dict.fromkeys(bare):
        if not any(g.host == host and g.index == index for g in gpus):
            gpus.append(GpuChoice(host, None, index))
    return gpus


def asked_facets(choices: Choices) -> tuple[tuple[str, str], ...]:
    """The facets worth asking: a culprit question with a single candidate (one host in the
    evidence) is a free point, not a question, so it is left out."""
    only_one = {"host": len(choices.hosts) <= 1, "gpu": len(choices.gpus) <= 1, "rank": len(choices.ranks) <= 1}
    return tuple((facet, question) for facet, question in FACETS if not only_one.get(facet, False))


@dataclass(frozen=True)
class AnswerKey:
    """The diagnosis's answer to each facet (``None``: no single host / GPU / rank), and the
    other answers the evidence supports (``also``: facet -> values also scored right)."""

    category: str
    interruption: str
    host: str | None
    gpu: GpuChoice | None
    rank: int | None
    summary: str
    quotes: tuple[dict, ...]
    cascade: int  # findings the diagnosis lists as caused by the root cause
    also: dict = field(default_factory=dict, compare=False)
    why_also: dict = field(default_factory=dict, compare=False)

    @classmethod
    def from_diagnosis(cls, diagnosis: dict, choices: Choices) -> AnswerKey:
        verdict, root = diagnosis.get("verdict") or {}, diagnosis.get("root_cause") or {}
        host = root.get("host") or None
        pci = normalize_pci(root.get("gpu_pci") or "")
        index = _int(root.get("gpu_index"))
        gpu = None
        if host and (pci or index is not None):
            gpu = next((g for g in choices.gpus if g.matches(host, pci, index)), GpuChoice(host, pci, index))
        interruption = verdict.get("interruption") or "unknown"
        also, why_also = _supported_alternatives(diagnosis, interruption, host, _int(root.get("rank")), choices)
        return cls(category=verdict.get("category") or root.get("category") or "none",
                   interruption=interruption, host=host, gpu=gpu,
                   rank=_int(root.get("rank")), summary=verdict.get("summary") or "",
                   quotes=tuple(root.get("evidence") or ()),
                   cascade=sum(1 for f in diagnosis.get("findings") or [] if f.get("caused_by")),
                   also=also, why_also=why_also)

    def value(self, facet: str):
        return getattr(self, facet)


def _supported_alternatives(diagnosis: dict, interruption: str, host: str | None, rank: int | None,
                            choices: Choices) -> tuple[dict, dict]:
    """Answers the evidence supports besides the key's, and why each is accepted.

    - **rank**: when the cause names no single rank, the ranks the others waited for ("rank(s)
      2, 3 never arrived": the timeout findings it caused name them) are right too - on the
      culprit's host where the rank map places them.

    Hard or soft has one answer: a soft root cause is never shown as critical or "drain the node"
    (:data:`gpulib.vocabulary.SEVERITY_CEILING`), so no output teaches the other reading."""
    also: dict[str, set] = {}
    why: dict[str, str] = {}
    root_id = (diagnosis.get("root_cause") or {}).get("finding")
    findings = diagnosis.get("findings") or []
    if rank is None and root_id:
        waited_for = {int(r) for f in findings if f.get("caused_by") == root_id for r in f.get("never_arrived") or []}
        if host:
            placed = {r for r in waited_for if str(choices.placement.get(r, "")).startswith(f"{host} ")}
            waited_for = placed or waited_for
        if waited_for:
            also["rank"] = waited_for
            why["rank"] = (f"the cause is not one process, but rank(s) {', '.join(map(str, sorted(waited_for)))} "
                           "never arrived at the collective the others waited in: naming one of them is right too")
    return also, why


@dataclass(frozen=True)
class Mark:
    """One facet of one attempt: what was picked, whether it is right, and why."""

    facet: str
    question: str
    picked: str  # as shown to the trainee
    right: bool
    answer: str  # the key, as shown
    why: str  # the reason, shown with the answer
    hint: str  # where to look, shown instead while the trainee may still try again

    @property
    def points(self) -> int:
        return int(self.right)


def label(facet: str, value) -> str:
    """How a facet's value reads on screen."""
    if value == UNANSWERED:
        return "(not answered)"
    if value is None or value == NOBODY:
        return {"host": "no single host", "gpu": "no single GPU", "rank": "no single rank"}.get(facet, "-")
    if isinstance(value, GpuChoice):
        return value.label()
    if facet == "rank":
        return f"rank {value}"
    if facet == "category" and value in CATEGORY_WORDS:
        return category_label(value)
    return str(value)


def category_label(category: str) -> str:
    """``a GPU fell off the bus (PCIe link lost, Xid 79) [gpu_fell_off_bus]``: words first."""
    return f"{CATEGORY_WORDS.get(category, category)} [{category}]"


def grade(picked: dict, key: AnswerKey, choices: Choices) -> list[Mark]:
    """Score each facet of ``picked`` (facet -> value from the pickers) against ``key``."""
    marks = []
    for facet, question in asked_facets(choices):
        value = picked.get(facet, UNANSWERED)
        expected = key.value(facet)
        if value == UNANSWERED:
            right = False
        elif value in key.also.get(facet, ()):
            right = True
        elif facet in ("host", "gpu", "rank") and expected is None:
            right = value == NOBODY
        else:
            right = value == expected
        why = _why(facet, value, key, choices)
        if facet in key.why_also:
            why += f"; {key.why_also[facet]}"
        marks.append(Mark(facet, question, label(facet, value), right, label(facet, expected), why,
                          _hint(facet, value, key)))
    return marks


def _first_quote(key: AnswerKey) -> str:
    if not key.quotes:
        return ""
    first = key.quotes[0]
    return f"{first.get('file')}:{first.get('line')}: {first.get('text')}"


def _why(facet: str, value, key: AnswerKey, choices: Choices) -> str:
    """The reason for the key's answer, shown after the reveal."""
    first = _first_quote(key)
    if facet == "category":
        why = key.summary or f"the diagnosis names {key.category}"
        if value in CASCADE_LOOKALIKES and value != key.category and key.cascade:
            why += f" ({value} is what the {key.cascade} cascade finding(s) look like: symptoms, not the cause)"
        return why
    if facet == "interruption":
        meaning = {"hard": "the hardware failed: drain or repair it before relaunching",
                   "soft": "the process failed and the hardware is fine: fix the job and resume",
                   "none": "positive evidence of a normal end and no error",
                   "unknown": "an error without an explained cause: collect more evidence"}
        return meaning.get(key.interruption, "") + (f"; first event: {first}" if first else "")
    if facet == "host":
        return f"the first abnormal event is there: {first}" if key.host and first else (
            "the cause is not on one host" if key.host is None else f"the diagnosis places it on {key.host}")
    if facet == "gpu":
        if key.gpu is None:
            return "the cause is not one GPU (host-wide, network or job-wide)"
        return (f"named by PCI id {key.gpu.pci}, which survives renumbering; the index is the one the job saw"
                if key.gpu.pci else f"the diagnosis names GPU {key.gpu.index} of {key.gpu.host}")
    if key.rank is None:
        return "no single rank: no rank map, or the cause is not one process"
    where = choices.placement.get(key.rank)
    return f"rank {key.rank} ran on {where} (NCCL rank map); the other ranks waited for it" if where else (
        f"the diagnosis names rank {key.rank}")


def _hint(facet: str, value, key: AnswerKey) -> str:
    """Where to look for a wrong facet, without the answer."""
    hint = HINTS[facet]
    if facet == "category" and value in CASCADE_LOOKALIKES and key.cascade and value != key.category:
        hint += f" {key.cascade} finding(s) here are caused by an earlier event."
    return hint


def score(marks: Sequence[Mark]) -> tuple[int, int]:
    """(points, out of)."""
    return sum(m.points for m in marks), len(marks)
