"""Checkpoint inspection, verification and resume planning, without torch and without executing
anything from a pickle. ``inspect_path`` (one file / DCP dir), ``find_latest`` (newest complete
checkpoint across one root per node, what it lacks, and the resume command), ``save`` (crash-safe
saving for training scripts). Names are imported on first use, so ``inspect`` does not pay for
the layout and resume code."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "inspect_path": "gpulib.checkpoints.files", "FileReport": "gpulib.checkpoints.records",
    "CheckpointIssue": "gpulib.checkpoints.records", "find_latest": "gpulib.checkpoints.latest",
    "LatestReport": "gpulib.checkpoints.latest", "save": "gpulib.checkpoints.saver",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'gpulib.checkpoints' has no attribute {name!r}")
