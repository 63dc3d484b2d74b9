"""``gpulib archive diff A B``: what got worse between two runs (the nightly health-report trend).

Why a diff: one health report says "GPU 3 has 2 corrected ECC errors"; only the trend says
whether that number is growing (a GPU on its way out) or has been 2 for a year. The diff reads
nothing but the two runs' ``findings.json``, so it works on any archive, offline, months later.

The finding fields it compares (notebooks add them; every one is optional):

``xid`` (int) with ``host`` and ``gpu_pci`` or ``gpu_index``
    a kernel Xid on a GPU; a (host, GPU, Xid) that B has and A had not is a **new Xid**.
``gpus`` (list of GPU records: ``host``, ``uuid``, ``pci_bus_id``, ``index``/``gpu_index``,
``name``, ``lost`` and any :data:`COUNTERS`)
    the GPU inventory of a run (the health report records it as an ``info`` finding). A GPU in
    A's inventory that is missing from B's, or lost in B, has **vanished**.
:data:`COUNTERS` (ints) on a GPU record, or on a finding that names a GPU
    ECC / retired-page / row-remap / PCIe-replay counters; a value in B above A's has **grown**.
numeric fields ending in ``_gbps`` (e.g. ``busbw_gbps``), also nested (``fabric.results[...]``)
    a measured bandwidth, keyed by the finding's ``step``, ``id`` and the field's path; a value
    in B more than ``bandwidth_drop_pct`` below A's has **fallen**.
``step`` + ``id`` + ``severity``
    a warning-or-worse finding in B whose (step, id) A did not have is **new**; the reverse is
    **resolved**.

GPUs are matched on UUID, else on host + normalised PCI bus id, else on host + index.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpulib.findings import gpu_name
from gpulib.identity import normalize_pci
from gpulib.parsers.gpu_records import ERROR_COUNTERS as COUNTERS
from gpulib.runbooks.archive import ArchivedRun

_WORSE = ("critical", "error", "warning")


def gpu_key(record: dict) -> str | None:
    """Stable identity of a GPU across runs (see module docstring), or None when unnamed."""
    uuid = record.get("uuid") or record.get("gpu_uuid")
    if uuid:
        return str(uuid)
    host = record.get("host") or "?"
    pci = normalize_pci(record.get("pci_bus_id") or record.get("gpu_pci"))
    if pci:
        return f"{host}/{pci}"
    index = record.get("gpu_index", record.get("index"))
    return f"{host}/gpu{index}" if isinstance(index, int) else None


def _label(record: dict) -> str:
    host = record.get("host")
    ident = normalize_pci(record.get("pci_bus_id") or record.get("gpu_pci")) or record.get("uuid") or record.get("gpu_uuid")
    text = gpu_name(ident, record.get("gpu_index", record.get("index"))) or "GPU"
    return f"{text} on {host}" if host else text


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_LIST_LABELS = ("collective", "size_bytes", "name", "id")


def _bandwidths(node, path: str = "", depth: int = 0):
    """``(dotted.path, value)`` of every number under a key ending in ``_gbps``, nested results
    included (``fabric.results[all_reduce].busbw_gbps``); list items are named by their
    ``collective``/``size_bytes``/``name``/``id`` so that the same measurement matches across runs."""
    if depth > 5:
        return
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if str(key).endswith("_gbps") and _is_number(value):
                yield here, float(value)
            elif isinstance(value, (dict, list)):
                yield from _bandwidths(value, here, depth + 1)
    elif isinstance(node, list):
        for n, item in enumerate(node):
            label = next((f"{k}={item[k]}" for k in _LIST_LABELS if isinstance(item, dict) and k in item), str(n))
            yield from _bandwidths(item, f"{path}[{label}]", depth + 1)


@dataclass
class RunDigest:
    """The comparable facts of one run, extracted from its findings."""

    xids: dict[tuple, dict] = field(default_factory=dict)  # (host, gpu, xid) -> finding
    inventory: dict[str, dict] | None = None  # gpu key -> record; None when the run recorded none
    counters: dict[str, dict[str, float]] = field(default_factory=dict)  # gpu key -> counter -> max
    labels: dict[str, str] = field(default_factory=dict)
    bandwidth: dict[tuple, float] = field(default_factory=dict)  # (step, id, field) -> value
    worse: dict[tuple, dict] = field(default_factory=dict)  # (step, id) -> finding at warning or above

    @classmethod
    def of(cls, findings: list[dict]) -> RunDigest:
        digest = cls()
        for f in findings:
            if f.get("severity") in _WORSE:
                digest.worse[(f.get("step"), f.get("id"))] = f
            if _is_number(f.get("xid")):
                gpu = normalize_pci(f.get("gpu_pci") or f.get("pci_bus_id")) or f.get("gpu_index")
                digest.xids.setdefault((f.get("host"), gpu, int(f["xid"])), f)
            for name, value in _bandwidths(f):
                digest.bandwidth[(f.get("step"), f.get("id"), name)] = value
            gpus = f.get("gpus")
            if isinstance(gpus, list):
                digest.inventory = digest.inventory or {}
                for gpu in gpus:
                    if isinstance(gpu, dict) and (key := gpu_key(gpu)):
                        digest.inventory[key] = gpu
                        digest._count(key, gpu)
            digest._count(gpu_key(f), f)
        return digest

    def _count(self, key: str | None, record: dict) -> None:
        if key is None:
            return
        values = {c: float(record[c]) for c in COUNTERS if _is_number(record.get(c))}
        if values:
            self.labels.setdefault(key, _label(record))
            mine = self.counters.setdefault(key, {})
            for name, value in values.items():
                mine[name] = max(value, mine.get(name, value))


@dataclass
class RunDiff:
    a: str
    b: str
    new_xids: list[str] = field(default_factory=list)
    grown_counters: list[str] = field(default_factory=list)
    fallen_bandwidth: list[str] = field(default_factory=list)
    vanished_gpus: list[str] = field(default_factory=list)
    new_findings: list[str] = field(default_factory=list)
    resolved_findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: :class:`gpulib.runbooks.provenance.EvidenceCheck` as a dict: what each run read
    evidence: dict | None = None

    @property
    def regressed(self) -> bool:
        return bool(self.new_xids or self.grown_counters or self.fallen_bandwidth or self.vanished_gpus
                    or self.new_findings)

    def to_dict(self) -> dict:
        return {**asdict(self), "regressed": self.regressed}

    def lines(self) -> list[str]:
        out = []
        if self.evidence and self.evidence.get("level") in ("warning", "refuse"):
            out.append(f"WARNING: {self.evidence['message']}")
            out.append("WARNING: what follows may be the difference between two incidents, not a trend")
        out += [f"A: {self.a}", f"B: {self.b}"]
        sections = (("new Xids", self.new_xids), ("grown error counters", self.grown_counters),
                    ("fallen bandwidth", self.fallen_bandwidth), ("vanished GPUs", self.vanished_gpus),
                    ("new findings (warning or worse)", self.new_findings),
                    ("resolved findings", self.resolved_findings), ("notes", self.notes))
        for title, items in sections:
            if items:
                out.append(f"{title}:")
                out += [f"  {item}" for item in items]
        out.append("verdict: WORSE than A" if self.regressed else "verdict: nothing got worse")
        return out


def diff_findings(a: list[dict], b: list[dict], *, a_name: str = "A", b_name: str = "B",
                  bandwidth_drop_pct: float = 10.0) -> RunDiff:
    """Compare two findings lists (A older, B newer); see the module docstring for the rules."""
    old, new = RunDigest.of(a), RunDigest.of(b)
    diff = RunDiff(a_name, b_name)
    for key, f in sorted(new.xids.items(), key=lambda kv: str(kv[0])):
        if key not in old.xids:
            diff.new_xids.append(f"Xid {key[2]} on {_label(f)}: {f.get('title', '')} [{f.get('severity')}]")
    for key, counters in sorted(new.counters.items()):
        before = old.counters.get(key, {})
        for name, value in sorted(counters.items()):
            if name in before and value > before[name]:
                diff.grown_counters.append(f"{new.labels[key]}: {name} {before[name]:g} -> {value:g}")
            elif name not in before and value > 0 and key in old.counters:
                diff.grown_counters.append(f"{new.labels[key]}: {name} (not recorded) -> {value:g}")
    for key, value in sorted(new.bandwidth.items(), key=lambda kv: str(kv[0])):
        before = old.bandwidth.get(key)
        if before and value < before * (1 - bandwidth_drop_pct / 100):
            diff.fallen_bandwidth.append(
                f"{key[0]}/{key[1]}: {key[2]} {before:g} -> {value:g} ({100 * (value - before) / before:+.0f}%)")
    if old.inventory is not None and new.inventory is None:
        diff.notes.append("B recorded no GPU inventory (no finding with 'gpus'): vanished GPUs cannot be checked")
    elif old.inventory is not None:
        for key, gpu in sorted(old.inventory.items()):
            now = new.inventory.get(key)
            if now is None:
                diff.vanished_gpus.append(f"{_label(gpu)}: in A's inventory, absent from B's")
            elif now.get("lost") and not gpu.get("lost"):
                diff.vanished_gpus.append(f"{_label(gpu)}: lost in B")
    for key, f in sorted(new.worse.items(), key=lambda kv: str(kv[0])):
        if key not in old.worse and not _is_number(f.get("xid")):  # new Xids are listed above
            diff.new_findings.append(f"[{f.get('severity')}] {key[0]}: {f.get('title')}")
    for key, f in sorted(old.worse.items(), key=lambda kv: str(kv[0])):
        if key not in new.worse:
            diff.resolved_findings.append(f"[{f.get('severity')}] {key[0]}: {f.get('title')}")
    if old.inventory is None and new.inventory is None:
        diff.notes.append("neither run recorded a GPU inventory")
    return diff


def diff_runs(a: ArchivedRun, b: ArchivedRun, bandwidth_drop_pct: float = 10.0, evidence=None) -> RunDiff:
    """``evidence``: the runs' :class:`~gpulib.runbooks.provenance.EvidenceCheck` (computed when not given)."""
    from gpulib.runbooks.provenance import compare_evidence

    diff = diff_findings(a.findings, b.findings, a_name=str(a.path), b_name=str(b.path),
                         bandwidth_drop_pct=bandwidth_drop_pct)
    check = evidence or compare_evidence(a, b)
    diff.evidence = check.to_dict()
    if check.level == "note":
        diff.notes.append(check.message)
    return diff
