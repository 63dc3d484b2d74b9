"""Run ``gpulib collect`` for a Slurm hook inside a hard time budget.

Why a child process: the Epilog and the HealthCheckProgram hold up slurmd (a node stays
COMPLETING until its epilog ends; slurmd kills a health check after 60 s). A capture on a
broken node can block inside the GPU driver where no Python thread can be interrupted; a child
in its own process group can always be killed. Its collectors' timeouts are scaled so that it
normally finishes - and renames its bundle into place - well inside the budget; the kill is
only the backstop (a killed capture leaves its files under a hidden ``.partial`` name).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gpulib.collect.capture import plan
from gpulib.collect.core import GRACE_S
from gpulib.collect.runner import first_line, run_command
from gpulib.evidence.bundle import is_bundle

#: Seconds the child needs to start Python and write the manifest, beyond its collectors.
OVERHEAD_S = 6.0


@dataclass
class CaptureResult:
    """How the capture ended: ``status`` ok | failed | timeout; ``bundle`` when one was written."""

    status: str
    reason: str | None
    bundle: Path | None
    seconds: float


def timeout_scale(budget_s: float, logs: bool, only: list[str] | None = None) -> float:
    """The ``--timeout-scale`` that fits the slowest planned collector into ``budget_s``."""
    collectors = plan([Path("x")] if logs else [], None, 0, False, None, 1)
    slowest = max((c.timeout_s for c in collectors if not only or c.name in only), default=60.0)
    return max(0.05, min(1.0, (budget_s - OVERHEAD_S) / (slowest + GRACE_S)))


def free_target(parent: Path, name: str) -> Path:
    """``parent/name``, or ``parent/name.2``, ``.3`` ... when a bundle is already there (a requeued
    job runs its epilog again under the same id; bundles are never overwritten)."""
    target, n = parent / name, 1
    while target.exists() or is_bundle(target):
        n += 1
        target = parent / f"{name}.{n}"
    return target


def capture(out: Path, host: str, budget_s: float, *, slurm_job: str | None = None, logs: list[str] = (),
            only: list[str] | None = None) -> CaptureResult:
    """Capture this node into the bundle ``out`` within ``budget_s`` seconds."""
    started = time.monotonic()
    scale = timeout_scale(budget_s, bool(logs), only)
    argv = [sys.executable, "-m", "gpulib", "collect", "--out", str(out), "--host", host,
            "--timeout-scale", f"{scale:.3f}"]
    if slurm_job:
        argv += ["--slurm-job", slurm_job]
    if logs:
        argv += ["--logs", *logs]
    if only:
        argv += ["--only", *only]
    result = run_command(argv, budget_s, env=dict(os.environ))
    seconds = time.monotonic() - started
    bundle = out if is_bundle(out) else None
    if result.status == "ok" and bundle:
        return CaptureResult("ok", None, bundle, seconds)
    reason = result.reason if result.status != "ok" else "collect exited 0 but wrote no bundle"
    detail = first_line(result.stderr[-2000:])
    return CaptureResult(result.status if result.status != "ok" else "failed",
                         f"{reason}" + (f": {detail}" if detail and detail not in str(reason) else ""), bundle,
                         seconds)
