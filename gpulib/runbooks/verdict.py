"""One incident, one verdict: the runbook's exit follows the diagnosis of the evidence it read.

``gpulib diagnose`` says a CUDA OOM is *soft* (exit 1: the process failed, the hardware is fine);
the incident runbook's steps record the same OOM finding with its severity, ``error`` (a soft
cause is never critical: :func:`gpulib.findings.weigh`). Judged by severities alone the run would
say no-go (exit 3) for the same evidence: a scheduler that acts on the number would drain a
healthy node after ``diagnose`` told it to relaunch. So when the steps
analysed an incident, the run's exit is the diagnosis's (hard 3, soft 1, unknown 4, none 0, 1 with
warnings), and the steps' findings of the diagnosis's own events (one event has one id everywhere)
do not vote again. A step that adds a blocking fact of its own - a finding the diagnosis does not
hold, at error or critical, such as no valid checkpoint to resume from - still makes the run
no-go (3), and the report names it as the reason.

A run that diagnosed nothing (preflight, a health report of this node) keeps the severity rule:
any error or critical finding is no-go. A step that did not complete wins over everything (5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulib import exit_codes

BLOCKING = ("critical", "error")


@dataclass(frozen=True)
class RunVerdict:
    """The run's exit code and why: ``blocking`` are the ids of the steps' own blocking facts."""

    code: int
    basis: str  # "diagnosis" | "findings" | "steps"
    blocking: list[str] = field(default_factory=list)


def run_verdict(step_ok: list[bool], findings: list[dict], diagnosis: dict | None) -> RunVerdict:
    """The exit code of a run whose steps completed (``step_ok``) with ``findings``, given the
    diagnosis of the evidence they analysed (None when they analysed none)."""
    if not all(step_ok):
        return RunVerdict(exit_codes.RUN_FAILED, "steps")
    severities = {f.get("severity") for f in findings}
    interruption = ((diagnosis or {}).get("verdict") or {}).get("interruption")
    if interruption not in exit_codes.FOR_INTERRUPTION:
        return RunVerdict(exit_codes.for_severities(severities), "findings",
                          [f["id"] for f in findings if f.get("severity") in BLOCKING])
    known = {f.get("id") for f in diagnosis.get("findings") or []}
    own = list(dict.fromkeys(f["id"] for f in findings if f.get("severity") in BLOCKING and f.get("id") not in known))
    if own:
        return RunVerdict(exit_codes.HARD, "diagnosis", own)
    code = exit_codes.for_interruption(interruption)
    if code == exit_codes.OK and "warning" in severities:
        code = exit_codes.SOFT
    return RunVerdict(code, "diagnosis")


__all__ = ["RunVerdict", "run_verdict"]
