"""The diagnosis as JSON (``gpulib.diagnosis/1``) and as text an on-call engineer reads at 03:00."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpulib.diagnose.headline import headline_lines
from gpulib.diagnose.model import TimelineEntry
from gpulib.diagnose.nodes import nodes_text
from gpulib.findings import Finding

SCHEMA = "gpulib.diagnosis/1"


@dataclass
class Diagnosis:
    interruption: str  # hard | soft | none | unknown
    category: str
    summary: str
    root_cause: Finding | None = None
    findings: list[Finding] = field(default_factory=list)
    timeline: list[TimelineEntry] = field(default_factory=list)
    checkpoints: dict = field(default_factory=lambda: {"resume_from": None, "rejected": []})
    inputs: list[dict] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    nodes: list[dict] = field(default_factory=list)  # per-node summary of a multi-node incident (gpulib.fleet)

    def to_dict(self) -> dict:
        rc = self.root_cause
        return {
            "schema": SCHEMA,
            "verdict": {"interruption": self.interruption, "category": self.category, "summary": self.summary},
            "root_cause": None if rc is None else {
                "category": rc.category, "host": rc.host, "gpu_index": rc.gpu_index, "gpu_pci": rc.gpu_pci,
                "gpu_uuid": rc.gpu_uuid, "rank": rc.rank, "time": rc.time, "finding": rc.id,
                "evidence": [e.to_dict() for e in rc.quotes[:12]],
            } | ({"identified_by": rc.extra["identified_by"]} if rc.extra.get("identified_by") else {}),
            "findings": [f.to_dict() for f in self.findings],
            "timeline": [t.to_dict() for t in self.timeline],
            "checkpoints": self.checkpoints,
            "inputs": self.inputs,
            "next_steps": self.next_steps,
            "nodes": self.nodes,
        }

    # ---------------------------------------------------------------- text
    def to_text(self) -> str:
        out: list[str] = headline_lines(self.to_dict())  # the block the runbook report shows on top
        rc = self.root_cause
        if rc is not None:
            out.append("")
            out.append("ROOT CAUSE")
            where = rc.where()
            out.append(f"  {rc.title}")
            if where:
                out.append(f"  culprit: {where}")
            for ev in rc.quotes[:6]:
                out.append(f"    {ev.file}:{ev.line if ev.line else '-'}  {_clip(ev.text, 110)}")
            if rc.actions:
                out.append("")
                out.append("WHAT TO DO")
                for action in rc.actions:
                    out.append(f"  - {action}")
        others = [f for f in self.findings if f is not rc and f.role == "cause" and not f.caused_by]
        _section(out, "OTHER PROBLEMS FOUND (not linked to this interruption)",
                 [f"  [{f.severity}] {f.title}" for f in others[:8]])
        seen = [f for f in self.findings if f.role == "context" and not f.caused_by
                and f.severity in ("critical", "error", "warning")]
        _section(out, "ALSO SEEN (worth fixing before the relaunch)",
                 [f"  [{f.severity}] {_clip(f.title, 120)}" for f in seen[:8]])
        cascade = [f for f in self.findings if rc is not None and f.caused_by and f.role in ("symptom", "context")]
        _section(out, "DISCOUNTED AS CASCADE (consequences of the root cause)",
                 [f"  - {_clip(f.title, 120)}{_first_location(f)}" for f in cascade[:10]])

        out += nodes_text(self.nodes, self.findings)
        _section(out, "TIMELINE (UTC)",
                 [f"  {t.time or '?':20}  {(t.host or '-'):16}  {_clip(t.event, 90)}" for t in self.timeline[:25]])
        _section(out, "NEXT STEPS", [f"  - {step}" for step in self.next_steps])
        ck = self.checkpoints
        if ck.get("resume_from") or ck.get("rejected"):
            out.append("")
            out.append("CHECKPOINTS")
            out.append(f"  resume from: {ck.get('resume_from') or 'none found'}")
            for r in ck.get("rejected", [])[:6]:
                out.append(f"  rejected: {r['path']}: {r['reason']}")
            if ck.get("resume_command"):
                out.append(f"  resume: {ck['resume_command']}")
        bad = [i for i in self.inputs if i.get("problems")]
        out.append("")
        kinds = Counter(i["kind"] for i in self.inputs)
        files = len({i["path"] for i in self.inputs})  # a pasted session's outputs are inputs of one file
        out.append(f"INPUTS: {files} file(s): " + ", ".join(f"{n} {k}" for k, n in kinds.most_common())
                   + (f"; {len(bad)} with problems:" if bad else ""))
        for i in bad[:15]:
            out.append(f"  {i['path']}: {'; '.join(i['problems'])[:140]}")
        return "\n".join(out) + "\n"


def _section(out: list[str], heading: str, lines: list[str]) -> None:
    """Append a blank line, the heading and its lines, unless there is nothing to say."""
    if lines:
        out += ["", heading, *lines]


def _first_location(f) -> str:
    first = f.quotes[0] if f.quotes else None
    return f"  ({first.file}:{first.line})" if first and first.line else ""


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."
