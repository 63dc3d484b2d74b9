"""The run archive: ``archive/<runbook>/<UTC>-<host>-<id>/``, one immutable directory per run.

Why immutable: months later someone must be able to open a run offline and see exactly what
the scheduler saw, and prove it was not edited. So a run is written under a hidden temporary
name, ``manifest.json`` (with the sha256 of every other file) is written last, every file is
made read-only and only then is the directory renamed into place. A directory with a manifest
is therefore complete; a re-run always gets a new name; ``gpulib archive show`` re-hashes. Each
manifest also records the sha256 of the manifest of the run archived before it
(:mod:`gpulib.runbooks.chain`), so a run edited and re-hashed is caught by the run after it.

Layout of one run::

    notebooks/<step>.ipynb   executed notebooks (papermill output, with their own metadata)
    report.html              one offline report of all steps (code hidden, plotly.js once)
    findings.json            {"format", "runbook", "run", "findings": [... every step's ...]}
    manifest.json            parameters, versions, timings, steps, exit status, file hashes
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from gpulib.evidence.bundle import MANIFEST, VerifyReport, read_manifest, sha256_file, verify_files
from gpulib.runbooks import chain
from gpulib.runbooks.spec import RunbookError

RUN_FORMAT = "gpulib.runbook-run/1"
FINDINGS_FORMAT = "gpulib.runbook-findings/1"
FINDINGS = "findings.json"
REPORT = "report.html"


def default_archive_root() -> Path:
    return Path(os.environ.get("GPULIB_ARCHIVE") or Path.cwd() / "archive")


def short_host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", socket.gethostname().split(".")[0]) or "host"


class ArchiveWriter:
    """Collects one run under ``<root>/<runbook>/.<name>.partial`` and publishes it atomically."""

    def __init__(self, root: Path, runbook: str, host: str | None = None):
        self.started = datetime.now(timezone.utc)
        self.host = host or short_host()
        self.run_id = uuid.uuid4().hex[:8]
        self.name = f"{self.started:%Y%m%dT%H%M%SZ}-{self.host}-{self.run_id}"
        self.final_dir = Path(root) / runbook / self.name
        self.tmp_dir = self.final_dir.parent / f".{self.name}.partial"
        try:
            self.tmp_dir.mkdir(parents=True)
        except OSError as exc:
            raise RunbookError(f"cannot create the run archive: {exc.strerror}", path=str(self.tmp_dir)) from exc

    def path(self, relpath: str) -> Path:
        target = self.tmp_dir / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_json(self, relpath: str, obj: object) -> Path:
        target = self.path(relpath)
        target.write_text(json.dumps(obj, indent=2, default=str) + "\n", encoding="utf-8")
        return target

    def finish(self, manifest: dict) -> Path:
        """Hash every file, write the manifest last (linked to the run before it), make files
        read-only, rename into place."""
        files = {}
        for path in sorted(p for p in self.tmp_dir.rglob("*") if p.is_file()):
            files[path.relative_to(self.tmp_dir).as_posix()] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        self.write_json(MANIFEST, {**manifest, "files": files, chain.CHAIN: chain.link(self.final_dir.parent)})
        for path in self.tmp_dir.rglob("*"):
            if path.is_file():
                path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.rename(self.tmp_dir, self.final_dir)  # the name carries a fresh random id: never an existing run
        return self.final_dir


@dataclass
class ArchivedRun:
    """A finished run read back from the archive."""

    path: Path
    manifest: dict

    @classmethod
    def open(cls, path: Path) -> ArchivedRun:
        return cls(path, read_manifest(path, RUN_FORMAT, what="run archive", unfinished="an interrupted run",
                                       error=RunbookError))

    @property
    def runbook(self) -> str:
        return self.manifest.get("runbook", self.path.parent.name)

    @property
    def evidence(self) -> list[str]:
        """The evidence paths the run's steps read, as given to them (step order, each once);
        empty when no step was given one (e.g. a preflight that captured this host live)."""
        seen: dict[str, None] = {}
        for step in self.manifest.get("steps", []):
            value = (step.get("parameters") or {}).get("evidence")
            if value:
                seen.setdefault(str(value), None)
        if not seen:
            params = self.manifest.get("parameters") or {}
            for source in ("values", "cli", "runbook"):
                value = (params.get(source) or {}).get("evidence")
                if value:
                    seen.setdefault(str(value), None)
        return list(seen)

    @property
    def findings(self) -> list[dict]:
        try:
            doc = json.loads((self.path / FINDINGS).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RunbookError(f"findings.json is unreadable: {exc}", path=str(self.path)) from None
        return list(doc.get("findings", []))

    def verify(self) -> VerifyReport:
        """Re-hash every file against the manifest (the archive's proof of immutability)."""
        return verify_files(self.path, self.manifest.get("files", {}))

    def chain(self) -> chain.ChainReport:
        """Check the links of the runs before and after this one (:mod:`gpulib.runbooks.chain`)."""
        return chain.check(self.path)

    def tampered(self) -> list[str]:
        """Why this run cannot be trusted as archived (empty: its files and its chain check)."""
        report, links = self.verify(), self.chain()
        listed = "; ".join(" ".join(line.split()) for line in report.lines()[1:])  # "changed: findings.json"
        files = [] if report.ok else [f"its files do not match its manifest ({listed})"]
        return files + links.broken


def require_archive_root(root: Path) -> Path:
    """``root`` if it is a readable folder, else a RunbookError naming it (the CLI exits 2)."""
    from gpulib.readable import unreadable_reason

    reason = unreadable_reason(root, "dir")
    if reason:
        raise RunbookError(f"archive root: {reason}", path=str(root),
                           hint="pass --archive DIR (or set GPULIB_ARCHIVE) to the folder `gpulib run` archived into")
    return root


def list_runs(root: Path, runbook: str | None = None) -> list[ArchivedRun]:
    """Complete runs under ``root`` (oldest first); partial or foreign directories are skipped."""
    runs = []
    books = [root / runbook] if runbook else sorted(p for p in Path(root).glob("*") if p.is_dir())
    for book in books:
        for path in sorted(book.glob("*")):
            if path.is_dir() and not path.name.startswith(".") and (path / MANIFEST).is_file():
                try:
                    runs.append(ArchivedRun.open(path))
                except RunbookError:
                    continue
    return sorted(runs, key=lambda r: (r.manifest.get("started_at") or "", r.manifest.get("started_unix_s") or 0.0,
                                       r.path.name))


def resolve_run(ref: str, root: Path) -> ArchivedRun:
    """A run directory, a run name or id under ``root``, or ``RUNBOOK~N`` (N runs before the latest)."""
    if Path(ref).is_dir():
        return ArchivedRun.open(Path(ref))
    if "/" in ref or ref.startswith("."):  # meant as a folder: say what is wrong with it
        from gpulib.readable import unreadable_reason

        raise RunbookError(f"run folder: {unreadable_reason(ref, 'dir') or 'not a run'}", path=ref)
    require_archive_root(root)
    book, tilde, back = ref.partition("~")
    if tilde and back.isdigit():
        runs = list_runs(root, book)
        if int(back) >= len(runs):
            raise RunbookError(f"{ref}: runbook {book!r} has {len(runs)} archived run(s) under {root}")
        return runs[-1 - int(back)]
    matches = [r for r in list_runs(root) if r.path.name == ref or r.path.name.endswith(f"-{ref}")]
    if len(matches) != 1:
        raise RunbookError(
            f"{ref}: {'no' if not matches else len(matches)} matching run(s) under {root}",
            hint="pass a run directory, its name or id, or RUNBOOK~0 for the latest run, RUNBOOK~1 for the one before",
        )
    return matches[0]
