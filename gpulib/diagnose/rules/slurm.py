"""Rules over Slurm's own records of the job: ``scontrol show job`` and ``sacct``.

The scheduler saw every node; its verdict is evidence the ranks' logs cannot give:

* ``NODE_FAIL``: slurmctld stopped hearing from a node of the allocation - a hard, node-level
  cause (power, kernel panic, network). Which node: the ``sacct`` step that failed with it on a
  narrower node list, else a node ``sinfo -R`` reports as not responding, else the only node of
  the job. Its time is when slurmctld *noticed* (after ``SlurmdTimeout``), so it is marked
  observed: the failure began earlier, and may well explain NCCL timeouts before it.
* ``OUT_OF_MEMORY``: the step's cgroup ran out of host memory (a soft ``host_oom``).
* ``TIMEOUT``: the job ran into its time limit - usually a hang; a symptom, not a cause.
* ``FAILED`` / a non-zero exit: how the job ended (a symptom); ``COMPLETED`` with exit 0 is
  positive evidence of a normal end.

The records of one job from both tools are read together (the job row of ``sacct`` and the
``scontrol`` record say the same thing; the step rows add where).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.findings import Finding, Quote
from gpulib.parsers.slurm import NodeReason
from gpulib.parsers.slurm_job import BAD_END_STATES, ended_badly

#: Reasons ``sinfo -R`` gives for a node slurmctld lost.
_LOST = ("not responding", "no_respond", "unexpectedly rebooted", "node unexpectedly rebooted")


@dataclass
class _Job:
    """What both tools say about one job id."""

    job_id: str
    name: str | None = None
    state: str | None = None
    reason: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    nodes: list[str] = field(default_factory=list)
    batch_host: str | None = None
    end_utc: str | None = None
    time_limit_s: float | None = None
    bad: str | None = None  # why it ended badly (ended_badly), None when it did not
    steps: list = field(default_factory=list)  # sacct step rows
    quotes: list[Quote] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"job {self.job_id}" + (f" ({self.name})" if self.name else "")

    @property
    def exit_text(self) -> str:
        if self.exit_code is None:
            return ""
        return f"exit code {self.exit_code}" + (f", signal {self.exit_signal}" if self.exit_signal else "")


def _jobs(ctx: Context) -> list[_Job]:
    jobs: dict[str, _Job] = {}
    for file, rec in ctx.records(kinds.SLURM_JOB):
        j = jobs.setdefault(rec.job_id, _Job(rec.job_id))
        j.name, j.state, j.reason = rec.job_name, rec.job_state, rec.reason
        j.exit_code, j.exit_signal = rec.exit_code, rec.exit_signal
        j.nodes, j.batch_host, j.end_utc, j.time_limit_s = rec.nodes, rec.batch_host, rec.end_time_utc, rec.time_limit_s
        j.bad = ended_badly(rec)
        j.quotes.append(quote(file, rec.line, f"JobId={rec.job_id} JobState={rec.job_state} Reason={rec.reason} "
                                                   f"ExitCode={rec.exit_code}:{rec.exit_signal} NodeList={rec.node_list}"))
    steps: dict[str, list] = defaultdict(list)
    for file, row in ctx.records(kinds.SACCT):
        if row.step is not None:
            steps[row.job_id].append((file, row))
            continue
        j = jobs.setdefault(row.job_id, _Job(row.job_id))
        if j.state is None or j.state == "COMPLETING":  # accounting has the final state
            j.state, j.exit_code, j.exit_signal = row.state, row.exit_code, row.exit_signal
            j.bad = (f"State={row.state}" if row.state in BAD_END_STATES
                     else f"ExitCode={row.exit_code}:{row.exit_signal}" if row.exit_code else None)
        j.name = j.name or row.job_name
        j.nodes = j.nodes or row.nodes
        j.end_utc = j.end_utc or row.end_utc
        j.quotes.append(quote(file, row.line, f"{row.job_id} {row.job_name or ''} {row.fields.get('State', '')} "
                                                   f"{row.fields.get('ExitCode', '')} {row.node_list or ''}"))
    for job_id, rows in steps.items():
        if job_id in jobs:
            jobs[job_id].steps = rows
    return list(jobs.values())


def job_outcome(ctx: Context) -> tuple[bool, bool]:
    """(failed, completed) by Slurm's records: a bad end state or non-zero exit; COMPLETED 0:0."""
    jobs = _jobs(ctx)
    failed = any(j.bad for j in jobs)
    completed = any(j.state == "COMPLETED" and not j.exit_code for j in jobs) and not failed
    return failed, completed


def run(ctx: Context) -> None:
    lost = _nodes_lost(ctx)
    for job in _jobs(ctx):
        if job.state in ("NODE_FAIL", "BOOT_FAIL"):
            _node_fail(ctx, job, lost)
        elif job.state == "OUT_OF_MEMORY" or any(r.state == "OUT_OF_MEMORY" for _, r in job.steps):
            _oom(ctx, job)
        elif job.state == "TIMEOUT" or job.reason == "TimeLimit":
            limit = f" of {job.time_limit_s / 3600:g} h" if job.time_limit_s else ""
            ctx.add("slurm-timeout", severity="error", category="application_error", role="symptom",
                    title=f"Slurm ended {job.label} at its time limit{limit}: a hang or a run slower than planned",
                    time=job.end_utc, quotes=job.quotes[:3],
                    actions=["Compare the last progress line of each rank with the end time: ranks silent long "
                             "before it were hung (look for the first rank that stopped)"])
        elif job.bad:
            where = _failed_step_nodes(job)
            ctx.add("slurm-job-failed", severity="error", category="application_error", role="symptom",
                    title=f"Slurm: {job.label} ended {job.state or 'badly'}"
                          + (f" with {job.exit_text}" if job.exit_text else f" ({job.bad})")
                          + (f"; failing step on {', '.join(where[:4])}" if where else ""),
                    host=where[0] if len(where) == 1 else None, time=job.end_utc,
                    quotes=job.quotes[:3] + [quote(f, r.line, f"{r.job_id}.{r.step} {r.state} "
                                                                     f"{r.fields.get('ExitCode', '')} {r.node_list}")
                                                 for f, r in _bad_steps(job)[:3]],
                    actions=["Read the job's own output (StdOut/StdErr of scontrol show job) for the first error"])
        elif job.state == "CANCELLED":
            ctx.add("slurm-cancelled", severity="info", category="none", role="context",
                    title=f"Slurm: {job.label} was cancelled", time=job.end_utc, quotes=job.quotes[:2])


def _bad_steps(job: _Job) -> list:
    return [(f, r) for f, r in job.steps if r.step not in ("extern",) and
            (r.state in BAD_END_STATES or (r.exit_code or 0) != 0)]


def _failed_step_nodes(job: _Job, state: str | None = None) -> list[str]:
    """Nodes of the failing step with the narrowest node list, when narrower than the job's."""
    rows = [r for _, r in _bad_steps(job) if r.nodes and (state is None or r.state == state)]
    if not rows:
        return []
    narrow = min(rows, key=lambda r: len(r.nodes))
    return narrow.nodes if not job.nodes or len(narrow.nodes) < len(job.nodes) else []


def _nodes_lost(ctx: Context) -> set[str]:
    return {n for _, rec in ctx.records(kinds.SLURM_SINFO)  # `sinfo -R` rows; a partition table's rows have no reason
            if isinstance(rec, NodeReason) and any(k in rec.reason.lower() for k in _LOST) for n in rec.nodes}


def _node_fail(ctx: Context, job: _Job, lost: set[str]) -> None:
    culprits = _failed_step_nodes(job, "NODE_FAIL") or sorted(lost & set(job.nodes)) or (
        job.nodes if len(job.nodes) == 1 else [])
    existing = [f for f in ctx.findings if f.id.startswith("node-lost") and f.host in culprits]
    if existing:  # the sinfo rule already named the node: Slurm's job record adds to its quotes
        for f in existing:
            f.quotes.extend(job.quotes[:2])
        return
    what = "failed to boot" if job.state == "BOOT_FAIL" else "stopped answering slurmctld (NODE_FAIL)"
    hosts = culprits if len(culprits) <= 4 else culprits[:4] + ["..."]
    f: Finding = ctx.add(
        "node-lost", severity="critical", category="node_lost", interruption="hard", hardware=True,
        title=(f"{', '.join(hosts)} {what}, ending {job.label}" if culprits else
               f"A node of {job.label} {what}; which one is not in this evidence"),
        host=culprits[0] if len(culprits) == 1 else None, time=job.end_utc, observed=True,
        quotes=job.quotes[:2] + [quote(fl, r.line, f"{r.job_id}.{r.step} {r.state} {r.node_list}")
                                     for fl, r in _bad_steps(job) if r.state == "NODE_FAIL"][:3],
        actions=[("Check the node's BMC event log (`ipmitool sel list`) and the previous boot's journal "
                  "(`journalctl -k -b -1`) for power loss or a panic before resuming it"),
                 *([] if culprits else ["Find the node: `sinfo -R` (Not responding) or `sacct -j "
                                         f"{job.job_id} --format=JobID,State,NodeList`"])])
    f.pointers.hosts |= set(culprits)


def _oom(ctx: Context, job: _Job) -> None:
    rows = [(fl, r) for fl, r in job.steps if r.state == "OUT_OF_MEMORY"]
    nodes = min((r.nodes for _, r in rows if r.nodes), key=len, default=None) or (
        [job.batch_host] if job.batch_host else job.nodes)
    ctx.add("slurm-oom", severity="error", category="host_oom", interruption="soft",
            title=f"Slurm: {job.label} ran out of host memory (OUT_OF_MEMORY: its cgroup limit was hit)"
                  + (f" on {', '.join(nodes[:4])}" if nodes else ""),
            host=nodes[0] if len(nodes) == 1 else None, time=job.end_utc, observed=True,
            quotes=job.quotes[:2] + [quote(fl, r.line, f"{r.job_id}.{r.step} {r.state} {r.node_list or ''}")
                                         for fl, r in rows[:3]],
            actions=["Ask for more memory (`--mem`/`--mem-per-gpu`) or lower DataLoader workers/prefetch; "
                     "`sacct -j ID --format=JobID,MaxRSS,ReqMem` shows the peak per step"])
