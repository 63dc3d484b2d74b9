"""Collectors for files the operator names: training logs (copied, tail-capped) and a listing
of the checkpoint directory (names, sizes, mtimes; nothing is opened or unpickled)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from gpulib.collect.core import Collector, Outcome, Sink
from gpulib.evidence.bundle import copy_capped
from gpulib.identity import to_utc_iso
from gpulib.readable import unreadable_reason

#: Keep the last 64 MiB of each log: a job dies at the end of its log, and a multi-GB log
#: copied from 128 nodes into one shared folder would fill it.
LOG_CAP_BYTES = 64 << 20
MAX_LOG_FILES = 2000
#: Stop copying once this much was copied in total (many nodes share one evidence folder).
MAX_LOG_TOTAL_BYTES = 2 << 30
MAX_LISTING_ENTRIES = 100_000


def bundle_name(source: Path) -> str:
    """Where a copied file lands in the bundle: ``logs/`` + its absolute path, so two
    ``train.log`` from different folders never collide and the original location stays readable."""
    return "logs/" + source.resolve().as_posix().lstrip("/")


def _log_files(paths: list[Path]) -> tuple[list[Path], list[str]]:
    files, problems = [], []
    for path in paths:
        if path.is_file():
            files.append(path)
        elif path.is_dir():  # os.walk, not rglob: a subfolder that cannot be listed is named, not skipped
            found = []
            for folder, subfolders, names in os.walk(path, onerror=lambda exc: problems.append(
                    f"{exc.filename}: cannot list folder: {exc.strerror or exc}")):
                subfolders.sort()
                found += [p for name in names if (p := Path(folder, name)).is_file()]
            files.extend(sorted(found))
        else:  # missing, a symlink loop, a FIFO or device (never opened: it could block or never end)
            problems.append(f"{path}: {unreadable_reason(path, special=False) or 'not a regular file or directory'}")
    if len(files) > MAX_LOG_FILES:
        problems.append(f"only the first {MAX_LOG_FILES} of {len(files)} files were copied")
        files = files[:MAX_LOG_FILES]
    return files, problems


def logs_collector(paths: list[Path], cap_bytes: int = LOG_CAP_BYTES) -> Collector:
    """Copies of the given logs (files or folders), each cut to its last ``cap_bytes``;
    ``logs/index.json`` maps every copy to its source and says which were cut."""

    def run(sink: Sink, timeout_s: float) -> Outcome:
        files, problems = _log_files(paths)
        index, copied = [], 0
        for source in files:
            if copied >= MAX_LOG_TOTAL_BYTES:
                problems.append(f"stopped after {copied} bytes in total; {source} and later files not copied")
                break
            rel = bundle_name(source)
            try:
                size = source.stat().st_size
                with open(source, "rb"):  # refuse before a target file is announced
                    pass
                truncated = copy_capped(source, sink.target(rel), cap_bytes)
            except PermissionError:
                problems.append(f"{source}: permission denied")
                continue
            except OSError as exc:
                problems.append(f"{source}: {exc.strerror or exc}")
                continue
            copied += min(size, cap_bytes)
            index.append({"source": str(source), "copied_as": rel, "bytes_original": size,
                          "bytes_copied": min(size, cap_bytes), "truncated_to_last_bytes": cap_bytes if truncated else None})
        sink.write_text("logs/index.json", json.dumps(index, indent=2) + "\n")
        if problems and not index:
            return Outcome("failed", "; ".join(problems))
        cut = sum(1 for entry in index if entry["truncated_to_last_bytes"])
        notes = problems + ([f"{cut} file(s) larger than {cap_bytes} bytes kept as their last {cap_bytes} bytes"] if cut else [])
        return Outcome("failed" if problems else "ok", "; ".join(notes) or None)

    return Collector("logs", 120, run)


def _mtime_utc(stat: os.stat_result) -> str:
    return to_utc_iso(datetime.fromtimestamp(stat.st_mtime, timezone.utc))


def checkpoint_listing_collector(root: Path) -> Collector:
    """A listing of the checkpoint directory as it was at capture time: later, "which
    checkpoint was newest when the job died" can be answered even after cleanup jobs ran.
    Symlinks (``latest -> step_1200``) are recorded with their target, not followed."""

    def run(sink: Sink, timeout_s: float) -> Outcome:
        if not root.is_dir():
            return Outcome("failed", f"{root}: not a directory" if root.exists() else f"{root}: not found")
        entries, errors = [], []
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda exc: errors.append(f"{exc.filename}: {exc.strerror}")):
            dirnames.sort()  # in place: os.walk then descends in this order
            for name in dirnames + sorted(filenames):
                path = Path(dirpath) / name
                try:
                    stat = path.lstat()
                except OSError as exc:
                    errors.append(f"{path}: {exc.strerror}")
                    continue
                entry = {"path": path.relative_to(root).as_posix(), "bytes": stat.st_size, "mtime_utc": _mtime_utc(stat),
                         "type": "symlink" if path.is_symlink() else "dir" if path.is_dir() else "file"}
                if entry["type"] == "symlink":
                    entry["target"] = os.readlink(path)
                entries.append(entry)
                if len(entries) >= MAX_LISTING_ENTRIES:
                    errors.append(f"listing stopped after {MAX_LISTING_ENTRIES} entries")
                    break
            else:
                continue
            break
        listing = {"root": str(root.resolve()), "entries": entries, "errors": errors}
        sink.write_text("checkpoints/listing.json", json.dumps(listing, indent=2) + "\n")
        return Outcome("ok", "; ".join(errors[:5]) or None)

    return Collector("checkpoints", 60, run)
