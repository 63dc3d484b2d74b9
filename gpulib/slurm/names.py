"""Slurm's names made into paths, safely: the Epilog runs as root and writes ``DIR/<jobid>/<node>``.

``SLURM_JOB_ID`` and the node name come from the environment (or ``--job-id``/``--node``); a
value such as ``../../etc`` or ``/root`` would put a root-owned bundle anywhere. Slurm's own
ids and node names are plain words (``88231``, ``gpu-a17``, ``node01.rack3``), so anything else
is refused as a misconfiguration, and every joined path is checked, after symlinks are
resolved, to stay inside the configured folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_PLAIN = re.compile(r"[A-Za-z0-9._-]+")


def unsafe_reason(value: str) -> str | None:
    """Why ``value`` cannot be one path component (None when it can): letters, digits, ``.``,
    ``_`` and ``-`` only, not ``.`` or ``..``, and no leading ``-`` (it would read as an option)."""
    if not _PLAIN.fullmatch(value):
        return "is not a plain name (letters, digits, '.', '_', '-' only)"
    if value in (".", "..") or ".." in value:
        return "contains '..'"
    if value.startswith("-"):
        return "starts with '-'"
    return None


def inside(root: Path, *parts: str) -> Path:
    """``root/parts...``, raising ``ValueError`` when the result (symlinks resolved) is not inside
    ``root``: a folder replaced by a link to ``/etc`` must not receive the bundle either."""
    joined = root.joinpath(*parts)
    base = os.path.realpath(root)
    if os.path.commonpath([base, os.path.realpath(joined)]) != base:
        raise ValueError(f"{joined} leads outside {root}")
    return joined
