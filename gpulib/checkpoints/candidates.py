"""Which checkpoint to resume from, as the rows of notebook 07's picker and as findings.

Why here, in the checkpoints capability and not in the notebook: the picker's rows (recommended,
older complete ones, rejected ones with why, the resume command, the steps a resume re-trains)
are the resume decision of :func:`gpulib.checkpoints.latest.find_latest` said for people; any
face that offers a resume (a notebook, a report, a script) must offer the same rows. Plain
dicts in and out (the JSON contract), no pandas.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gpulib.checkpoints import resume as resume_plan
from gpulib.findings import event_id, finding_dict


def report_dict(report: Any) -> dict:
    return report.to_dict() if hasattr(report, "to_dict") else dict(report or {})


def checkpoint_step(report: Any) -> int | None:
    """The training step of the chosen checkpoint, read from its name (``..._step_004000.pt``)."""
    data = report_dict(report)
    if data.get("step") is not None:
        return int(data["step"])
    match = re.search(r"(?:step|iter|global_step)[_-]?(\d+)", str(data.get("resume_from") or ""))
    return int(match.group(1)) if match else None


def checkpoint_candidates(report: Any, last: dict | None = None) -> list[dict]:
    """Every checkpoint ``find_latest`` found, in the order notebook 07's picker offers them:
    the recommended one first, then the other complete ones (newest first), then the rejected
    ones (newest first) with why.

    Each is ``{name, path, step, verdict (recommended|complete|rejected), label, why, lacks,
    resume_command, steps_lost, redo_s, last_step}``. ``steps_lost`` is the last step the
    training log shows minus the checkpoint's step (what resuming from it re-trains), ``redo_s``
    that times the median seconds per step of the log. A rejected checkpoint has no command: its
    ``resume_command`` is a shell comment saying why not, so a copied line cannot run it.
    ``last`` is the last step the logs show (``{step, time, rank, file, line, seconds_per_step}``;
    the notebook face reads it from its training-step table), or None when unknown.
    """
    candidates = list(getattr(report, "candidates", None) or [])
    chosen = getattr(report, "chosen", None)
    if not candidates and not hasattr(report, "candidates"):  # a to_dict(): only the recommended one has a command
        return _candidates_from_dict(report_dict(report), last)
    targets = [Path(v).name for ptrs in (getattr(report, "pointers", None) or {}).values() for v in ptrs.values()]
    complete = [c for c in reversed(candidates) if c.complete and c is not chosen]
    rejected = [c for c in reversed(candidates) if not c.complete]
    rows = []
    for c, verdict in ([(chosen, "recommended")] if chosen else []) + [(c, "complete") for c in complete] + [
            (c, "rejected") for c in rejected]:
        if verdict == "rejected":
            why, lacks, command = "; ".join(c.reasons), [], f"# do not resume from {c.path}: {'; '.join(c.reasons)}"
        else:
            lacks = list(report.lacks) if c is chosen else resume_plan.lacks(c, candidates)
            why = "newest complete checkpoint" if c is chosen else "complete, older than the recommended one"
            command = report.resume_command if c is chosen and report.resume_command else resume_plan.command(
                c, c.path.parent, targets)
        step = c.step if c.counter == "step" else None  # an epoch-only torch.save loop: no step to subtract
        rows.append(_candidate_row(str(c.path), c.name, step, verdict, why, lacks, command, last))
    return rows


def _candidates_from_dict(data: dict, last: dict | None) -> list[dict]:
    rows = []
    if data.get("resume_from"):
        step = data.get("step") if data.get("counter", "step") == "step" else None
        rows.append(_candidate_row(data["resume_from"], Path(data["resume_from"]).name, step, "recommended",
                                   "newest complete checkpoint", data.get("lacks") or [], data.get("resume_command"), last))
    for item in data.get("rejected") or []:
        path, reason = (item.get("path"), item.get("reason")) if isinstance(item, dict) else item
        rows.append(_candidate_row(str(path), Path(str(path)).name, None, "rejected", reason, [],
                                   f"# do not resume from {path}: {reason}", last))
    return rows


def _candidate_row(path: str, name: str, step: int | None, verdict: str, why: str, lacks: list[str],
                   command: str | None, last: dict | None) -> dict:
    lost = None
    if verdict != "rejected" and step is not None and last is not None and last["step"] >= step:
        lost = last["step"] - step
    per_step = (last or {}).get("seconds_per_step")
    shown = {"recommended": "recommended", "complete": "older, complete",
             "rejected": "REJECTED: " + (why or "").replace(f"{name}: ", "")[:70]}[verdict]
    return {"name": name, "path": path, "step": step, "verdict": verdict,
            "label": f"{name} (step {step if step is not None else '?'}) - {shown}", "why": why, "lacks": list(lacks),
            "resume_command": command, "steps_lost": lost,
            "redo_s": lost * per_step if lost is not None and per_step else None, "last_step": last}


def steps_lost_text(candidate: dict) -> str:
    """``steps lost: 2000 (last logged step 6000 at ... in train.log:556; checkpoint step 4000),
    about 1 h 17 min of training to redo at 2.3 s/step`` - or why it cannot be said."""
    last = candidate.get("last_step")
    if candidate["verdict"] == "rejected":
        return "steps lost: not resumable"
    if last is None:
        return "steps lost: unknown (no training step in the logs of the evidence)"
    if candidate.get("step") is None:
        return f"steps lost: unknown (the checkpoint has no step; the log's last step is {last['step']})"
    if candidate["steps_lost"] is None:
        return (f"steps lost: unknown (the checkpoint's step {candidate['step']} is past the log's last step "
                f"{last['step']}: the log is cut or from another run)")
    where = f"{last['file']}:{last['line']}" if last.get("file") else "the training log"
    text = (f"steps lost: {candidate['steps_lost']} (last logged step {last['step']}"
            + (f" at {last['time']}" if last.get("time") else "") + f" in {where}; checkpoint step {candidate['step']})")
    if candidate.get("redo_s"):
        text += (f", about {_duration(candidate['redo_s'])} of training to redo at "
                 f"{last['seconds_per_step']:.3g} s/step")
    return text


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{max(minutes, 1)} min"


def checkpoint_findings(report: Any) -> list[dict]:
    """The resume decision from ``find_latest``: resume-from (info), no valid checkpoint among those
    found (critical), or no checkpoint in the evidence at all (warning: not checked, not lost)."""
    data = report_dict(report)
    out = []
    resume = data.get("resume_from")
    if resume:
        actions = [data["resume_command"]] if data.get("resume_command") else []
        if data.get("lacks"):
            actions += [f"not in the checkpoint: {lack}" for lack in data["lacks"]]
        out.append(finding_dict("resume-from", "info", "none", f"resume from {resume}", actions=actions,
                           resume_from=str(resume)))
    elif data.get("checkpoints") or data.get("rejected"):
        out.append(finding_dict("no-valid-checkpoint", "critical", "none",
                                "no valid checkpoint found: the job would restart from scratch",
                           actions=["Look for checkpoints on other storage (object store, other nodes)."]))
    else:  # nothing looked like a checkpoint: the evidence simply does not include them
        out.append(finding_dict("no-checkpoints-in-evidence", "warning", "none",
                           "no checkpoint folder in the evidence: the resume point is not checked",
                           actions=["Run this step with checkpoint_dirs=<the job's checkpoint folder(s), one per node>.",
                                    "Or: gpulib ckpt latest DIR... before relaunching."]))
    for item in data.get("rejected") or []:
        path, reason = (item.get("path"), item.get("reason")) if isinstance(item, dict) else item
        out.append(finding_dict(event_id("rejected", detail=Path(str(path)).name), "warning", "none",
                           f"rejected {path}: {reason}", quotes=[{"file": str(path), "line": None, "text": reason}]))
    return out
