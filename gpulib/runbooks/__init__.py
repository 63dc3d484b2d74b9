"""Runbooks: papermill executions of the notebooks, archived as immutable, offline records.

``gpulib run NAME`` = :func:`run_runbook`; ``gpulib archive list|show|diff`` reads the archive
(:mod:`gpulib.runbooks.archive`) and compares two runs (:mod:`gpulib.runbooks.compare`).
Importing the package is cheap: papermill, nbconvert and plotly load only when a run starts.
"""

from gpulib.runbooks.run import EXIT_MEANINGS, RunOutcome, run_runbook
from gpulib.runbooks.spec import RunbookError

__all__ = ["EXIT_MEANINGS", "RunOutcome", "RunbookError", "run_runbook"]
