"""The few Slurm commands gpulib runs: ask for a job or a node, drain or resume a node.

Every call is an argument list with a timeout (a hung slurmctld must not hang an Epilog or a
HealthCheckProgram, which Slurm kills after 60 s). ``SLURM_CONF`` in the environment is
honoured by scontrol itself. Failures raise :class:`SlurmError` with scontrol's own message.
"""

from __future__ import annotations

import socket

from gpulib.collect.runner import first_line, run_command
from gpulib.errors import GpulibError
from gpulib.parsers import slurm_job
from gpulib.parsers.slurm_job import SlurmJob, SlurmNode

#: Seconds one scontrol call may take (slurmctld answers in milliseconds when healthy).
TIMEOUT_S = 15.0
#: Every reason gpulib sets starts so; only such drains are ever resumed by gpulib.
REASON_PREFIX = "gpulib:"
#: Slurm keeps reasons short in sinfo; longer ones are cut here, on a word boundary.
REASON_MAX_CHARS = 160


class SlurmError(GpulibError):
    """scontrol could not be run or refused the request."""


def node_name(explicit: str | None, env: dict[str, str]) -> str:
    """Slurm's name for this node: ``--node``, else ``SLURMD_NODENAME`` (set by slurmd for the
    Epilog, HealthCheckProgram and job steps), else the short host name (what slurm.conf's
    ``NodeName=`` usually holds)."""
    return explicit or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _scontrol(args: list[str], timeout_s: float) -> str:
    result = run_command(["scontrol", *args], timeout_s)
    if result.status != "ok":
        detail = first_line(result.stderr) or first_line(result.stdout) or result.reason
        raise SlurmError(f"scontrol {' '.join(args)}: {detail}",
                         hint="is slurmctld reachable (scontrol ping) and SLURM_CONF right?")
    return result.stdout.decode("utf-8", "replace")


def show_job_text(job_id: str, timeout_s: float = TIMEOUT_S) -> str:
    """``scontrol show job -d ID`` as printed."""
    return _scontrol(["show", "job", "-d", job_id], timeout_s)


def show_job(job_id: str, timeout_s: float = TIMEOUT_S) -> SlurmJob:
    text = show_job_text(job_id, timeout_s)
    jobs = slurm_job.parse(text, f"scontrol show job {job_id}").records
    if not jobs:
        raise SlurmError(f"scontrol show job {job_id} printed no job record")
    return jobs[0]


def show_node(node: str, timeout_s: float = TIMEOUT_S) -> SlurmNode:
    text = _scontrol(["show", "node", node], timeout_s)
    nodes = slurm_job.parse_nodes(text, f"scontrol show node {node}").records
    if not nodes:
        raise SlurmError(f"scontrol show node {node} printed no node record")
    return nodes[0]


def one_line_reason(cause: str) -> str:
    """``gpulib: <cause>`` on one line, cut on a word boundary to :data:`REASON_MAX_CHARS`."""
    text = " ".join(cause.split())
    reason = f"{REASON_PREFIX} {text}"
    if len(reason) > REASON_MAX_CHARS:
        reason = reason[:REASON_MAX_CHARS - 3].rsplit(" ", 1)[0] + "..."
    return reason


def drain(node: str, reason: str, timeout_s: float = TIMEOUT_S) -> None:
    """``scontrol update nodename=NODE state=drain reason=REASON``: running jobs finish, no new
    job starts there, ``sinfo -R`` shows the reason."""
    _scontrol(["update", f"nodename={node}", "state=drain", f"reason={reason}"], timeout_s)


def resume(node: str, timeout_s: float = TIMEOUT_S) -> None:
    """``scontrol update nodename=NODE state=resume``: clear the drain."""
    _scontrol(["update", f"nodename={node}", "state=resume"], timeout_s)
