"""Per-node digests: the map step of a many-node diagnosis, run on each node by the fan-out.

A 10,000-node incident is 10,000 bundles of ~9 files each. Parsing them all on one machine
(nvidia-smi -q text, monitoring CSVs, kernel logs, every line through the signature catalogue)
costs ~10 ms a node - minutes - while every node could have parsed its own at capture time. So
``gpulib diagnose BUNDLE --write-digest`` (:mod:`gpulib.diagnose.node_digest`; run by ``gpulib
collect --digest`` on the node, inside the ``srun``/``pdsh``/Kubernetes fan-out) writes
``digest.json`` into the bundle: what :func:`gpulib.evidence.gather.gather` made of each of its
files (kind, host, signature matches, problems, the configuration facts of its raw text) and,
for the files the node's own rules found something in, their parsed records; a quiet file
carries only its :class:`~gpulib.evidence.record_summary.FileSummary` (GPU names, config facts,
the year of its stamps), so a digest is a few KiB and the central diagnosis holds no GPU record
of a healthy node. The central ``gpulib diagnose`` (the reduce step) loads a digest instead of
reading the bundle's files and runs only what joins nodes - host assignment, the incident's
year, the rank map, every rule over the records that travelled - so its answer is the one the
raw files give (tests/diagnose/test_digest.py compares both).

A digest is used only while it describes the folder as it is: the size and modification time of
every file are recorded and compared (a file added, changed or removed after the digest, a
different ``--tz``, other rule thresholds): otherwise the raw files are read, as without a digest.
Decoding builds only parser record classes (dataclasses of :mod:`gpulib.parsers`): a digest is
data, never code.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
from functools import cache
from pathlib import Path

from gpulib.evidence.bundle import DIGEST
from gpulib.evidence.record_summary import FileSummary, summary_of
from gpulib.evidence.thresholds import Thresholds
from gpulib.parsers.fold import Members

SCHEMA = "gpulib.digest/3"  # 3: a monitoring CSV's summary names its GPUs (index <-> PCI id)
#: What every version of the format starts with (an older digest is gpulib's, merely not readable).
PREFIX = b'{"schema":"gpulib.digest/'
#: Records of one file beyond this are not written (the digest stays bounded); a digest that had
#: to drop any is not used, so the answer never depends on what was dropped.
MAX_RECORDS_PER_FILE = 20_000
#: Strings up to this long in a digest's objects are shared by every digest that holds them (the
#: same kinds, hosts, zones and collector names repeat in 10,000 digests).
INTERN_CHARS = 64
#: Short tuples of words read from digests (config facts), one copy each.
_WORDS: dict[tuple, tuple] = {}
FILE_FIELDS = ("kind", "host", "host_basis", "bundle_path", "collector", "fallback_host", "timezone", "boot_time", "captured_at",
                "wrapped", "facts")


# ---------------------------------------------------------------- the record codec
def _encode(value, base: str):
    """JSON for parser records: dataclasses by class name, tuples/sets/dicts tagged; strings that
    name a path below the node's folder are made relative to it (the folder may be moved)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        out = {"~c": f"{cls.__module__}:{cls.__qualname__}"}
        for name, default in _defaults(cls):  # a field at its default is left out: the class restores it
            field_value = getattr(value, name)
            if default is _REQUIRED or field_value != default or type(field_value) is not type(default):
                out[name] = _encode(field_value, base)
        return out
    if isinstance(value, (list, Members)):  # folded lines are read back as the list of tuples they stand for
        return [_encode(v, base) for v in value]
    if isinstance(value, tuple):
        return {"~t": [_encode(v, base) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"~s": [_encode(v, base) for v in sorted(value, key=repr)]}
    if isinstance(value, dict):
        return {"~d": [[_encode(k, base), _encode(v, base)] for k, v in value.items()]}
    if isinstance(value, str) and (value == base or value.startswith(base + os.sep)):
        return {"~r": os.path.relpath(value, base)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot write a {type(value).__name__} into a digest")


_REQUIRED = object()


@cache
def _defaults(cls: type) -> tuple[tuple[str, object], ...]:
    """(field name, its default or ``_REQUIRED``) of a record class; a factory's default is what it makes."""
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out.append((f.name, f.default))
        elif f.default_factory is not dataclasses.MISSING:
            out.append((f.name, f.default_factory()))
        else:
            out.append((f.name, _REQUIRED))
    return tuple(out)


def _decoder(base: str):
    """A ``json.loads`` object hook that rebuilds what :func:`_encode` wrote, one JSON object at a
    time as the C parser meets it (no second walk over the decoded values)."""
    def hook(obj: dict):
        if "~c" in obj:
            cls = _record_class(obj.pop("~c"))
            return cls(**obj)
        if "~t" in obj:
            items = tuple(obj["~t"])
            if len(items) <= 4 and all(type(v) is str and len(v) <= INTERN_CHARS for v in items):
                items = tuple(map(sys.intern, items))  # a config fact every node states: ("driver", "550.90.07")
                return _WORDS.setdefault(items, items)
            return items
        if "~s" in obj:
            return set(obj["~s"])
        if "~d" in obj:
            return dict(obj["~d"])
        if "~r" in obj:
            return os.path.normpath(os.path.join(base, obj["~r"]))
        for key, value in obj.items():  # a file's kind, host, zone, collector: the same words in every digest
            if type(value) is str and len(value) <= INTERN_CHARS:
                obj[key] = sys.intern(value)
        return obj
    return hook


@cache
def _record_class(name: str) -> type:
    """Only dataclasses defined in gpulib's parsers can be built from a digest."""
    module, _, qualname = name.partition(":")
    if not module.startswith("gpulib.parsers.") or "." in qualname:
        raise ValueError(f"digest names {name!r}, which is not a parser record")
    cls = getattr(importlib.import_module(module), qualname, None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"digest names {name!r}, which is not a parser record")
    return cls


def is_digest(path: Path) -> bool:
    """A ``digest.json`` gpulib wrote (not an operator's file of that name)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(64).startswith(PREFIX)
    except OSError:
        return False


# ---------------------------------------------------------------- the folder as it is
def listing(folder: Path) -> dict:
    """What a digest was made from: the size and modification time of every file below ``folder``
    (hidden folders and the digest itself excepted), the modification time of every subfolder
    (it changes when an entry is added to or removed from it) and the names at the top."""
    files, dirs = {}, {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in dirnames:
            dirs[os.path.relpath(os.path.join(dirpath, name), folder)] = os.stat(os.path.join(dirpath, name)).st_mtime_ns
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), folder)
            if rel != DIGEST:
                st = os.stat(os.path.join(dirpath, name))
                files[rel] = [st.st_size, st.st_mtime_ns]
    return {"files": files, "dirs": dirs, "top": _top(folder)}


def _top(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n != DIGEST and not n.startswith(f".{DIGEST}."))


def current(folder: Path, seen: dict) -> bool:
    """True while ``folder`` is as :func:`listing` saw it - one ``stat`` per file and subfolder and
    one listing of the top, not a walk (a central diagnosis checks 10,000 folders)."""
    try:
        if _top(folder) != seen["top"]:
            return False
        for rel, mtime in seen["dirs"].items():
            if os.stat(os.path.join(folder, rel)).st_mtime_ns != mtime:
                return False
        for rel, (size, mtime) in seen["files"].items():
            st = os.stat(os.path.join(folder, rel))
            if st.st_size != size or st.st_mtime_ns != mtime:
                return False
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return True


# ---------------------------------------------------------------- map: the document
def document(folder: Path, files: list, inputs, year: int | None, tz: str | None, seen: dict, keep: set[int],
             thresholds: Thresholds) -> dict:
    """The digest of ``folder``: its gathered files (:class:`~gpulib.evidence.gather.InputFile`),
    with their records where ``keep`` holds their ``id()``, else their summary; the folder-level
    problems, notes and checkpoint folders of ``inputs``, the year its kernel logs were read with,
    ``seen`` (its :func:`listing` before it was read) and the ``thresholds`` that judged it quiet."""
    base = str(folder)
    out = []
    for f in files:
        if len(f.records) > MAX_RECORDS_PER_FILE or len(f.signals) > MAX_RECORDS_PER_FILE:
            raise ValueError(f"{f.display}: more than {MAX_RECORDS_PER_FILE:,} records; not digested")
        item = {"rel": os.path.relpath(f.path, folder), **{k: _encode(getattr(f, k), base) for k in FILE_FIELDS},
                "content_hosts": sorted(f.content_hosts), "signals": _encode(f.signals, base),
                "problems": _encode(f.problems, base)}
        if id(f) in keep:
            item["records"] = _encode(f.records, base)
        else:
            item["summary"] = summary_of(f).to_json()
        out.append(item)
    return {"schema": SCHEMA, "tz": tz, "thresholds": dataclasses.asdict(thresholds), "year": year, "files_seen": seen,
            "inputs": out, "checkpoint_dirs": [os.path.relpath(d, folder) for _root, d in inputs.checkpoint_dirs],
            "problems": _encode(inputs.problems, base), "notes": _encode(inputs.notes, base)}


def save(folder: Path, doc: dict) -> Path:
    """Write ``doc`` as ``folder/digest.json`` (atomically: a reader sees the old one or the new one)."""
    target = folder / DIGEST
    tmp = target.with_name(f".{DIGEST}.{os.getpid()}")
    tmp.write_text(json.dumps(doc, separators=(",", ":")))
    os.replace(tmp, target)
    return target


# ---------------------------------------------------------------- reduce: read
@dataclasses.dataclass
class Loaded:
    """A digest read back: each file's :class:`~gpulib.evidence.gather.InputFile` fields, the
    folder-level problems, notes and checkpoint folders, and the year its kernel logs were read
    with (the central diagnosis re-reads them when the incident's year differs)."""

    folder: Path
    files: list  # each file's InputFile fields (a dict), until the reader makes them InputFiles
    year: int | None
    problems: list
    notes: list
    checkpoint_dirs: list[Path]


#: One empty host set for every file whose lines name no host.
NO_HOSTS: frozenset[str] = frozenset()
#: The records, signals and problems of a digested file that has none (most of 80,000 files): read
#: only - a file read again from its raw text gets lists of its own (:mod:`gpulib.evidence.gather`).
NOTHING: tuple = ()
#: Values read from digests that every node states alike (its configuration facts), one copy each.
_SHARED: dict[tuple, tuple] = {}


def _shared(value: tuple) -> tuple:
    return _SHARED.setdefault(value, value) if value else NOTHING
#: Collector records as read from digests, by content (read-only once loaded).
_COLLECTORS: dict[tuple, dict] = {}


def load(folder: Path, tz: str | None, thresholds: Thresholds | None = None) -> Loaded | None:
    """The digest of ``folder``, or None when there is none, or it is stale (the folder changed
    since), made with another ``tz`` or other ``thresholds``, foreign or unreadable: then the raw
    files are read."""
    try:
        doc = json.loads((folder / DIGEST).read_text(encoding="utf-8"), object_hook=_decoder(str(folder)))
        judged = dataclasses.asdict(thresholds or Thresholds())
        if doc.get("schema") != SCHEMA or doc.get("tz") != tz or doc.get("thresholds") != judged \
                or not current(folder, doc.get("files_seen")):
            return None
        files = [{"path": folder / item.pop("rel"), **item} for item in doc["inputs"]]
        for item in files:
            item["content_hosts"] = frozenset(item["content_hosts"]) if item["content_hosts"] else NO_HOSTS
            if item.get("collector"):  # the same few records in every node's digest: one copy each
                item["collector"] = _COLLECTORS.setdefault(tuple(item["collector"].items()), item["collector"])
            for key in ("signals", "problems", "facts"):  # mostly empty, else the same facts on every node
                if isinstance(item.get(key), list):
                    item[key] = _shared(tuple(item[key])) if key == "facts" else (item[key] or NOTHING)
            if "summary" in item:
                item.update(summary=FileSummary.from_json(item["summary"]), summary_only=True, records=NOTHING)
        return Loaded(folder, files, doc.get("year"), doc["problems"], doc["notes"],
                      [folder / rel for rel in doc["checkpoint_dirs"]])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


__all__ = ["DIGEST", "NOTHING", "SCHEMA", "Loaded", "document", "is_digest", "listing", "load", "save"]
