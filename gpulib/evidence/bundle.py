"""The evidence bundle (``gpulib-evidence/1``): one directory per host per capture.

Why this shape: the first rule of an incident is to freeze the scene before anyone reboots.
A bundle keeps each tool's own bytes (so nothing is lost to interpretation), says for every
collector whether it worked and why not, and carries a sha256 of every file so that anyone
can later prove the evidence was not edited (``gpulib verify``).

A bundle is written under a temporary name and renamed when complete; ``manifest.json`` is
written last, so a directory with a manifest is a complete bundle. An existing bundle is never
overwritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from gpulib import __version__
from gpulib.errors import BundleError, GpulibError
from gpulib.identity import to_utc_iso, utc_now_iso

FORMAT = "gpulib-evidence/1"
MANIFEST = "manifest.json"
#: Derived from a bundle after capture (``gpulib diagnose --write-digest``), so not in its manifest.
DIGEST = "digest.json"
STATUSES = ("ok", "unavailable", "failed", "timeout")


@dataclass
class CollectorRecord:
    """Outcome of one collector: ``status`` is one of :data:`STATUSES`, ``reason`` says why."""

    name: str
    status: str
    reason: str | None = None
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"collector {self.name}: status {self.status!r} not in {STATUSES}")


def sha256_file(path: Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def local_timezone_name() -> str:
    """The zone ``dmesg -T`` and syslog print in (they carry no offset), e.g. ``UTC`` or ``+0200``."""
    try:
        link = os.readlink("/etc/localtime")
        if "zoneinfo/" in link:
            return link.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return time.strftime("%z") or "UTC"


def boot_time_iso() -> str | None:
    """Boot time from /proc/stat ``btime``: raw ``dmesg`` counts seconds from it."""
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return to_utc_iso(datetime.fromtimestamp(int(line.split()[1]), timezone.utc))
    except OSError:
        return None
    return None


class BundleWriter:
    """Write one bundle atomically::

        with BundleWriter(out_dir, host="node-a") as bundle:
            bundle.write_bytes("nvidia-smi/q.xml", raw)
            bundle.record(CollectorRecord("nvidia-smi", "ok", seconds=0.4, files=[...]))
        # -> out_dir is now complete, with manifest.json written last

    On an exception inside the block the partial directory is kept under its temporary name
    (never lost, never mistaken for a complete bundle) and the exception propagates.
    """

    def __init__(self, final_dir: str | Path, host: str | None = None, command_line: list[str] | None = None):
        self.final_dir = Path(final_dir)
        self.host = host or socket.gethostname()
        self.command_line = command_line if command_line is not None else list(sys.argv)
        self.collectors: list[CollectorRecord] = []
        self.captured_at = utc_now_iso()
        if self.final_dir.exists():
            raise BundleError(
                "bundle already exists", path=str(self.final_dir), hint="bundles are never overwritten; pick a new --out"
            )
        self.final_dir.parent.mkdir(parents=True, exist_ok=True)
        self.tmp_dir = self.final_dir.parent / f".{self.final_dir.name}.partial-{uuid.uuid4().hex[:8]}"
        self.tmp_dir.mkdir()

    def path(self, relpath: str) -> Path:
        target = (self.tmp_dir / relpath).resolve()
        if self.tmp_dir.resolve() not in target.parents:
            raise BundleError(f"path escapes the bundle: {relpath!r}", path=str(self.final_dir),
                              hint="a bundle file name is relative and stays inside the bundle (no '..', no leading '/')")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_bytes(self, relpath: str, data: bytes) -> str:
        self.path(relpath).write_bytes(data)
        return relpath

    def write_text(self, relpath: str, text: str) -> str:
        return self.write_bytes(relpath, text.encode("utf-8"))

    def write_json(self, relpath: str, obj: object) -> str:
        return self.write_text(relpath, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

    def record(self, collector: CollectorRecord) -> None:
        self.collectors.append(collector)

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()

    def finish(self) -> Path:
        files = {}
        for path in sorted(p for p in self.tmp_dir.rglob("*") if p.is_file()):
            rel = path.relative_to(self.tmp_dir).as_posix()
            files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        manifest = {
            "format": FORMAT,
            "host": self.host,
            "captured_at": self.captured_at,
            "timezone": local_timezone_name(),
            "boot_time": boot_time_iso(),
            "gpulib_version": __version__,
            "command_line": self.command_line,
            "collectors": [asdict(c) for c in self.collectors],
            "files": files,
        }
        (self.tmp_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        try:
            os.rename(self.tmp_dir, self.final_dir)
        except OSError as exc:
            raise BundleError(
                f"cannot move the finished bundle into place ({exc.strerror}); it is kept at {self.tmp_dir}",
                path=str(self.final_dir),
                hint="another capture wrote this name first; nothing was overwritten",
            ) from exc
        return self.final_dir


def read_manifest(root: Path, expected_format: str, *, what: str, unfinished: str,
                  error: type[GpulibError] = BundleError) -> dict:
    """The parsed ``manifest.json`` of a sealed directory (evidence bundle or run archive).

    Raises ``error`` naming ``root`` when the manifest is missing (``unfinished`` says why that
    happens), unreadable, or of another ``format`` than ``expected_format``.
    """
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"no manifest.json: not a {what}, or {unfinished}", path=str(root)) from None
    except (OSError, ValueError) as exc:
        raise error(f"manifest.json is unreadable: {exc}", path=str(root)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != expected_format:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise error(f"unknown {what} format {found!r}, expected {expected_format}", path=str(root))
    return manifest


@dataclass
class Bundle:
    """A complete bundle opened for reading. ``manifest`` is the parsed ``manifest.json``."""

    root: Path
    manifest: dict

    @classmethod
    def open(cls, root: str | Path) -> Bundle:
        root = Path(root)
        return cls(root, read_manifest(root, FORMAT, what="bundle", unfinished="an interrupted capture"))

    @property
    def host(self) -> str:
        return self.manifest.get("host") or self.root.name

    @property
    def timezone(self) -> str | None:
        return self.manifest.get("timezone")

    @property
    def boot_time(self) -> str | None:
        return self.manifest.get("boot_time")

    @property
    def collectors(self) -> list[CollectorRecord]:
        return [CollectorRecord(**c) for c in self.manifest.get("collectors", [])]

    def files(self) -> list[Path]:
        return [self.root / rel for rel in self.manifest.get("files", {})]


def is_bundle(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


@dataclass
class VerifyReport:
    """Result of re-hashing a bundle: every list empty means the evidence is untouched."""

    root: str
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.changed or self.unexpected)

    def lines(self) -> list[str]:
        if self.ok:
            return [f"{self.root}: OK, every file matches its sha256 in the manifest"]
        out = [f"{self.root}: MODIFIED"]
        out += [f"  missing:    {p}" for p in self.missing]
        out += [f"  changed:    {p}" for p in self.changed]
        out += [f"  unexpected: {p}" for p in self.unexpected]
        return out


def verify_files(root: Path, listed: dict) -> VerifyReport:
    """Re-hash the files ``listed`` in a manifest (``{relpath: {sha256, bytes}}``) under ``root``."""
    report = VerifyReport(str(root))
    for rel, meta in listed.items():
        path = root / rel
        if not path.is_file():
            report.missing.append(rel)
        elif path.stat().st_size != meta.get("bytes") or sha256_file(path) != meta.get("sha256"):
            report.changed.append(rel)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel not in (MANIFEST, DIGEST) and rel not in listed:
            report.unexpected.append(rel)
    return report


def verify(root: str | Path) -> VerifyReport:
    """Re-hash every file of a bundle against its manifest."""
    bundle = Bundle.open(root)
    return verify_files(bundle.root, bundle.manifest.get("files", {}))


def copy_capped(source: Path, target: Path, cap_bytes: int) -> bool:
    """Copy a file, keeping only its last ``cap_bytes`` (the end of a log is where it died).

    Returns True when the copy was truncated.
    """
    size = source.stat().st_size
    if size <= cap_bytes:
        shutil.copyfile(source, target)
        return False
    with open(source, "rb") as src, open(target, "wb") as dst:
        src.seek(size - cap_bytes)
        shutil.copyfileobj(src, dst)
    return True
