"""Which recorded corpus files belong to which parser, decided by the parsers' own looks_like.

Tests use this to run *every* recorded file through its parser. A file no parser of this package
claims is listed in :data:`NOT_PARSED_HERE` with the reason, so a new file in the corpus that
nobody parses fails a test instead of being skipped silently.
"""

from __future__ import annotations

from pathlib import Path

CORPUS_DIRS = ("nvidia-smi", "infiniband", "azurehpc", "dcgm", "prometheus")

#: file-name fragments of recorded files that are not GPU/host tool output parsed here.
NOT_PARSED_HERE = {
    "capabilities_list_l.txt": "nvidia-smi -L (names only)",
    "pmon_per_process_monitor.txt": "pmon: per-process samples, not GPU state",
    "query_accounted_apps.txt": "accounting is off on every recorded machine (header only)",
    "query_retired_pages.txt": "--query-retired-pages addresses (counts come from -q)",
    "help-query-gpu.txt": "nvidia-smi --help-query-gpu documentation text",
    "_syslog": "syslog link flaps: kernel-log parser (KERNEL helper)",
}


def read_head(path: Path, size: int = 8192) -> str:
    with open(path, "rb") as handle:
        return handle.read(size).decode("utf-8", errors="replace")


def recorded_files(root: Path) -> list[Path]:
    files = []
    for name in CORPUS_DIRS:
        files += sorted(p for p in (root / name).rglob("*") if p.is_file())
    return files


def incident_tool_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/input/**/*") if p.is_file())


def skipped_reason(path: Path) -> str | None:
    for fragment, reason in NOT_PARSED_HERE.items():
        if fragment in path.name:
            return reason
    return None
