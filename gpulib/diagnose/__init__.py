"""Diagnosis of an interrupted multi-GPU training job: the first failure, the culprit, the fix.

``diagnose(paths)`` reads evidence bundles and raw folders (:mod:`gpulib.evidence.gather`), joins ranks to hosts,
GPUs and PCI ids (:mod:`.joins`), runs the kernel / GPU-state / job / other rules, the BMC event
log (:mod:`.rules.sel`), shared-memory (:mod:`.rules.shm`) and nccl-tests / NCCL plugin
(:mod:`.rules.nccl_tests`) rules, then those that read what the others found: Ray's memory
monitor (:mod:`.rules.ray`), allocation failures read as CUDA errors (:mod:`.rules.memory`) and
srun's task verdicts (:mod:`.rules.srun`); it picks the root cause and discounts the cascade
(:mod:`.verdict`), and returns a :class:`~.report.Diagnosis`
(``to_dict()`` = the ``gpulib.diagnosis/1`` JSON, ``to_text()`` = the on-call summary).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

from gpulib.checkpoints.latest import find_latest
from gpulib.diagnose import (
    diverged,
    fault_gpu,
    first_batch,
    generic,
    neighbourhood,
    nodes,
    recurrence,
    rules,
    unread,
    verdict,
)
from gpulib.diagnose.context import Context, place, quote
from gpulib.diagnose.joins import IdentityMap
from gpulib.diagnose.model import TimelineEntry
from gpulib.diagnose.report import Diagnosis
from gpulib.evidence import kinds
from gpulib.evidence.gather import Inputs, gather
from gpulib.evidence.thresholds import Thresholds
from gpulib.findings import Finding, event_id
from gpulib.logs import get_logger

log = get_logger(__name__)

__all__ = ["Diagnosis", "diagnose"]


def diagnose(paths: list[str | Path], tz: str | None = None, *, inputs: Inputs | None = None,
             thresholds: Thresholds | None = None) -> Diagnosis:
    """Diagnose the incident whose evidence lies in ``paths`` (bundles, folders or files).

    ``tz`` is the zone of timestamps printed without one (``dmesg -T``, nvidia-smi, Python logs)
    when no bundle manifest says it; default UTC. ``inputs``: what :func:`gather` already read
    from ``paths`` (a caller that also shows the records reads the evidence once). ``thresholds``:
    the numbers the rules judge with (:class:`~gpulib.evidence.thresholds.Thresholds`; a notebook's
    sliders pass theirs here rather than judging the evidence again with rules of their own).

    Python's cycle collector is paused meanwhile: the evidence of a 10,000-node job is millions of
    small records that all live until the answer is made, and every full collection would walk
    them again (a third of the time at that size). Records are freed by reference counting; what
    little cyclic garbage the work leaves is collected once the collector resumes.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _diagnose(paths, tz, inputs, thresholds)
    finally:
        if paused:
            gc.enable()


def _diagnose(paths: list[str | Path], tz: str | None, inputs: Inputs | None, thresholds: Thresholds | None) -> Diagnosis:
    thresholds = thresholds or Thresholds()
    inputs = gather([Path(p) for p in paths], tz, thresholds=thresholds) if inputs is None else inputs
    ctx = Context(inputs, IdentityMap(inputs), tz, thresholds)
    for rule in rules.RULES:  # in phase order (gpulib.diagnose.rules): later rules read earlier findings
        try:
            rule.run(ctx)
        except Exception as exc:  # noqa: BLE001 - a rule bug must cost one rule, not the diagnosis
            module = rule.run.__module__
            log.exception("rule module %s failed", module)
            ctx.add("internal", severity="warning", category="none", role="context",
                    title=f"internal error in {module}: {type(exc).__name__}: {exc} (other rules still ran)")
    failed, completed = rules.job.job_outcome(ctx)
    slurm_failed, slurm_completed = rules.slurm.job_outcome(ctx)  # the scheduler's record of the same job
    failed, completed = failed or slurm_failed, (completed or slurm_completed) and not slurm_failed
    rules.gpu.zombies(ctx, rules.job.last_failure_time(ctx))
    recurrence.promote(ctx)  # an Xid 94/31 that the evidence shows to be the GPU's own fault
    verdict.fold(ctx)
    verdict.promote_stall(ctx)
    diverged.promote(ctx)  # a time-out whose cause is one rank's own code path
    first_batch.promote(ctx)  # a hang before the first batch of a dataset with no length
    diagnosis = unread.unless_unread(ctx, _decide(ctx, failed, completed))  # no "none" over unread files
    verdict.drop_restatements(ctx, diagnosis.root_cause)
    verdict.weigh(ctx, diagnosis.root_cause)  # severity follows hard/soft (gpulib.vocabulary.SEVERITY_CEILING)
    kept = {id(f) for f in ctx.findings}
    diagnosis.findings = _ordered([f for f in diagnosis.findings if id(f) in kept])
    _name_events(ctx.findings)
    diagnosis.checkpoints = _checkpoints(inputs)
    diagnosis.inputs = [f.to_dict() for f in inputs.files] + [
        {"path": p.source, "kind": "missing", "host": None, "problems": [p.message]} for p in inputs.problems] + [
        {"path": n.source, "kind": "skipped", "host": None, "notes": [n.message]} for n in inputs.notes]
    diagnosis.timeline = _timeline(ctx)
    nodes.attach(diagnosis, inputs, ctx.configs)  # many nodes: per-node summary and config drift (never raises)
    return diagnosis


def _decide(ctx: Context, failed: bool, completed: bool) -> Diagnosis:
    findings = ctx.findings
    alarms = verdict.alarms(ctx)
    completed = completed or _signalled(ctx, "completed") or _exited_zero(ctx, alarms)
    # a run that reports its normal end survived what it printed, unless a line no job rule read says a
    # process died (a caught exception does not fail a finished run; an OOM in another file does)
    fatal_elsewhere = any(f.role == "cause" and f.id.startswith("sig-") and verdict.tier(f) <= 2 for f in alarms)
    if completed and not failed and not fatal_elsewhere:
        warnings = [f for f in findings if f.severity in ("critical", "error", "warning")]
        summary = "The job completed normally; nothing interrupted it." + (
            f" {len(warnings)} warning(s) below are worth a look before the next run." if warnings else "")
        return Diagnosis("none", "none", summary, None, _ordered(findings))
    job_logs = bool(ctx.inputs.of_kind(*kinds.JOB_LOGS))
    root = verdict.choose(ctx, rules.job.last_failure_time(ctx) if failed else None, rules.job.job_start_time(ctx),
                          prefer_hard=not job_logs)
    if root is None:
        readable = [f for f in ctx.inputs.files if f.kind not in kinds.NOTHING_READ]
        if not readable:
            unread = [p.source for p in ctx.inputs.problems] + [f.display for f in ctx.inputs.files]
            return Diagnosis("unknown", "none", "Nothing in the evidence could be read" + (
                f" ({', '.join(unread[:6])})" if unread else "") + ": no verdict is possible.", None,
                _ordered(findings), next_steps=_collect_more(ctx))
        suspects = _unfinished_on_weak_hardware(ctx, completed)
        if not failed and not alarms and suspects:
            return Diagnosis("unknown", verdict.best_guess(suspects) or suspects[0].category,
                             "The job log stops without a normal end and no error; the hardware warnings below "
                             "are the suspects.", None, _ordered(findings), next_steps=_collect_more(ctx))
        if not failed and not alarms:
            return _unexplained(ctx)
        strong, _weak = verdict.suspects(ctx)
        guess = verdict.best_guess(alarms) or _guess_category(findings)
        who = _describe_suspects(strong)
        stall = next((f for f in alarms if "stall" in f.extra), None)
        if stall is not None and not failed:  # a hang the GPU snapshot shows (gpulib.diagnose.rules.stall)
            return Diagnosis("unknown", guess, stall.extra["stall"], None, _ordered(findings),
                             next_steps=stall.actions + _collect_more(ctx, strong))
        timeout = _unexplained_timeout(alarms)
        if timeout is not None:
            return Diagnosis("unknown", guess, _timeout_summary(timeout, who), None, _ordered(findings),
                             next_steps=_suspect_steps(strong) + _collect_more(ctx, strong))
        summary = ("The job failed but the evidence does not show why" if failed else
                   "Error lines were found but none explains an interruption") + (
            f"; the symptoms point at {who}" if who else "") + "."
        quoted = _quote_failures(ctx, generic.failure_lines(ctx), [])
        if quoted is not None:
            summary += f" Also unexplained: {quoted[1]}."
        return Diagnosis("unknown", guess, summary, None, _ordered(ctx.findings),
                         next_steps=_collect_more(ctx, strong))
    verdict.adopt_rank(ctx, root)
    verdict.adopt_job_rank(ctx, root)
    neighbourhood.fill(ctx, root)
    fault_gpu.adopt_hardware_gpu(ctx, root)  # needs the host the neighbourhood named
    verdict.quote_lines(ctx, root)
    verdict.chain(ctx, root)
    return Diagnosis(root.interruption or "unknown", root.category, _summary(root, findings), root, _ordered(findings))


def _unexplained_timeout(alarms: list[Finding]) -> str | None:
    """With no root cause: the name of the collective time-out among the failures (``NCCL timeout``,
    ``gloo collective timeout``), or None when none timed out."""
    for f in alarms:
        if "timeout" in f.extra:
            return f.extra["timeout"]
    return "NCCL timeout" if any(f.id.startswith("sig-watchdog-timeout") for f in alarms) else None


def _timeout_summary(timeout: str, who: str) -> str:
    """"NCCL timeout, cause not shown": the ranks that timed out only waited, so the verdict names the
    ones they waited for (the silent ranks), never the waiters."""
    if who:
        return (f"{timeout}, cause not shown: the suspects are {who}, which never arrived; the ranks that "
                "timed out only waited for them.")
    return f"{timeout}, cause not shown: the evidence does not say which rank the others waited for."


def _suspect_steps(ptr) -> list[str]:
    """What to collect about the ranks the others waited for (the first thing an engineer needs)."""
    ranks = sorted(ptr.ranks)[:8]
    if not ranks:
        return ["Collect every rank's full output and a stack of each (`py-spy dump --pid <pid>`) the next time "
                "it hangs: the rank that is elsewhere than the collective is the cause"]
    names = ", ".join(map(str, ranks))
    return [f"Collect what rank(s) {names} did when the others waited: their last log lines, a stack "
            f"(`py-spy dump --pid <pid>` while it hangs) and their node's kernel log"]


def _unexplained(ctx: Context) -> Diagnosis:
    """No cause, no failure a rule read, no normal end: "none" only when no line says anything
    failed and no job log stops mid-run (:mod:`.generic`); otherwise ``unknown`` with the most
    suspicious lines quoted and what to collect next."""
    lines, stops = generic.failure_lines(ctx), generic.stopped_logs(ctx)
    quoted = _quote_failures(ctx, lines, stops)
    if quoted is None:
        return Diagnosis("none", "none", "No failure found in the evidence: no failure line in any log, no job log "
                         "that stops mid-run, no hardware fault.", None, _ordered(ctx.findings),
                         next_steps=_collect_more(ctx))
    finding, what = quoted
    steps = [f"Read {e.file}:{e.line} and the lines before it" for e in finding.quotes[:2]]
    return Diagnosis("unknown", finding.category, f"No known cause, and nothing shows a normal end: {what}.", None,
                     _ordered(ctx.findings), next_steps=steps + _collect_more(ctx))


def _quote_failures(ctx: Context, lines: list, stops: list) -> tuple[Finding, str] | None:
    """The finding that quotes the most suspicious unexplained failure lines (:mod:`.generic`) and
    where a job log stopped, with what it says in words, or None when there are neither."""
    if not lines and not stops:
        return None
    quotes = [quote(fl.file, fl.signal.line, fl.signal.text) for fl in lines[:generic.QUOTED]]
    quotes += [quote(s.file, s.line, s.text) for s in stops[:1]]
    top = lines[0].signal if lines else None
    if lines:
        what = (f"{len(lines)} line(s) say something failed (the most suspicious: "
                f"{lines[0].file.display}:{top.line} `{_clip(top.text, 120)}`)")
    else:
        what = (f"the job log {stops[0].file.display} stops at line {stops[0].line}"
                + (f" (step {stops[0].step})" if stops[0].step is not None else "") + " without a normal end")
    finding = ctx.add("unexplained", severity=lines[0].severity if lines else "warning",
                      category=generic.hint(lines) or "none", role="context",
                      title=f"No signature explains it, but {what}", host=top.host if top else None,
                      rank=top.rank if top else None, time=top.time_utc if top else None, quotes=quotes,
                      actions=[generic.action(lines[0])] if lines else [])
    return place(ctx, finding, rank=finding.rank, host=finding.host), what


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


#: Hardware whose warnings can stop a run outright (a slow GPU slows it, it does not stop it).
_STOPPING = frozenset({"gpu_fell_off_bus", "gpu_memory_error", "gpu_firmware_error", "nvlink_error", "power_fault",
                       "network_fabric", "node_lost"})


def _unfinished_on_weak_hardware(ctx: Context, completed: bool) -> list[Finding]:
    """A GPU's hardware warnings of a kind that can stop a run (on an x1 PCIe link, a degraded link)
    beside a job log that shows no normal end: a 'none' would need that end (docs/ARCHITECTURE.md), so these
    are the suspects of an unknown."""
    if completed or not ctx.inputs.of_kind(kinds.TRAINING_LOG):
        return []
    return [f for f in ctx.findings if f.category in _STOPPING and f.severity == "warning" and not f.benign
            and f.gpu_pci is not None]  # a device's own state, not a setup note (NCCL over sockets)


def _name_events(findings: list[Finding]) -> None:
    """Give every finding the id of its event (:func:`gpulib.findings.event_id`: rule, host, GPU,
    rank) in place of the counter the rules minted while they ran (``xid79-1``), so that a
    notebook step, last night's report and ``archive diff`` name the same event the same way."""
    renamed: dict[str, str] = {}
    taken: set[str] = set()
    for f in findings:
        rule = f.id.rsplit("-", 1)[0] if f.id.rsplit("-", 1)[-1].isdigit() else f.id
        detail = f.xid if rule.startswith("xid") and not rule.endswith(str(f.xid)) else None
        new = base = event_id(rule, host=f.host, gpu=f.gpu_pci or f.gpu_index, rank=f.rank, detail=detail)
        n = 1
        while new in taken:
            n += 1
            new = f"{base}-{n}"
        taken.add(new)
        renamed[f.id] = new
    for f in findings:
        f.id = renamed[f.id]
        f.caused_by = renamed.get(f.caused_by, f.caused_by)


def _exited_zero(ctx: Context, alarms: list[Finding]) -> bool:
    """Exit code 0 (``exit=0`` echoed after the launcher, ``Exited with exit code 0``) is positive
    evidence of a normal end when nothing contradicts it: no process or job reported a non-zero exit
    or a failed state (the ``generic-exit`` row) and no rule found a failure. It outweighs the generic
    vocabulary's lines (a "failed" a finished run printed and survived), never a finding."""
    return not alarms and _signalled(ctx, "exit-zero") and not _signalled(ctx, "generic-exit")


def _signalled(ctx: Context, signature: str) -> bool:
    return any(s.signature == signature for f in ctx.inputs.files for s in f.signals)


def _ordered(findings: list[Finding]) -> list[Finding]:
    rank = {"cause": 0, "symptom": 2, "context": 1}
    sev = {"critical": 0, "error": 1, "warning": 2, "info": 3}
    return sorted(findings, key=lambda f: (bool(f.caused_by), rank.get(f.role, 3), sev.get(f.severity, 4),
                                           f.time or "~"))


def _summary(root: Finding, findings: list[Finding]) -> str:
    cascade = [f for f in findings if f.caused_by == root.id and f.role == "symptom"]
    timeouts = next((f for f in cascade if f.id.startswith("nccl-timeout")), None)
    when = f" at {root.time}" if root.time else ""
    text = f"{root.interruption}: {root.title}{when}"
    where = root.where(when=False)
    if where and where not in root.title:
        text += f" [{where}]"
    if timeouts:
        text += f"; the {timeouts.title.split(' (')[0].replace('NCCL watchdog timeout on', 'NCCL timeouts on')}" \
                " are the cascade, not the cause"
    elif cascade:
        text += f"; {len(cascade)} later error report(s) are its cascade"
    return text + "."


def _guess_category(findings: list[Finding]) -> str:
    for prefix, category in (("nccl-error", "network_fabric"), ("nccl-net", "network_fabric"),
                             ("sigkill", "host_oom"), ("nccl-timeout", "application_error")):
        if any(f.id.startswith(prefix) for f in findings):
            return category
    return "application_error"


def _describe_suspects(ptr) -> str:
    parts = []
    if ptr.ranks:
        parts.append("rank(s) " + ", ".join(map(str, sorted(ptr.ranks)[:8])))
    if ptr.hosts:
        parts.append("host(s) " + ", ".join(sorted(ptr.hosts)[:6]))
    return " and ".join(parts)


def _collect_more(ctx: Context, ptr=None) -> list[str]:
    present = {f.kind for f in ctx.inputs.files}
    steps = []
    hosts = sorted(ptr.hosts) if ptr and ptr.hosts else sorted({h for f in ctx.inputs.files if f.host
                                                                  for h in [f.host]})
    ranks_hosts = sorted({ctx.ids.locate(rank=r).host for r in (ptr.ranks if ptr else set())} - {None})
    target = ", ".join(ranks_hosts or hosts) or "every node of the job"
    if kinds.KERNEL_LOG not in present:
        steps.append(f"Collect the kernel log of {target}: `journalctl -k -b -1 -o short-iso` (or `dmesg -T`), "
                     "or run `gpulib collect` there")
    if not present & set(rules.gpu.SNAPSHOT_KINDS):
        steps.append(f"Collect `nvidia-smi -q` from {target}")
    if kinds.TRAINING_LOG not in present:
        steps.append("Add the job's console log (slurm-*.out / torchrun output, with NCCL_DEBUG=INFO if possible)")
    if not steps:
        steps.append(f"Look at {target} first: run `dcgmi diag -r 2` and check `ibstat` before relaunching")
    return steps


def _timeline(ctx: Context) -> list[TimelineEntry]:
    entries = []
    for f in ctx.findings:
        if f.time and not f.benign:
            source = f.quotes[0].file if f.quotes else "-"
            entries.append(TimelineEntry(f.time, f.host, source, f.title))
    steps = []
    for file, ev in ctx.records(kinds.TRAINING_LOG):
        if ev.kind in ("completed", "checkpoint_saved") and ev.time_utc:
            entries.append(TimelineEntry(ev.time_utc, ev.host or file.host, file.display, ev.text.strip()[:120]))
        elif ev.kind == "step" and ev.time_utc and not ev.time_approx:
            steps.append((ev.time_utc, file, ev))
    if steps:  # where the job stood: its first and its last progress line
        for when, file, ev in (min(steps, key=lambda t: t[0]), max(steps, key=lambda t: t[0])):
            entries.append(TimelineEntry(when, ev.host or file.host, f"{file.display}:{ev.line}",
                                         f"progress: step {ev.details.get('step')}"
                                         + (f" (rank {ev.rank})" if ev.rank is not None else "")))
    entries.sort(key=lambda t: t.time)
    deduped, seen = [], set()
    for t in entries:
        key = (t.time, t.event)
        if key not in seen:
            seen.add(key)
            deduped.append(t)
    return deduped[-60:]


def _checkpoints(inputs: Inputs) -> dict:
    if not inputs.checkpoint_dirs:
        return {"resume_from": None, "rejected": []}
    roots: dict[Path, list[Path]] = {}
    for root, folder in inputs.checkpoint_dirs:
        roots.setdefault(root, []).append(folder)
    out: dict = {"resume_from": None, "rejected": []}
    for root, folders in roots.items():
        try:
            report = find_latest(folders)
        except Exception as exc:  # noqa: BLE001 - a checkpoint problem must not hide the diagnosis
            out.setdefault("problems", []).append(f"checkpoint inspection failed: {exc}")
            continue
        if report.resume_from and out["resume_from"] is None:
            out["resume_from"] = _relative(report.resume_from, root)
            if getattr(report, "resume_command", None):
                out["resume_command"] = report.resume_command
        out["rejected"] += [{"path": _relative(p, root), "reason": reason} for p, reason in report.rejected]
        if getattr(report, "lacks", None):
            out.setdefault("lacks", []).extend(report.lacks)
    return out


def _relative(path, root: Path) -> str:
    """A checkpoint path as the user would type it: relative to the input folder they gave."""
    try:
        return os.path.relpath(Path(path), root)
    except ValueError:
        return str(path)
