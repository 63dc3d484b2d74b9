"""The job's own environment, checked against the nodes it will run on, before a relaunch.

The preflight notebook and ``gpulib slurm healthcheck`` ask the same question: will this job's
``NCCL_*`` settings and CUDA runtime work on these nodes? The environment that matters is the
job's (its sbatch script or ``env`` dump), not the kernel's that runs the check, so it is read
from a file the operator names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from gpulib.errors import InputError
from gpulib.findings import Finding
from gpulib.preflight import cuda_compat, nccl_env


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror or exc}", path=path,
                         hint=f"give the path of the job's {what}, or leave it empty") from None


def job_checks(evidence: str | Path, versions: Iterable[Mapping], *, job_env: str = "",
               nccl_log: str = "") -> tuple[list[Finding], list[str]]:
    """(checks, notes): the NCCL environment in ``job_env`` (a file of ``KEY=value`` lines)
    against the nodes of the evidence bundle(s) and the NCCL log, plus each node's CUDA
    runtime against its driver (``versions``: rows of ``EvidenceTables.software_versions()``).
    ``notes`` say what was not checked and why."""
    notes = []
    checks: list[Finding] = []
    if job_env:
        log_text = _read(nccl_log, "NCCL log") if nccl_log else None
        checks += nccl_env.audit(nccl_env.read_env(_read(job_env, "environment file")),
                                 nccl_env.bundle_nodes(evidence), log_text)
    else:
        notes.append("no job_env given: the NCCL environment is not audited (this kernel's environment is "
                     "not the job's)")
    checks += cuda_compat.findings(versions)
    return checks, notes
