"""Runbooks: papermill executions of the notebooks, archived as immutable, offline records.

``gpulib run NAME`` = :func:`run_runbook`; ``gpulib archive list|show|diff`` reads the archive
(:mod:`gpulib.runbooks.archive`) and compares two runs (:mod:`gpulib.runbooks.compare`).
"""

from gpulib.runbooks.run import EXIT_MEANINGS, RunOutcome, run_runbook
from gpulib.runbooks.spec import RunbookError

__all__ = ["EXIT_MEANINGS", "RunOutcome", "RunbookError", "run_runbook"]
