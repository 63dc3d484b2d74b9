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

# hashlib (sha256 seals), json (reading or writing a seal) and gpulib.identity (datetime, when
# sealing) are imported where they are used, and paths are os.path strings, not pathlib's: `ckpt
# inspect` checks for a seal on every run and finds none far more often than one, and those four
# cost it ~18 ms of an ~80 ms start.

SCHEMA = "gpulib.ckpt-seal/1"
DIR_SEAL = "gpulib-seal.json"
FILE_SUFFIX = ".seal.json"
ALGORITHMS = ("crc32", "sha256")
CHUNK = 8 << 20


class SealError(Exception):
    """The path cannot be sealed (missing, empty folder, unreadable file), with the path named."""


def seal_path(path: str) -> str:
    """Where the seal of ``path`` is (or would be) written."""
    return os.path.join(path, DIR_SEAL) if os.path.isdir(path) else path + FILE_SUFFIX


def digest_file(path: str, algorithm: str) -> str:
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


def _members(path: str) -> list[str]:
    """The files a seal of ``path`` lists, relative to the sealed folder (or the file's name)."""
    if not os.path.isdir(path):
        return [os.path.basename(path)]
    found = []
    for folder, _, names in os.walk(path):
        for name in names:
            full = os.path.join(folder, name)
            if os.path.isfile(full) and not name.endswith((".tmp", FILE_SUFFIX)) and name != DIR_SEAL:
                found.append(os.path.relpath(full, path).replace(os.sep, "/"))
    return sorted(found)


def seal(path: str | os.PathLike, algorithm: str = "crc32") -> str:
    """Seal a checkpoint file or folder; returns the seal's path. Raises :class:`SealError`."""
    path = os.fspath(path)
    if algorithm not in ALGORITHMS:
        raise SealError(f"unknown checksum {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    if not os.path.exists(path):
        raise SealError(f"{path}: does not exist")
    members = _members(path)
    if not members:
        raise SealError(f"{path}: an empty folder, nothing to seal")
    base = path if os.path.isdir(path) else os.path.dirname(path)
    files = {}
    for rel in members:
        p = os.path.join(base, rel)
        try:
            files[rel] = {"bytes": os.stat(p).st_size, algorithm: digest_file(p, algorithm)}
        except OSError as exc:
            raise SealError(f"{p}: cannot read: {exc.strerror or exc}") from None
    import json

    from gpulib.identity import utc_now_iso

    doc = {"schema": SCHEMA, "sealed_at": utc_now_iso(), "algorithm": algorithm, "files": files}
    target = seal_path(path)
    write_atomic(target, json.dumps(doc, indent=1).encode() + b"\n")
    return target


def write_atomic(target: str, data: bytes) -> None:
    """``data`` to ``target`` via a temp file in the same folder, fsync, rename, fsync of the folder."""
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    fd = os.open(folder or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def inside_folder(rel: str) -> bool:
    """Whether a seal entry names a file below the sealed folder, as ``seal`` writes them: relative,
    '/'-separated, no '..', '.', empty or NUL part (``../../x`` or ``/etc/hostname`` are refused)."""
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or (len(rel) > 1 and rel[1] == ":"):
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


def _malformed(entry, algorithm: str) -> str | None:
    """Why an entry is not ``{"bytes": <int>, "<algorithm>": <hex>}``, else None."""
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an object"
    size = entry.get("bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return f"'bytes' is {str(size)[:40]!r}, not a byte count"
    if not isinstance(entry.get(algorithm), str):
        return f"no {algorithm} text"
    return None


class SealCheck:
    """A path against its seal. ``sealed``: a seal was found; ``problems``: one line per file that
    differs (missing, other size, other checksum), naming it; ``checked``: files whose checksum
    was compared (empty when only sizes were). A plain class: ``ckpt inspect`` imports this module
    on every start and ``dataclasses`` would cost it a sixth of its time."""

    def __init__(self, seal: str | None, sealed: bool = False) -> None:
        self.seal, self.sealed = seal, sealed  # the seal file's path
        self.problems: list[str] = []
        self.warnings: list[str] = []  # entries refused without being opened (paths outside the sealed folder)
        self.checked: list[str] = []
        self.algorithm: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def seal_name(self) -> str:
        return os.path.basename(self.seal or "")


def find_seal(path: str) -> tuple[str, str] | None:
    """(seal file, name of ``path`` inside it) for a sealed file or folder, or for a file inside a
    sealed folder (up to three folders up); None when nothing seals it."""
    own = seal_path(path)
    if os.path.isfile(own):
        return own, "" if os.path.isdir(path) else os.path.basename(path)
    path = os.path.abspath(path)
    inner, folder = os.path.basename(path), os.path.dirname(path)
    for _ in range(3):
        if os.path.isfile(os.path.join(folder, DIR_SEAL)):
            return os.path.join(folder, DIR_SEAL), inner
        folder, above = os.path.dirname(folder), os.path.basename(folder)
        if not above:
            break
        inner = f"{above}/{inner}"
    return None


def check(path: str | os.PathLike, checksums: bool) -> SealCheck:
    """Compare ``path`` (a file, or a folder: every file its seal lists) with its seal. Sizes are
    always compared; ``checksums`` reads every byte and compares the CRC-32/sha256 too."""
    path = os.fspath(path)
    found = find_seal(path)
    if found is None:
        return SealCheck(None)
    seal_file, name = found
    result = SealCheck(seal_file, sealed=True)
    import json

    try:
        with open(seal_file, encoding="utf-8") as fh:
            doc = json.load(fh)
        files, algorithm = doc["files"], doc["algorithm"]
        if doc.get("schema") != SCHEMA or algorithm not in ALGORITHMS or not isinstance(files, dict):
            raise ValueError(f"not a {SCHEMA} manifest")
    except RecursionError:
        result.problems.append(f"seal {seal_file} unreadable (JSON nested too deeply): the checkpoint cannot be checked "
                               "against it")
        return result
    except (OSError, ValueError, KeyError, TypeError) as exc:
        result.problems.append(f"seal {seal_file} unreadable ({type(exc).__name__}: {str(exc)[:200]}): the checkpoint "
                               "cannot be checked against it")
        return result
    result.algorithm = algorithm
    base = os.path.dirname(seal_file)
    wanted = {k: v for k, v in files.items() if not name or k == name or k.startswith(name.rstrip("/") + "/")}
    if name and not wanted:
        return SealCheck(None)  # a file added to a sealed folder later: the seal says nothing about it
    for rel, entry in sorted(wanted.items()):
        if not inside_folder(rel):
            result.warnings.append(f"lists {rel[:200]!r}, a path outside the sealed folder: refused, not opened (a seal "
                                   "only vouches for the files below it; this entry was not written by `gpulib ckpt seal`)")
            continue
        malformed = _malformed(entry, algorithm)
        if malformed:
            result.problems.append(f"{rel}: its seal entry is malformed ({malformed}): the file cannot be checked")
            continue
        p = os.path.join(base, rel)
        if not os.path.isfile(p):
            result.problems.append(f"{rel}: sealed but missing")
            continue
        size = os.stat(p).st_size
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
