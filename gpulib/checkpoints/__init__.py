"""Checkpoint inspection, verification and resume planning, without torch and without executing
anything from a pickle. ``inspect_path`` (one file / DCP dir), ``find_latest`` (newest complete
checkpoint across one root per node, what it lacks, and the resume command)."""

from gpulib.checkpoints.files import inspect_path
from gpulib.checkpoints.latest import LatestReport, find_latest
from gpulib.checkpoints.records import FileReport, Finding

__all__ = ["FileReport", "Finding", "LatestReport", "find_latest", "inspect_path"]
