"""The GPU ledger: every GPU's history across archived incidents and health reports.

Why: one Xid 79 is bad luck; the same board as root cause of three incidents in a month is a
board to pull. Nobody remembers that across on-call shifts, and host names do not help (a board
moves between hosts after a repair), so the ledger keys each GPU by its UUID or board serial
(fallback ``host/PCI``, then ``host/gpuN``) and collects, from any mix of:

* run archives (``archive/``, ``archive/<runbook>/`` or one run): every finding of
  ``findings.json``; in an incident run the finding the cascade points at (``caused_by``) is
  the root cause; the run's evidence (``--evidence`` in its manifest) is read too when it
  still exists, for serials and counters;
* ``gpulib diagnose --format json`` outputs (``gpulib.diagnosis/1``): the root cause;
* evidence bundles and raw folders: nvidia-smi snapshots, i.e. ECC, row-remap and retired-page
  counters at the time of capture (the same GPU over many captures = its trend).

Replacement rules (each cites its origin, see ``docs`` of the constants below) make a
``replace`` / ``watch`` / ``ok`` recommendation with the evidence that triggered it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.evidence import kinds
from gpulib.evidence.gather import gather
from gpulib.logs import get_logger
from gpulib.runbooks.archive import ArchivedRun
from gpulib.runbooks.spec import RunbookError

log = get_logger(__name__)

#: Root-cause categories that are the GPU's own fault (not the job's, not the fabric's).
HARDWARE = frozenset({"gpu_fell_off_bus", "gpu_memory_error", "gpu_firmware_error", "nvlink_error"})
#: A hardware root cause this many times -> replace. GPUd escalates a recurring REBOOT Xid to
#: HARDWARE_INSPECTION after 2 occurrences (reference/health-checks-and-xid.md, GPUd).
REPEAT_ROOT_CAUSES = 2
#: Retired pages (SBE + DBE) at which the V100-era retirement table is full: NHC2018 / NHC
#: ``check_gpu_ecc`` (>= 62 and pending) - the GPU can no longer retire bad memory.
RETIRED_PAGES_FULL = 62
COUNTERS = ("ecc_aggregate_dbe", "ecc_aggregate_sbe", "ecc_volatile_dbe", "remapped_rows_uncorrectable",
            "remapped_rows_correctable", "remapped_rows_pending", "remapped_rows_failure", "retired_pages_dbe",
            "retired_pages_sbe")


@dataclass
class GpuEvent:
    """Something that happened to one GPU: a root cause, a finding, or a counter snapshot."""

    time: str | None
    source: str  # run directory, diagnosis file or evidence file
    kind: str  # root_cause | finding | snapshot
    category: str | None = None
    severity: str | None = None
    title: str = ""


@dataclass
class GpuRecord:
    key: str
    uuid: str | None = None
    serial: str | None = None
    hosts: set[str] = field(default_factory=set)
    pci: str | None = None
    index: int | None = None
    model: str | None = None
    events: list[GpuEvent] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)  # {"time", "source", counter: value}
    recommendation: str = "ok"  # replace | watch | ok
    reasons: list[str] = field(default_factory=list)

    @property
    def root_causes(self) -> list[GpuEvent]:
        return [e for e in self.events if e.kind == "root_cause"]

    @property
    def hardware_root_causes(self) -> list[GpuEvent]:
        return [e for e in self.root_causes if e.category in HARDWARE]

    @property
    def incidents(self) -> int:
        """Distinct runs / diagnoses that mention this GPU with a finding."""
        return len({e.source for e in self.events if e.kind != "snapshot"})

    def latest(self, counter: str):
        values = [s[counter] for s in sorted(self.samples, key=lambda s: s["time"] or "") if s.get(counter) is not None]
        return values[-1] if values else None

    def to_dict(self) -> dict:
        return {
            "key": self.key, "uuid": self.uuid, "serial": self.serial, "hosts": sorted(self.hosts), "pci": self.pci,
            "index": self.index, "model": self.model, "recommendation": self.recommendation, "reasons": self.reasons,
            "root_causes": len(self.root_causes), "hardware_root_causes": len(self.hardware_root_causes),
            "incidents": self.incidents, "latest": {c: self.latest(c) for c in COUNTERS},
            "events": [e.__dict__ for e in sorted(self.events, key=lambda e: e.time or "")],
            "samples": sorted(self.samples, key=lambda s: s["time"] or ""),
        }


@dataclass
class Ledger:
    gpus: dict[str, GpuRecord] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def ranked(self) -> list[GpuRecord]:
        """Worst first: replace before watch, then by hardware root causes, incidents, DBE."""
        order = {"replace": 0, "watch": 1, "ok": 2}
        return sorted(self.gpus.values(), key=lambda g: (
            order[g.recommendation], -len(g.hardware_root_causes), -len(g.root_causes), -g.incidents,
            -(g.latest("ecc_aggregate_dbe") or 0), g.key))

    def to_dict(self) -> dict:
        return {"schema": "gpulib.gpu-ledger/1", "sources": self.sources, "problems": self.problems,
                "gpus": [g.to_dict() for g in self.ranked()]}

    def to_text(self, top: int = 20) -> str:
        ranked = self.ranked()
        counts = Counter(g.recommendation for g in ranked)
        lines = [f"GPU LEDGER: {len(ranked)} GPU(s) from {len(self.sources)} source(s): "
                 f"{counts['replace']} replace, {counts['watch']} watch, {counts['ok']} ok"]
        for g in [g for g in ranked if g.recommendation != "ok"][:top]:
            where = ", ".join(sorted(g.hosts)) or "?"
            lines.append(f"  {g.recommendation.upper():8} {g.key}  ({where}, PCI {g.pci or '?'}, "
                         f"serial {g.serial or '?'}): {len(g.root_causes)} root cause(s), {g.incidents} incident(s)")
            lines += [f"      - {r}" for r in g.reasons]
        for p in self.problems[:10]:
            lines.append(f"  problem: {p}")
        return "\n".join(lines) + "\n"


class _Builder:
    """Collects raw events first, then joins them to GPU identities learnt from snapshots."""

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.by_pci: dict[tuple[str, str], tuple[str | None, str | None]] = {}  # (host, pci) -> (uuid, serial)
        self.pci_of: dict[tuple[str, int], str] = {}  # (host, index) -> pci
        self.pending: list[tuple[dict, GpuEvent]] = []  # (ids, event)
        self.snapshots: list[tuple[dict, dict]] = []  # (ids, sample)

    # ---------------------------------------------------------------- identities
    def learn(self, host: str | None, state, trust_index: bool) -> dict:
        """Remember the GPU's names. ``trust_index`` is False for a snapshot with a lost GPU:
        nvidia-smi then renumbers the others, so its indexes are not the job's indexes."""
        ids = {"host": host, "pci": state.pci_bus_id, "index": state.index if trust_index else None,
               "uuid": state.uuid, "serial": state.serial, "model": state.name}
        if host and state.pci_bus_id:
            if state.uuid or state.serial:
                self.by_pci[(host, state.pci_bus_id)] = (state.uuid, state.serial)
            if state.index is not None and trust_index:
                self.pci_of[(host, state.index)] = state.pci_bus_id
        return ids

    def key(self, ids: dict) -> str | None:
        host, pci, index = ids.get("host"), ids.get("pci"), ids.get("index")
        if not pci and host and index is not None:
            pci = self.pci_of.get((host, index))
        uuid, serial = ids.get("uuid"), ids.get("serial")
        if not (uuid or serial) and host and pci:
            uuid, serial = self.by_pci.get((host, pci), (None, None))
        ids.update(pci=pci, uuid=uuid, serial=serial)
        if uuid:
            return uuid
        if serial and serial.strip("0"):
            return f"serial:{serial}"
        if host and pci:
            return f"{host}/{pci}"
        if host and index is not None:
            return f"{host}/gpu{index}"
        return None

    def record(self, ids: dict) -> GpuRecord | None:
        key = self.key(ids)
        if key is None:
            return None
        g = self.ledger.gpus.setdefault(key, GpuRecord(key))
        g.uuid = g.uuid or ids.get("uuid")
        g.serial = g.serial or ids.get("serial")
        g.pci = g.pci or ids.get("pci")
        g.index = g.index if g.index is not None else ids.get("index")
        g.model = g.model or ids.get("model")
        if ids.get("host"):
            g.hosts.add(ids["host"])
        return g

    # ---------------------------------------------------------------- sources
    def add_finding(self, f: dict, source: str, root: bool, fallback_time: str | None) -> None:
        ids = {"host": f.get("host"), "pci": f.get("gpu_pci") or f.get("pci_bus_id"), "index": f.get("gpu_index"),
               "uuid": f.get("gpu_uuid")}
        if ids["pci"] is None and ids["index"] is None and ids["uuid"] is None:
            return  # not about one GPU
        if ids["host"] and ids["pci"] and ids["index"] is not None:  # a diagnosis joined them (NCCL busId)
            self.pci_of.setdefault((ids["host"], ids["index"]), ids["pci"])
        self.pending.append((ids, GpuEvent(f.get("time") or fallback_time, source, "root_cause" if root else "finding",
                                           f.get("category"), f.get("severity"), f.get("title") or "")))

    def add_diagnosis(self, doc: dict, source: str) -> None:
        rc = doc.get("root_cause")
        if rc:
            title = (doc.get("verdict") or {}).get("summary") or ""
            self.add_finding({**rc, "title": title, "severity": "critical"}, source, True, None)
        for f in doc.get("findings") or []:
            if not rc or f.get("id") != rc.get("finding"):
                self.add_finding(f, source, False, None)

    def add_run(self, run_dir: Path) -> None:
        try:
            run = ArchivedRun.open(run_dir)
            findings = run.findings
        except RunbookError as exc:
            self.ledger.problems.append(str(exc))
            return
        source = str(run_dir)
        started = run.manifest.get("started_at")
        causes = {f.get("caused_by") for f in findings if f.get("caused_by")}
        seen = set()
        for f in findings:
            if f.get("id") in seen:
                continue  # every incident step records its share of the same diagnosis
            seen.add(f.get("id"))
            self.add_finding(f, source, f.get("id") in causes, started)
        evidence = _run_evidence(run.manifest)
        if evidence is not None:
            self.add_evidence(evidence, fallback_time=started)
        self.ledger.sources.append(source)

    def add_evidence(self, path: Path, fallback_time: str | None = None) -> int:
        """Learn the GPU snapshots of one evidence path; how many were read (0: the path tells the
        ledger nothing, and the caller says so rather than count it as a source)."""
        inputs = gather([path], digests=False)  # every GPU snapshot's counters, not a digest's summary
        before = len(self.snapshots)
        for f in inputs.of_kind(*kinds.SMI_SNAPSHOTS):
            states = [s for s in f.records if hasattr(s, "lost")]
            complete = not any(s.lost for s in states)
            for state in states:
                ids = self.learn(state.host or f.host, state, complete)
                sample = {"time": state.captured_at or fallback_time, "source": f.display}
                sample.update({c: getattr(state, c, None) for c in COUNTERS})
                self.snapshots.append((ids, sample))
        read = len(self.snapshots) - before
        self.ledger.problems.extend(str(p) for p in inputs.problems)  # an unlistable folder is named
        if read:
            self.ledger.sources.append(str(path))
        else:
            self.ledger.problems.append(f"{path}: no GPU snapshot in it (nvidia-smi -q, its XML or table)")
        return read

    def finish(self) -> Ledger:
        for ids, sample in self.snapshots:
            g = self.record(dict(ids))
            if g is not None:
                g.samples.append(sample)
        for ids, event in self.pending:
            g = self.record(dict(ids))
            if g is not None:
                g.events.append(event)
        for g in self.ledger.gpus.values():
            recommend(g)
        return self.ledger


def _run_evidence(manifest: dict) -> Path | None:
    """The ``evidence`` parameter a run was given, when it still exists."""
    params = manifest.get("parameters") or {}
    for scope in ("cli", "values"):
        value = (params.get(scope) or {}).get("evidence")
        if value:
            path = Path(value)
            if not path.is_absolute():
                path = Path(manifest.get("cwd") or ".") / path
            return path if path.exists() else None
    return None


def _grew(g: GpuRecord, counter: str) -> tuple[dict, dict] | None:
    """First and last sample when ``counter`` went up between captures."""
    series = [s for s in sorted(g.samples, key=lambda s: s["time"] or "") if s.get(counter) is not None]
    if len(series) >= 2 and series[-1][counter] > series[0][counter]:
        return series[0], series[-1]
    return None


def recommend(g: GpuRecord) -> None:
    """Set ``recommendation`` and ``reasons`` (each reason names its evidence)."""
    replace, watch = [], []
    hw = g.hardware_root_causes
    if len(hw) >= REPEAT_ROOT_CAUSES:
        replace.append(f"hardware root cause of {len(hw)} incidents (>= {REPEAT_ROOT_CAUSES}): "
                       + "; ".join(f"{e.time or '?'} {e.category} ({e.source})" for e in hw[:5]))
    elif hw:
        watch.append(f"hardware root cause once: {hw[0].time or '?'} {hw[0].category} ({hw[0].source})")
    failed = [s for s in g.samples if s.get("remapped_rows_failure")]
    if failed:
        replace.append(f"row remapping failed (no spare rows left) at {failed[0]['time']} ({failed[0]['source']})")
    retired = [s for s in g.samples if (s.get("retired_pages_sbe") or 0) + (s.get("retired_pages_dbe") or 0)
               >= RETIRED_PAGES_FULL]
    if retired:
        replace.append(f"{retired[0]['retired_pages_sbe']} + {retired[0]['retired_pages_dbe']} retired pages "
                       f"(table full at {RETIRED_PAGES_FULL}) ({retired[0]['source']})")
    for counter, what in (("ecc_aggregate_dbe", "aggregate uncorrectable ECC errors"),
                          ("remapped_rows_uncorrectable", "uncorrectable remapped rows")):
        grew = _grew(g, counter)
        if grew:
            first, last = grew
            replace.append(f"{what} keep coming: {first[counter]} at {first['time']} -> {last[counter]} at "
                           f"{last['time']} ({last['source']})")
        elif (g.latest(counter) or 0) > 0:
            watch.append(f"{g.latest(counter)} {what} (latest capture)")
    if any(s.get("remapped_rows_pending") for s in g.samples[-1:]):
        watch.append("row remap pending: reset the GPU so the spare row takes effect")
    serious = [e for e in g.events if e.kind == "finding" and e.severity == "critical" and e.category in HARDWARE]
    if serious and not hw:
        watch.append(f"{len(serious)} critical hardware finding(s), e.g. {serious[0].title[:100]} ({serious[0].source})")
    g.recommendation = "replace" if replace else ("watch" if watch else "ok")
    g.reasons = replace + watch


def _classify(path: Path) -> str:
    """What a given path holds. ``os.path.isfile``, not ``Path.is_file``: a folder that cannot be
    entered answers "no" here (and is named by the evidence reader), not a PermissionError."""
    isfile, isdir = os.path.isfile, os.path.isdir
    if isfile(path) and path.suffix == ".json":
        return "json"
    if isfile(path / "manifest.json"):
        try:
            fmt = json.loads((path / "manifest.json").read_text()).get("format", "")
        except (OSError, ValueError):
            return "evidence"
        return "run" if str(fmt).startswith("gpulib.runbook-run") else "evidence"
    if isdir(path) and any(isfile(p / "manifest.json") and isfile(p / "findings.json") for p in path.glob("*/")):
        return "runbook"
    if isdir(path) and any(isdir(p) and any(isfile(q / "findings.json") for q in p.glob("*/"))
                           for p in path.glob("*/")):
        return "archive"
    return "evidence"


def build_ledger(paths: list[str | Path]) -> Ledger:
    """The ledger over run archives, diagnosis JSON files and evidence folders (any mix)."""
    b = _Builder()
    for given in paths:
        path = Path(given)
        if not path.exists():
            b.ledger.problems.append(f"{path}: no such file or folder")
            continue
        kind = _classify(path)
        if kind == "json":
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                b.ledger.problems.append(f"{path}: not readable JSON ({exc})")
                continue
            if not (isinstance(doc, dict) and str(doc.get("schema", "")).startswith("gpulib.diagnosis")):
                b.ledger.problems.append(f"{path}: not a gpulib diagnosis (no \"schema\": \"gpulib.diagnosis/1\")")
                continue
            b.add_diagnosis(doc, str(path))
            b.ledger.sources.append(str(path))
        elif kind == "run":
            b.add_run(path)
        elif kind in ("runbook", "archive"):
            runs = sorted(p.parent for p in path.glob("*/manifest.json" if kind == "runbook" else "*/*/manifest.json")
                          if not p.parent.name.startswith("."))
            for run in runs:
                b.add_run(run)
        else:
            b.add_evidence(path)
    return b.finish()
