"""The runs of one runbook chained by their manifests: an edited run is caught by the run after it.

A run's ``manifest.json`` holds the sha256 of every file of the run, so editing ``findings.json``
alone is caught by the re-hash. But whoever can edit the findings can edit the manifest too, and
re-hash: the run then verifies against itself. So each new run's manifest also records the run
archived before it in the same runbook folder and the sha256 of *that run's* ``manifest.json``::

    "chain": {"previous": "20260304T050607Z-node-a-1a2b3c4d", "previous_manifest_sha256": "9f0c..."}

Changing any byte of a run (its files, then its manifest to match) changes its manifest's hash,
which the next run recorded: ``gpulib archive show`` and ``archive diff`` check the links back
from a run to the first one, and the link of every later run to it, and refuse a broken one.

What it protects, without any key: an edit of one run (or of several, each not the newest) is
detected, by the run after it. What it does not: the newest run until a later run chains to it
(``archive show`` prints each manifest's sha256: record it elsewhere, in the ticket or a log, to
cover it now); a rewrite of the whole chain from the edited run to the newest (every later
manifest re-hashed in turn: only a hash kept outside the archive, or a signature, catches that);
runs removed from the archive (the chain then starts after the gap, and says so). Runs archived
before the chain existed have no ``chain`` field: they read as "unchained (older format)", with
only their own file hashes checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.evidence.bundle import MANIFEST, sha256_file

CHAIN = "chain"


def _manifest(run_dir: Path) -> dict | None:
    try:
        doc = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _runs(folder: Path) -> list[tuple[Path, dict]]:
    """The complete runs in a runbook folder (a hidden ``.partial`` one is still being written)."""
    try:
        paths = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    return [(p, m) for p in paths if (m := _manifest(p)) is not None]


def link(folder: Path) -> dict:
    """The ``chain`` field of a run about to be published into ``folder``: the newest run there
    (by finish, then start time) and the sha256 of its manifest; ``previous`` None for the first.
    Two runs finishing at once may both link to the same run: each link still checks."""
    runs = [((m.get("finished_at") or m.get("started_at") or "", m.get("started_unix_s") or 0.0, p.name), p)
            for p, m in _runs(folder)]
    if not runs:
        return {"previous": None, "previous_manifest_sha256": None}
    _key, newest = max(runs)
    return {"previous": newest.name, "previous_manifest_sha256": sha256_file(newest / MANIFEST)}


@dataclass
class ChainReport:
    """``status``: verified (every link checks), unchained (an older run without a link) or
    broken (a run changed after another run recorded its manifest); ``lines`` say which."""

    status: str
    lines: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # the lines that say what was changed

    @property
    def ok(self) -> bool:
        return not self.broken


def _short(digest: object) -> str:
    return str(digest)[:12] if digest else "none"


def check(run_dir: Path) -> ChainReport:
    """Check the links from ``run_dir`` back to the first run of its folder, and of every later
    run to it. The run's own manifest is read from disk: the hash a later run recorded is of
    those bytes."""
    folder, lines, broken = run_dir.parent, [], []
    manifest = _manifest(run_dir) or {}
    mine = sha256_file(run_dir / MANIFEST)
    later = [(p.name, m[CHAIN]) for p, m in _runs(folder)
             if p != run_dir and isinstance(m.get(CHAIN), dict) and m[CHAIN].get("previous") == run_dir.name]
    for name, record in later:
        if record.get("previous_manifest_sha256") != mine:
            broken.append(f"chain BROKEN: {name} recorded this run's manifest as sha256 "
                         f"{_short(record.get('previous_manifest_sha256'))}..., it is now {_short(mine)}...: this run "
                         "was changed after it was archived")
    current, here, steps, seen = run_dir, manifest, 0, {run_dir.name}
    while True:
        record = here.get(CHAIN)
        if not isinstance(record, dict):
            lines.append("chain: unchained (older format): this run records no run before it; only its own file "
                         "hashes are checked" if current == run_dir else
                         f"chain: verified back {steps} run(s) to {current.name}, an unchained run (older format); "
                         "runs before it are not covered")
            break
        previous = record.get("previous")
        if previous is None:
            lines.append(f"chain: verified back {steps} run(s) to the first chained run ({current.name})")
            break
        target = folder / str(previous)
        if not isinstance(previous, str) or "/" in previous or previous.startswith(".") or previous in seen:
            broken.append(f"chain BROKEN: {current.name} links to {previous!r}, not a run of this folder")
            break
        if not (target / MANIFEST).is_file():
            lines.append(f"chain: verified back {steps} run(s); the run before {current.name} ({previous}) is no "
                         "longer in the archive (removed): the chain starts after that gap")
            break
        now = sha256_file(target / MANIFEST)
        if now != record.get("previous_manifest_sha256"):
            broken.append(f"chain BROKEN: {current.name} recorded the manifest of {previous} as sha256 "
                         f"{_short(record.get('previous_manifest_sha256'))}..., it is now {_short(now)}...: "
                         f"{previous} was changed after it was archived")
            break
        seen.add(previous)
        current, here, steps = target, _manifest(target) or {}, steps + 1
    if not later and not broken:
        lines.append(f"chain: no later run links to this one yet (its manifest sha256 {mine}: keep it outside the "
                     "archive to protect this run now)")
    status = "broken" if broken else ("verified" if isinstance(manifest.get(CHAIN), dict) else "unchained")
    return ChainReport(status, broken + lines, broken)
