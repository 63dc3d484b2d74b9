"""How a ``gpulib nccl-test`` run ends, as one number of the exit-code table (docs/ARCHITECTURE.md).

Why a status file: ``gpulib nccl-test`` starts the ranks under ``torchrun``, and torchrun turns
*any* non-zero worker exit into its own 1 (and a ChildFailedError). So a WARN (1) and a FAIL
(must be 3: do not relaunch) would look the same to a scheduler, and a crash (5: the test itself
did not run) like a slow fabric. The ranks therefore record the verdict in a small JSON file the
launcher names (:data:`STATUS_ENV`), exit 0 when the run was measured and judged, and the launcher
maps the verdict to the table:

======================================================  ====
PASS (near the bandwidth model)                           0
WARN (clearly below the model, or not judged: CPU/gloo)    1
bad arguments (before any rank starts)                     2
FAIL: wrong data, far below the model, a hang (a rank      3  no-go
that did not arrive, named by the watchdog)
the run itself failed: a rank crashed or raised, torchrun  5
could not start the ranks, no verdict was recorded
======================================================  ====
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from gpulib import exit_codes

#: Names the status file for every rank (torchrun passes the launcher's environment unchanged).
STATUS_ENV = "GPULIB_NCCL_TEST_STATUS"

PASS, WARN, USAGE, NO_GO, RUN_FAILED = exit_codes.OK, exit_codes.SOFT, exit_codes.USAGE, exit_codes.HARD, exit_codes.RUN_FAILED
VERDICT_EXIT = {"PASS": PASS, "WARN": WARN, "FAIL": NO_GO}


def verdict_exit(status: str | None) -> int:
    """The table's code for a judged run (an unknown status means no judgement: the run failed)."""
    return VERDICT_EXIT.get(status or "", RUN_FAILED)


def under_launcher() -> bool:
    """True in a rank started by ``gpulib nccl-test`` (it reads the verdict from the status file)."""
    return bool(os.environ.get(STATUS_ENV))


def record(status: str, reason: str) -> None:
    """Write the verdict for the launcher (no-op outside it). Atomic (temp file + rename) and first
    writer wins: the watchdog of every rank may report the same hang at once."""
    path = os.environ.get(STATUS_ENV)
    if not path or Path(path).exists():
        return
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".status-", dir=target.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump({"status": status, "reason": reason}, handle)
    os.replace(tmp, target)


def read(path: str | Path) -> dict | None:
    """The recorded verdict, or None when no rank recorded one (or the file is unreadable)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("status") else None


def launcher_exit(torchrun_rc: int, recorded: dict | None) -> int:
    """The exit code of ``gpulib nccl-test`` from torchrun's own and the recorded verdict: a judged
    run exits by its verdict; a FAIL recorded before a rank was torn down (a hang) is still a FAIL;
    anything else that ended non-zero, or ended with no verdict, is a run that failed."""
    status = (recorded or {}).get("status")
    if torchrun_rc == 0:
        return verdict_exit(status)
    return NO_GO if status == "FAIL" else RUN_FAILED
