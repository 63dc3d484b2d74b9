"""What the report says, as plain data for its templates: headline, banner, one row per fact.

Why merge by id: every step records the diagnosis's finding for an event it also sees (see
:func:`gpulib.notebook.steps.combine`), so one Xid 79 arrives from steps 00, 01 and 06 with one
id. Listed per step, it read as four critical rows and sent the engineer counting problems
that were one. Here each id is one row that names the steps which raised it, with its own
category and severity, sorted into the root cause, the cascade (``caused_by``) and the rest.

Why the banner's colour follows the run's exit code: one verdict per incident. The headline
says hard or soft, the exit code says what a scheduler does; a banner coloured by its own
reading of the facts (red whenever one is "critical") contradicted a soft headline with exit 1.
Its words name the fact that decided it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gpulib import exit_codes
from gpulib.diagnose.headline import headline_fields
from gpulib.findings import Finding, severity_rank
from gpulib.formats import parameter_lines

#: Parameters every step gets from the runner: not worth a line in each step's header.
RUNNER_PARAMETERS = ("interactive", "findings_path")
ROLES = ("root cause", "other", "cascade")


@dataclass
class Fact:
    """One finding id across the steps that recorded it."""

    id: str
    severity: str
    category: str
    title: str
    where: str
    role: str  # root cause | cascade | other
    steps: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    caused_by: str | None = None
    time: str | None = None


def merge_facts(findings: Iterable[dict], root_id: str | None = None) -> list[Fact]:
    """One :class:`Fact` per finding id: the most severe copy's words, every step that raised it.

    Order: the root cause, then other facts, then the cascade; most severe first in each, then
    by time."""
    facts: dict[str, Fact] = {}
    for data in findings:
        f = Finding.from_dict(data)
        step = data.get("step")
        fact = facts.get(f.id)
        if fact is None or severity_rank(f.severity) < severity_rank(fact.severity):
            steps = fact.steps if fact else []
            role = "root cause" if root_id and f.id == root_id else ("cascade" if f.caused_by else "other")
            fact = facts[f.id] = Fact(f.id, f.severity, f.category, f.title, f.where(when=False), role, steps,
                                      list(f.actions), f.caused_by, f.time)
        if step and step not in fact.steps:
            fact.steps.append(step)
    return sorted(facts.values(), key=lambda x: (ROLES.index(x.role), severity_rank(x.severity),
                                                 x.time is None, x.time or "", x.id))


def facts_by_role(facts: list[Fact]) -> list[tuple[str, list[Fact]]]:
    """``[(role, facts)]`` in :data:`ROLES` order, roles without facts left out."""
    return [(role, [f for f in facts if f.role == role]) for role in ROLES if any(f.role == role for f in facts)]


@dataclass
class Banner:
    """The line under the headline: the exit code and what it means, coloured by what happened."""

    state: str  # ok | warn | nogo | failed
    code: int
    meaning: str
    reason: str


#: The banner's colour for each exit code of the run (anything else: the run failed).
BANNER_STATES = {exit_codes.OK: "ok", exit_codes.SOFT: "warn", exit_codes.HARD: "nogo", exit_codes.UNKNOWN: "warn"}


def banner(code: int, meaning: str, steps: list[dict], facts: list[Fact], *, basis: str = "findings",
           blocking_ids: Iterable[str] = ()) -> Banner:
    """Why this run exits as it does, in the words a scheduler's reader needs.

    The colour follows the exit code the run returned (one verdict per incident: a soft root
    cause that the run exits 1 for is not painted as a red no-go because one of its facts is
    called critical); the reason names the fact that decided it. ``basis`` ``"diagnosis"``: the
    exit is the diagnosis's verdict (:mod:`gpulib.runbooks.verdict`), and ``blocking_ids`` the
    steps' own facts that made it no-go anyway (named as the reason)."""
    failed = [s["id"] for s in steps if s.get("status") != "ok"]
    state = "failed" if failed else BANNER_STATES.get(code, "failed")
    blocking = [f for f in facts if f.severity in ("critical", "error")]
    warnings = [f for f in facts if f.severity == "warning"]
    if failed:
        return Banner(state, code, meaning, f"step(s) {', '.join(failed)} did not complete: their findings are "
                                            "missing, so this run cannot vouch for anything")
    if basis == "diagnosis":
        own = [f for f in facts if f.id in set(blocking_ids)]
        if own:
            return Banner("nogo", code, meaning, f"{len(own)} blocking fact(s) of the steps' own; first: {own[0].title}")
        lead = next((f for f in facts if f.role == "root cause"), None)
        return Banner(state, code, meaning, f"the diagnosis: {lead.title}" if lead else "the diagnosis of the evidence")
    if blocking:
        lead = next((f for f in blocking if f.role == "root cause"), blocking[0])
        return Banner(state, code, meaning, f"{len(blocking)} fact(s) to act on; first: {lead.title}")
    if warnings:
        return Banner(state, code, meaning, f"{len(warnings)} warning(s); first: {warnings[0].title}")
    return Banner(state, code, meaning, "no finding above info")


def headline(diagnosis: dict | None, facts: list[Fact]) -> dict:
    """The diagnosis headline (the first block of ``gpulib diagnose``), or, for a runbook that
    diagnosed no incident (preflight, health report of a live capture), its most severe fact.

    One function, two renderers: the report's template shows ``lines`` as HTML, and ``gpulib
    run`` / ``gpulib archive show`` print the same ``lines`` (recorded in the run's manifest as
    ``headline``) in the terminal, where an engineer on SSH at 03:00 has no browser."""
    if diagnosis:
        return {"kind": "diagnosis", **headline_fields(diagnosis)}
    lead = next(iter(sorted(facts, key=lambda f: severity_rank(f.severity))), None)
    lines = ["No incident diagnosed: this runbook checked a node, it did not analyse a crash."]
    if lead is not None:
        lines.append(f"  [{lead.severity}] {lead.title}")
    return {"kind": "check", "lines": lines}


def run_headline(diagnosis: dict | None, findings: Iterable[dict]) -> dict:
    """:func:`headline` of a run's findings (merged one row per fact, as the report lists them)."""
    root_id = ((diagnosis or {}).get("root_cause") or {}).get("finding")
    return headline(diagnosis, merge_facts(findings, root_id))


def fact_lines(facts: list[Fact], *, with_info: bool = False) -> list[str]:
    """One terminal line per fact (``gpulib archive show``): the report's Facts table, in its order,
    so an Xid 79 that steps 00, 01 and 06 each recorded is one line naming the three steps."""
    lines = []
    for fact in facts:
        if fact.severity == "info" and not with_info:
            continue
        where = f" ({fact.where})" if fact.where else ""
        tag = "" if fact.role == "other" else f" [{fact.role}]"
        lines.append(f"  [{fact.severity.upper()}] {fact.category}{tag}: {fact.title}{where}  - step(s) "
                     f"{', '.join(fact.steps) or '-'}")
    return lines


def step_parameters(parameters: dict) -> list[str]:
    """``key = value`` lines of a step's parameters, without the runner's own."""
    return parameter_lines({k: v for k, v in parameters.items() if k not in RUNNER_PARAMETERS})


def facts_per_step(facts: list[Fact]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for fact in facts:
        for step in fact.steps:
            counts[step] = counts.get(step, 0) + 1
    return counts
