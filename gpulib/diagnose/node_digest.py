"""Write one node's digest (the map step; :mod:`gpulib.diagnose.digest` says why and what)."""

from __future__ import annotations

from pathlib import Path

from gpulib.diagnose import digest
from gpulib.diagnose.inputs import gather_node
from gpulib.diagnose.node_facts import text_facts


def write(folder: str | Path, tz: str | None = None) -> Path:
    """Read ``folder`` (one node's bundle or folder) as the central diagnosis would and write
    what it found to ``folder/digest.json``; returns that path."""
    folder = Path(folder)
    seen = digest.listing(folder)
    inputs, year = gather_node(folder, tz)
    for f in inputs.files:
        text_facts(f)  # the configuration facts node_facts reads from raw text, read here once
    return digest.save(folder, digest.document(folder, inputs.files, inputs, year, tz, seen))


__all__ = ["write"]
