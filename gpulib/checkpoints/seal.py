"""``gpulib ckpt seal DIR|FILE``: a sidecar manifest of each file's size and checksum, written when
the checkpoint is known good, so that later damage is seen and named.

Why: a torch zip checkpoint carries a CRC per member, but safetensors, legacy torch files and
plain pickles carry none, and no format notices a file *replaced* by another valid one. A byte
flipped in tensor data (bad RAM on the writer, a storage bit rot, a partial copy that kept the
size) loads without error and trains on garbage. The seal records, per file, its size and a
CRC-32 (zlib's, as fast as the disk) or sha256 (when the manifest must also resist tampering);
``ckpt verify`` compares sizes always and checksums with ``--deep``, ``ckpt latest`` checks the
checkpoint it is about to recommend, and a file that differs from its seal is corrupt, by name.

Where the seal lives: beside a file, ``<file>.seal.json``; inside a checkpoint folder (HF
Trainer, accelerate, DeepSpeed, DCP), ``gpulib-seal.json`` listing every file below it. It is
written atomically (a temp file in the same folder, fsync, rename): a crash mid-seal leaves the
old seal or none, never half of one.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

# hashlib (sha256 seals), json (reading or writing a seal) and gpulib.identity (datetime, when
# sealing) are imported where they are used: `ckpt inspect` checks for a seal on every run and
# finds none far more often than one, and those three cost it ~15 ms of a ~80 ms start.

SCHEMA = "gpulib.ckpt-seal/1"
DIR_SEAL = "gpulib-seal.json"
FILE_SUFFIX = ".seal.json"
ALGORITHMS = ("crc32", "sha256")
CHUNK = 8 << 20


class SealError(Exception):
    """The path cannot be sealed (missing, empty folder, unreadable file), with the path named."""


def seal_path(path: Path) -> Path:
    """Where the seal of ``path`` is (or would be) written."""
    return path / DIR_SEAL if path.is_dir() else path.with_name(path.name + FILE_SUFFIX)


def digest_file(path: Path, algorithm: str) -> str:
    """``crc32`` as 8 hex digits (zlib, the zip CRC), or ``sha256`` as 64, reading in 8 MiB chunks."""
    if algorithm == "crc32":
        crc = 0
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK):
                crc = zlib.crc32(chunk, crc)
        return f"{crc:08x}"
    import hashlib

    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def _members(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.endswith((".tmp", FILE_SUFFIX))
                  and p.name != DIR_SEAL)


def seal(path: str | Path, algorithm: str = "crc32") -> Path:
    """Seal a checkpoint file or folder; returns the seal's path. Raises :class:`SealError`."""
    path = Path(path)
    if algorithm not in ALGORITHMS:
        raise SealError(f"unknown checksum {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    if not path.exists():
        raise SealError(f"{path}: does not exist")
    members = _members(path)
    if not members:
        raise SealError(f"{path}: an empty folder, nothing to seal")
    base = path if path.is_dir() else path.parent
    files = {}
    for p in members:
        try:
            files[p.relative_to(base).as_posix()] = {"bytes": p.stat().st_size, algorithm: digest_file(p, algorithm)}
        except OSError as exc:
            raise SealError(f"{p}: cannot read: {exc.strerror or exc}") from None
    import json

    from gpulib.identity import utc_now_iso

    doc = {"schema": SCHEMA, "sealed_at": utc_now_iso(), "algorithm": algorithm, "files": files}
    target = seal_path(path)
    write_atomic(target, json.dumps(doc, indent=1).encode() + b"\n")
    return target


def write_atomic(target: Path, data: bytes) -> None:
    """``data`` to ``target`` via a temp file in the same folder, fsync, rename, fsync of the folder."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SealCheck:
    """A path against its seal. ``sealed``: a seal was found; ``problems``: one line per file that
    differs (missing, other size, other checksum), naming it; ``checked``: files whose checksum
    was compared (empty when only sizes were). A plain class: ``ckpt inspect`` imports this module
    on every start and ``dataclasses`` would cost it a sixth of its time."""

    def __init__(self, seal: Path | None, sealed: bool = False) -> None:
        self.seal, self.sealed = seal, sealed
        self.problems: list[str] = []
        self.checked: list[str] = []
        self.algorithm: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def find_seal(path: Path) -> tuple[Path, str] | None:
    """(seal file, name of ``path`` inside it) for a sealed file or folder, or for a file inside a
    sealed folder; None when nothing seals it."""
    own = seal_path(path)
    if own.is_file():
        return own, "" if path.is_dir() else path.name
    for folder in path.parents[:3]:
        if (folder / DIR_SEAL).is_file():
            return folder / DIR_SEAL, path.relative_to(folder).as_posix()
    return None


def check(path: str | Path, checksums: bool) -> SealCheck:
    """Compare ``path`` (a file, or a folder: every file its seal lists) with its seal. Sizes are
    always compared; ``checksums`` reads every byte and compares the CRC-32/sha256 too."""
    path = Path(path)
    found = find_seal(path)
    if found is None:
        return SealCheck(None)
    seal_file, name = found
    result = SealCheck(seal_file, sealed=True)
    import json

    try:
        doc = json.loads(seal_file.read_text())
        files, algorithm = doc["files"], doc["algorithm"]
        if doc.get("schema") != SCHEMA or algorithm not in ALGORITHMS or not isinstance(files, dict):
            raise ValueError(f"not a {SCHEMA} manifest")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        result.problems.append(f"seal {seal_file} unreadable ({exc}): the checkpoint cannot be checked against it")
        return result
    result.algorithm = algorithm
    base = seal_file.parent
    wanted = {k: v for k, v in files.items() if not name or k == name or k.startswith(name.rstrip("/") + "/")}
    if name and not wanted:
        return SealCheck(None)  # a file added to a sealed folder later: the seal says nothing about it
    for rel, entry in sorted(wanted.items()):
        p = base / rel
        if not p.is_file():
            result.problems.append(f"{rel}: sealed but missing")
            continue
        size = p.stat().st_size
        if size != entry.get("bytes"):
            result.problems.append(f"{rel}: {size:,} bytes, sealed with {entry.get('bytes'):,}")
            continue
        if checksums:
            got = digest_file(p, algorithm)
            result.checked.append(rel)
            if got != str(entry.get(algorithm, "")).lower():
                result.problems.append(f"{rel}: {algorithm} {got[:16]} differs from the seal's "
                                       f"{str(entry.get(algorithm))[:16]} (changed after it was sealed)")
    return result
