"""``gpulib slurm epilog``: freeze the scene of every node of a job that ended badly.

The runbook's first rule is "capture before anyone reboots"; the Epilog runs on every node of
the allocation the moment the job ends, before anyone can. What it does:

1. reads the job id from ``SLURM_JOB_ID`` and asks ``scontrol show job -d`` how the job ended.
   Inside the Epilog the job is still ``COMPLETING``; ``Reason=NonZeroExitCode`` /
   ``TimeLimit`` / ``NodeDown`` / ``OutOfMemory`` and the exit codes are already final
   (:func:`gpulib.parsers.slurm_job.ended_badly`). Without an answer from slurmctld the
   epilog's own ``SLURM_JOB_EXIT_CODE2`` / ``SLURM_JOB_DERIVED_EC`` decide;
2. when it ended badly (FAILED, NODE_FAIL, TIMEOUT, OUT_OF_MEMORY, a non-zero exit - not a
   plain ``scancel``), captures this node into ``DIR/<jobid>/<node>`` within ``--timeout``
   seconds, with Slurm's record of the job (``slurm/`` in the bundle) and the job's own
   StdOut/StdErr files when this node can read them;
3. always exits 0. **Slurm drains a node whose Epilog exits non-zero**: a full disk, a wrong
   ``--dir`` or a gpulib bug must cost the evidence, never the node. What happened is written
   to stderr and, with ``--log FILE``, appended to FILE as one JSON line (slurmd discards the
   epilog's output). ``--strict`` returns the real exit code instead, for testing by hand.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpulib import exit_codes
from gpulib.logs import get_logger
from gpulib.parsers.slurm_job import SlurmJob, ended_badly, env_ended_badly
from gpulib.slurm import scontrol
from gpulib.slurm.capture import capture, free_target
from gpulib.slurm.names import inside, unsafe_reason

log = get_logger(__name__)

#: Default seconds the whole epilog may take (the node stays COMPLETING meanwhile).
DEFAULT_BUDGET_S = 120.0


@dataclass
class EpilogOutcome:
    """What one epilog run decided and did. ``action``: captured | skipped | error."""

    action: str
    job_id: str | None
    node: str
    why: str  # why it captured, skipped, or failed
    job_state: str | None = None
    bundle: str | None = None
    seconds: float = 0.0
    problems: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """The real outcome for ``--strict``: 0 done, 2 misconfigured, 5 the capture failed."""
        if self.action != "error":
            return exit_codes.OK
        return exit_codes.USAGE if self.bundle is None and "misconfigured" in self.why else exit_codes.RUN_FAILED

    def line(self) -> str:
        return (f"gpulib slurm epilog: job {self.job_id or '?'} on {self.node}: {self.action} ({self.why})"
                + (f" -> {self.bundle}" if self.bundle else ""))


def _env_derived(env: dict[str, str]) -> int | None:
    try:
        return int(env["SLURM_JOB_DERIVED_EC"])
    except (KeyError, ValueError):
        return None


def job_logs(job: SlurmJob | None) -> list[str]:
    """The job's StdOut/StdErr files this node can read (the batch host, or a shared folder)."""
    out: list[str] = []
    for path in (job.std_out, job.std_err) if job else ():
        if path and path not in out and "%" not in path and os.path.isfile(path) and os.access(path, os.R_OK):
            out.append(path)
    return out


def run_epilog(out_dir: Path, env: dict[str, str], *, job_id: str | None = None, node: str | None = None,
               budget_s: float = DEFAULT_BUDGET_S, always: bool = False, copy_job_logs: bool = True) -> EpilogOutcome:
    """Decide and capture; never raises (every failure is an ``error`` outcome)."""
    started = time.monotonic()
    node = scontrol.node_name(node, env)
    job_id = job_id or env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job_id:
        return EpilogOutcome("error", None, node, "misconfigured: no SLURM_JOB_ID (not run as Slurm's Epilog?)")
    for what, value in (("job id", job_id), ("node name", node)):
        if reason := unsafe_reason(value):
            return EpilogOutcome("error", job_id, node, f"misconfigured: the {what} {value!r} {reason}; "
                                                        "nothing is written for it")
    if not out_dir.is_dir():
        return EpilogOutcome("error", job_id, node, f"misconfigured: {out_dir} is not a folder (create it on every "
                                                    "node, or mount the shared evidence folder)")
    problems: list[str] = []
    job: SlurmJob | None = None
    try:
        job = scontrol.show_job(job_id, timeout_s=min(scontrol.TIMEOUT_S, budget_s / 4))
        why = ended_badly(job, env_exit=env.get("SLURM_JOB_EXIT_CODE2"), env_derived=_env_derived(env))
    except scontrol.SlurmError as exc:
        problems.append(str(exc))
        why = env_ended_badly(env.get("SLURM_JOB_EXIT_CODE2"), _env_derived(env))
    state = job.job_state if job else None
    if not why and not always:
        reason = f"ended well (JobState={state}, ExitCode={env.get('SLURM_JOB_EXIT_CODE2', '?')})" if job else \
            "slurmctld did not answer and the epilog environment shows no failure"
        return EpilogOutcome("skipped", job_id, node, reason, state, seconds=time.monotonic() - started,
                             problems=tuple(problems))
    try:
        folder = inside(out_dir, job_id)
        folder.mkdir(mode=0o755, exist_ok=True)
        target = inside(folder, free_target(folder, node).name)  # re-checked: the folder may be a link now
        remaining = budget_s - (time.monotonic() - started)
        result = capture(target, node, remaining, slurm_job=job_id, logs=job_logs(job) if copy_job_logs else [])
    except Exception as exc:  # noqa: BLE001 - the epilog must end normally whatever happened
        log.debug("epilog capture crashed", exc_info=True)
        return EpilogOutcome("error", job_id, node, f"capture could not start: {type(exc).__name__}: {exc}", state,
                             seconds=time.monotonic() - started, problems=tuple(problems))
    why = why or "--always"
    if result.status != "ok":
        return EpilogOutcome("error", job_id, node, f"{why}; capture {result.status}: {result.reason}", state,
                             str(result.bundle) if result.bundle else None, time.monotonic() - started,
                             tuple(problems))
    return EpilogOutcome("captured", job_id, node, why, state, str(result.bundle), time.monotonic() - started,
                         tuple(problems))


def record(outcome: EpilogOutcome, log_file: Path | None) -> None:
    """Say what happened where an operator can find it (stderr; one JSON line in ``log_file``)."""
    import sys

    print(outcome.line(), file=sys.stderr)
    for problem in outcome.problems:
        print(f"gpulib slurm epilog:   {problem}", file=sys.stderr)
    if log_file is None:
        return
    try:
        with open(log_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                     **asdict(outcome)}, sort_keys=True) + "\n")
    except OSError as exc:
        print(f"gpulib slurm epilog: cannot append to {log_file}: {exc.strerror or exc}", file=sys.stderr)
