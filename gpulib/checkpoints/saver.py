"""Crash-safe checkpoint saving for training scripts: ``save(state, directory, keep=3)``.

``torch.save`` writes straight to the final name with no fsync: a node that dies mid-save leaves
a truncated file under the name the next run will load. This does what the frameworks mostly
don't (reference/checkpoints.md section 3):

1. write to a temp file *in the same directory* (``.ckpt_step_000000100.pt.<pid>.tmp``), so the
   rename stays on one filesystem;
2. flush + ``fsync`` the file, ``os.replace`` it to its final name, ``fsync`` the directory so
   the rename itself survives a power loss;
3. write the seal ``ckpt_step_000000100.pt.seal.json`` (bytes and the CRC-32 computed while
   writing, :mod:`gpulib.checkpoints.seal`) and the manifest ``ckpt_step_000000100.json`` (step,
   bytes, optional sha256) the same way, then move the ``latest`` pointer - only after the data
   is durable;
4. only then delete old checkpoints, keeping the newest ``keep`` *complete* ones; the newest
   complete one is never deleted before the new one is durable.

``gpulib ckpt latest DIR`` understands the result (sidecar manifest, pointer, ``*.tmp`` leftovers).
torch is imported only when ``save`` is called (this module is importable without it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from gpulib.checkpoints.seal import FILE_SUFFIX as SEAL_SUFFIX
from gpulib.checkpoints.seal import SCHEMA as SEAL_SCHEMA
from gpulib.identity import utc_now_iso

NAME = "ckpt_step_{step:09d}.pt"
NAME_RE = re.compile(r"^ckpt_step_(\d+)\.pt$")
POINTER = "latest"
_executor: ThreadPoolExecutor | None = None
_lock = threading.Lock()


class _HashingWriter:
    """File wrapper that checksums what torch.save writes (no second read of a multi-GB file):
    always the CRC-32 of the seal, and sha256 when asked for."""

    def __init__(self, fh, sha256: bool):
        self.fh, self.sha, self.crc = fh, hashlib.sha256() if sha256 else None, 0

    def write(self, data) -> int:
        if self.sha is not None:
            self.sha.update(data)
        self.crc = zlib.crc32(data, self.crc)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(directory: Path, name: str, write) -> None:
    tmp = directory / f".{name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(directory)


def _step_of(state, step: int | None) -> int:
    if step is not None:
        return int(step)
    for key in ("global_step", "step", "iteration"):
        if isinstance(state, dict) and isinstance(state.get(key), int):
            return state[key]
    raise ValueError("save(): pass step=... or put an int 'global_step'/'step'/'iteration' in the state")


def _complete(directory: Path) -> list[tuple[int, str]]:
    """(step, name) of saved checkpoints, oldest first. A file under its final name is complete by
    construction (it got there by rename after fsync), even if a kill cost it its manifest."""
    return sorted((int(m.group(1)), n) for n in os.listdir(directory) if (m := NAME_RE.match(n)))


def _remove_dead_temps(directory: Path) -> None:
    """Temp files of writers that are gone (killed mid-save) - never those of a live writer."""
    for n in os.listdir(directory):
        m = re.match(r"^\..+\.(\d+)\.tmp$", n)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            (directory / n).unlink(missing_ok=True)
        except PermissionError:
            pass  # alive, other user


def save_now(state, directory: str | Path, keep: int = 3, step: int | None = None, sha256: bool = False) -> Path:
    """Save synchronously; returns the final path once it, its manifest and ``latest`` are durable."""
    import torch

    if keep < 1:
        raise ValueError("keep must be >= 1: the newest complete checkpoint is never deleted")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    step = _step_of(state, step)
    name = NAME.format(step=step)
    digest = {}

    def write_data(fh):
        target = _HashingWriter(fh, sha256)
        torch.save(state, target)
        digest["crc32"] = f"{target.crc:08x}"
        if sha256:
            digest["sha256"] = target.sha.hexdigest()

    _write_atomic(directory, name, write_data)
    size = (directory / name).stat().st_size
    seal_doc = {"schema": SEAL_SCHEMA, "sealed_at": utc_now_iso(), "algorithm": "crc32",
                "files": {name: {"bytes": size, "crc32": digest.pop("crc32")}}}
    _write_atomic(directory, name + SEAL_SUFFIX, lambda fh: fh.write(json.dumps(seal_doc, indent=1).encode()))
    manifest = {"step": step, "file": name, "bytes": size, "status": "complete",
                "committed": utc_now_iso(), **digest}
    _write_atomic(directory, name[:-3] + ".json", lambda fh: fh.write(json.dumps(manifest, indent=1).encode()))
    _write_atomic(directory, POINTER, lambda fh: fh.write(name.encode() + b"\n"))
    for _step, old in _complete(directory)[:-keep]:
        (directory / (old[:-3] + ".json")).unlink(missing_ok=True)  # manifest first: never a "complete" half
        (directory / old).unlink(missing_ok=True)
        (directory / (old + SEAL_SUFFIX)).unlink(missing_ok=True)
    _remove_dead_temps(directory)
    return directory / name


def save(state, directory: str | Path, keep: int = 3, step: int | None = None, sha256: bool = False,
         background: bool = False) -> Path | Future:
    """Crash-safe save. ``background=True`` returns a Future and writes on one worker thread, in
    submission order; the caller must not modify ``state`` until the Future is done (pass a CPU
    copy), and must wait on it before exiting."""
    if not background:
        return save_now(state, directory, keep, step, sha256)
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpulib-ckpt-save")
    return _executor.submit(save_now, state, directory, keep, step, sha256)
