"""Slurm's record of the job into the bundle (``gpulib collect --slurm-job ID``).

Why: ``scontrol show job`` forgets a job ``MinJobAge`` seconds (default 300) after it ended, so
its record - state, exit codes, node list, the GPUs each node held (``-d``) - must be frozen with
the node's own evidence. ``sacct`` keeps the per-step rows (which step failed, on which nodes)
when the cluster has accounting; ``sinfo -R`` says which nodes Slurm already drained or lost and
why. Raw output only; :mod:`gpulib.parsers.slurm_job` and :mod:`gpulib.parsers.sacct` read it.
"""

from __future__ import annotations

from gpulib.collect.core import Collector, Outcome, Sink
from gpulib.collect.runner import CommandResult

#: The sacct columns diagnosis reads (the default table has no NodeList and cuts values).
SACCT_FORMAT = "JobID,JobName,Partition,State,ExitCode,NodeList,Start,End,Elapsed"
#: Markers of a cluster without the accounting database (not a fault: the file is just absent).
NO_ACCOUNTING = ("accounting storage is disabled", "slurmdbd", "no accounting")


def _why(result: CommandResult) -> str:
    return f"{' '.join(result.argv[:3])}: {result.reason}"


def slurm_job_collector(job_id: str, node: str | None = None) -> Collector:
    """``scontrol show job -d``, ``sacct`` steps, ``sinfo -R`` and ``scontrol show node`` of this node."""

    def run(sink: Sink, timeout_s: float) -> Outcome:
        share = timeout_s / 4
        job = sink.run(["scontrol", "show", "job", "-d", job_id], share, "slurm/scontrol-show-job.txt")
        notes = [] if job.status == "ok" else [_why(job)]
        acct = sink.run(["sacct", "-j", job_id, "--parsable2", f"--format={SACCT_FORMAT}"], share, "slurm/sacct.txt")
        if acct.status != "ok":
            text = (acct.stdout + acct.stderr).decode("utf-8", "replace").lower()
            notes.append("sacct: no accounting database on this cluster" if any(m in text for m in NO_ACCOUNTING)
                         else _why(acct))
        sinfo = sink.run(["sinfo", "-R"], share, "slurm/sinfo-R.txt")
        if sinfo.status != "ok":
            notes.append(_why(sinfo))
        if node:
            shown = sink.run(["scontrol", "show", "node", node], share, "slurm/scontrol-show-node.txt")
            if shown.status != "ok":
                notes.append(_why(shown))
        if job.status == "unavailable":
            return Outcome("unavailable", "scontrol not found on PATH: not a Slurm node")
        return Outcome(job.status, "; ".join(notes) or None)

    return Collector("slurm-job", 40, run)
