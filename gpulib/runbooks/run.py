"""``run_runbook``: validate, execute, archive, report — and the exit code a scheduler acts on.

Exit codes (:data:`EXIT_MEANINGS`, a subset of the one table in :mod:`gpulib.exit_codes`): a run
that analysed an incident exits as its diagnosis does (:mod:`.verdict`: hard 3, soft 1, unknown 4,
none 0, or 1 with warnings), and 3 when a step adds a blocking fact of its own; a run that
diagnosed nothing exits 0 healthy (only info findings), 1 warning findings, 3 error or critical
findings (no-go; a preflight no-go is recorded as such a finding). 5 the run itself failed (a
notebook raised, timed out, lost its kernel or recorded no findings) wins over the others because
an incomplete run cannot vouch for anything: look at its report first. 2 (usage or input error)
is the CLI's, before anything runs.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from gpulib import __version__, exit_codes, kernel_env
from gpulib.diagnose.cache import Evidence, resolve_evidence, write_cache
from gpulib.errors import GpulibError
from gpulib.evidence.bundle import sha256_file
from gpulib.identity import to_utc_iso, utc_now_iso
from gpulib.logs import get_logger
from gpulib.runbooks.archive import FINDINGS, FINDINGS_FORMAT, REPORT, RUN_FORMAT, ArchiveWriter
from gpulib.runbooks.execute import KERNEL_NAME, StepResult, check_kernel, execute_runbook
from gpulib.runbooks.report import RenderedStep, build_report, render_step
from gpulib.runbooks.report_view import run_headline
from gpulib.runbooks.spec import RunbookSpec, find_runbook, load_runbook, resolve_parameters
from gpulib.runbooks.verdict import run_verdict
from gpulib.vocabulary import SEVERITIES

log = get_logger(__name__)

EXIT_MEANINGS = {
    exit_codes.OK: "healthy: no finding above info",
    exit_codes.SOFT: "soft root cause (the process failed, the hardware is fine) or warnings",
    exit_codes.HARD: "no-go: a hard root cause, or a blocking finding of a step (act before relaunching)",
    exit_codes.UNKNOWN: "unknown: the evidence shows a failure it does not explain (collect more)",
    exit_codes.RUN_FAILED: "the run itself failed: a step did not complete, its findings are missing",
}
_VERSIONED = ("papermill", "nbclient", "nbconvert", "nbformat", "ipykernel", "jupyter_client", "plotly", "pandas")


@dataclass
class RunOutcome:
    path: Path
    exit_code: int
    steps: list[StepResult]
    findings: list[dict]
    headline: list[str]  # the report's headline lines (the first block of `gpulib diagnose` for an incident)

    @property
    def report(self) -> Path:
        return self.path / REPORT


def severity_counts(findings: list[dict]) -> dict[str, int]:
    return {sev: sum(f.get("severity") == sev for f in findings) for sev in SEVERITIES}


def versions() -> dict[str, str]:
    out = {"gpulib": __version__, "python": platform.python_version(), "platform": platform.platform()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def prepare(name: str, cli: dict[str, str] | None = None, values: dict | None = None) -> tuple[RunbookSpec, dict]:
    """Load and validate everything that can be checked before a kernel starts."""
    spec = load_runbook(find_runbook(name))
    return spec, resolve_parameters(spec, cli, values)


def kernel_environment(plan: dict[str, dict], cwd: Path, scratch: Path, tz: str | None = None) -> dict[str, str]:
    """What the runner adds to its kernels' environment (:mod:`gpulib.kernel_env`): figures as
    plotly JSON only (the report redraws them with one copy of plotly.js), the run's ``--tz``
    and, when two or more steps analyse the same evidence, the evidence read once with that zone
    (:mod:`gpulib.diagnose.cache`).

    The cache is only a shortcut: a step whose evidence it does not describe (another path,
    files changed since, a live capture) reads the evidence itself, and unusable evidence is
    left to the steps, which report it in their notebooks.
    """
    env = {kernel_env.FIGURES_AS_JSON: "1"} | ({kernel_env.TZ: tz} if tz else {})
    uses = Counter(str(values["evidence"]) for values in plan.values() if values.get("evidence"))
    paths = []
    for value in (v for v, n in uses.items() if n > 1):
        try:
            paths.append(resolve_evidence(value, cwd))
        except GpulibError:
            continue
    if paths:
        try:
            env[kernel_env.EVIDENCE_CACHE] = str(write_cache(paths, scratch / "evidence-cache.json", tz))
        except Exception as exc:  # noqa: BLE001 - a shortcut that fails must not fail the run
            log.warning("evidence not pre-read (%s: %s); each step reads it itself", type(exc).__name__, exc)
    return env


def evidence_diagnosis(plan: dict[str, dict], cwd: Path, env: dict[str, str]) -> dict | None:
    """The ``gpulib.diagnosis/1`` dict of the evidence the steps analysed, for the report's headline.

    The evidence most steps read; taken from the run's evidence cache when the runner wrote one
    (no second reading), else diagnosed here. None when no step was given evidence (a preflight
    capturing this host, a health report of the notebook's default) or it cannot be read (the
    steps report that in their notebooks). Read with the run's ``--tz`` (:data:`gpulib.kernel_env.TZ`
    in ``env``), as the steps read it."""
    if any(values.get("capture_live") for values in plan.values()):
        return None
    uses = Counter(str(values["evidence"]) for values in plan.values() if values.get("evidence"))
    if not uses:
        return None
    try:
        path = resolve_evidence(uses.most_common(1)[0][0], cwd)
        tz = env.get(kernel_env.TZ)
        return Evidence(path, tz, cache=env.get(kernel_env.EVIDENCE_CACHE)).diagnosis
    except Exception as exc:  # noqa: BLE001 - the headline is a summary: it must not fail the run
        log.warning("report headline: evidence not diagnosed (%s: %s)", type(exc).__name__, exc)
        return None


def run_runbook(name: str, *, cli: dict[str, str] | None = None, values: dict | None = None,
                archive_root: Path, jobs: int | None = None, cwd: Path | None = None,
                cell_timeout_s: float | None = None, progress=None, on_start=None, tz: str | None = None) -> RunOutcome:
    """Run runbook ``name`` (a name or a YAML path) and archive it; raises RunbookError before
    anything runs when the runbook, a parameter or the kernel is unusable. ``tz``: the zone of
    timestamps printed without one, for every step and the report (``gpulib diagnose --tz``)."""
    spec, plan = prepare(name, cli, values)
    kernel_argv = check_kernel(KERNEL_NAME)
    cwd = Path(cwd or Path.cwd()).resolve()
    if not jobs:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    writer = ArchiveWriter(Path(archive_root), spec.name)
    started = time.monotonic()
    outputs = writer.path("notebooks")
    outputs.mkdir()
    rendered: dict[str, RenderedStep] = {}
    with tempfile.TemporaryDirectory(prefix="gpulib-findings-") as scratch:
        env = kernel_environment(plan, cwd, Path(scratch), tz)
        steps = execute_runbook(spec, plan, outputs, Path(scratch), cwd=cwd, jobs=jobs,
                                cell_timeout_s=cell_timeout_s, progress=progress, env=env, on_start=on_start,
                                after_step=lambda r: rendered.__setitem__(r.id, render_step(r.output, r.id)))
        diagnosis = evidence_diagnosis(plan, cwd, env)  # before the scratch folder (and its cache) goes
    for step in steps:  # steps that never ran (interrupted) still get their section
        if step.id not in rendered:
            rendered[step.id] = render_step(step.output, step.id)
    findings = [f for step in steps for f in step.findings]
    verdict = run_verdict([step.status == "ok" for step in steps], findings, diagnosis)
    code = verdict.code
    manifest = {
        "format": RUN_FORMAT,
        "runbook": spec.name,
        "runbook_file": str(spec.path),
        "runbook_sha256": sha256_file(spec.path),
        "run": writer.name,
        "run_id": writer.run_id,
        "host": writer.host,
        "started_at": to_utc_iso(writer.started),
        "started_unix_s": writer.started.timestamp(),  # orders runs started within the same second
        "finished_at": utc_now_iso(),
        "duration_s": round(time.monotonic() - started, 3),
        "command_line": list(sys.argv),
        "cwd": str(cwd),
        "kernel": {"name": KERNEL_NAME, "argv": kernel_argv,
                   "environment": {k: ("<run scratch>" if k == kernel_env.EVIDENCE_CACHE else v) for k, v in env.items()}},
        "jobs": jobs,
        "parameters": {"runbook": spec.parameters, "values": values or {}, "cli": cli or {}},
        "steps": [{**s.to_dict(writer.tmp_dir), "notebook_sha256": sha256_file(Path(s.notebook))} for s in steps],
        "findings": severity_counts(findings),
        "exit_code": code,
        "exit_meaning": EXIT_MEANINGS[code],
        "headline": run_headline(diagnosis, findings)["lines"],  # what `gpulib archive show` prints on top
        "root_finding": ((diagnosis or {}).get("root_cause") or {}).get("finding"),
        "exit_basis": verdict.basis,  # diagnosis: the evidence's verdict; findings: severities; steps: one failed
        "blocking": verdict.blocking,  # ids of the facts that made it no-go on their own
        "versions": versions(),
    }
    writer.write_json(FINDINGS, {"format": FINDINGS_FORMAT, "runbook": spec.name, "run": writer.name,
                                 "host": writer.host, "started_at": manifest["started_at"], "findings": findings})
    report = build_report(manifest, manifest["steps"], findings, rendered, diagnosis)
    writer.path(REPORT).write_text(report, encoding="utf-8")
    return RunOutcome(writer.finish(manifest), code, steps, findings, manifest["headline"])
