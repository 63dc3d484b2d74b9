"""Gather the evidence: walk bundles and raw folders, detect each file, parse it, name its host.

Nothing here raises on bad input. Every file that cannot be used (binary junk, no permission,
unknown format, a parser that choked) stays in the list with its problems, so the report can
say exactly what was *not* looked at - an on-call engineer must know when evidence is missing.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path

from gpulib.evidence import clock_offset, digest, fanout, kinds
from gpulib.evidence.bundle import DIGEST, MANIFEST, Bundle, is_bundle
from gpulib.evidence.record_summary import JOINED_BY_HOST, FileSummary, count_years, summary_of
from gpulib.evidence.thresholds import Thresholds
from gpulib.logs import get_logger
from gpulib.parsers import detect, gpu_series, registry, session, signatures, unwrap
from gpulib.parsers.base import Problem, looks_binary, read_text
from gpulib.parsers.gpu_records import GpuSample
from gpulib.parsers.training_log import JobEvent, members_of
from gpulib.progress import Progress

log = get_logger(__name__)

HEAD_BYTES = 8192
#: Evidence of at least this many files (an incident of hundreds of nodes) shows its reading progress.
PROGRESS_MIN_FILES = 500
#: Pasted evidence (an issue comment, a chat paste) is small; a multi-GB job log is never unwrapped
#: as a whole (its lines are still read one by one by the signature scan).
UNWRAP_MAX_BYTES = 64 * 1024 * 1024
#: Files that are model state, not evidence text: listed, handed to the checkpoint inspector.
MODEL_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".distcp")
#: Small files that describe the model state beside them (sidecars, ``latest``, ``.tmp`` markers).
METADATA_SUFFIXES = (".json", ".yaml", ".tmp", ".metadata", ".txt")
#: Folder names that never name a host (so the folder fallback skips them).
GENERIC_DIRS = re.compile(
    r"^(?:logs?|inputs?|outputs?|data|tmp|var|kernel|nvidia-smi|monitoring|metrics|checkpoints?|ckpts?|pod-logs|"
    r"job[-_]?\d*|slurm[-_]?\d*|run[-_]?\w*|incident\S*|evidence|bundles?|nodes?|hosts?|gpu\w*|case-\S+|\.+|"
    # torchelastic's log folders: <log_dir>/<run id, "none_<random>" by default>/attempt_<n>/<local rank>/
    r"attempt_\d+|torchelastic_\w+|none_\w+)$", re.I)
_HOSTLIKE = re.compile(r"^[A-Za-z][\w.-]*$")
#: A bundle's own bookkeeping (what was run, copied, listed, queried): read by the tools that
#: wrote it, never evidence of a fault, so neither parsed nor flagged.
BUNDLE_METADATA = ("commands.json", "logs/index.json", "checkpoints/listing.json", "prometheus/query.json")
#: Collector outputs whose kind the bundle layout says (a large NVML snapshot has its schema tag
#: at its end, beyond the head that content detection sees).
BUNDLE_KINDS = {"nvml/snapshot.json": kinds.NVML_SNAPSHOT, "nvml/samples.csv": kinds.NVML_SAMPLES}
#: Kinds whose records are GPU time series (:class:`GpuSample` rows), reduced per GPU by :func:`gather`.
SERIES_KINDS = kinds.GPU_SERIES
#: Copies of the operator's files (``gpulib collect --logs``): raw evidence, read like a raw folder.
BUNDLE_COPIES = "logs/"
#: Notes for people (an incident's README): expected beside evidence, not an unknown input. Other
#: markdown (an issue comment, a pasted table) is still scanned for signatures.
DOC_NAME = re.compile(r"(?i)^readme(?:\.\w+)?$|\.(?:md|markdown|rst|adoc)$")
README_NAME = re.compile(r"(?i)^readme(?:\.\w+)?$")
#: The structure of a document (a markdown heading or table row): a file *named* as a document
#: (``notes.md``) is read as one only when its head shows it, under a paste's wrapping (a log pasted
#: between fences is still a log). Why: a name is a hint, the content decides - a job log saved or
#: renamed as ``.md`` has neither and is read as the log it is (the failure vocabulary, the
#: rank-only signs of :mod:`gpulib.diagnose.diverged`).
DOC_STRUCTURE = re.compile(r"(?m)^(?:#{1,6}[ \t]+\S|[ \t]*\|.*\|[ \t]*$)")


@dataclass(slots=True)  # ~90,000 at 10,000 nodes
class InputFile:
    """One file of the evidence, as found and as parsed."""

    path: Path
    display: str  # as the user would name it: relative to the path they gave
    root: Path
    kind: str = kinds.UNKNOWN  # a parser KIND, or unknown | checkpoint | unreadable | empty
    host: str | None = None
    host_basis: str | None = None  # bundle | content | scheduler | folder | file name | only host | host-like folder
    bundle_path: str | None = None  # path inside its evidence bundle ('nvml/snapshot.json')
    collector: dict | None = None  # the manifest's record of the collector that wrote it
    fallback_host: str | None = None  # a copied log's bundle host: used when nothing better names one
    timezone: str | None = None
    boot_time: str | None = None
    captured_at: str | None = None  # the bundle's UTC capture time (puts a BMC clock reading on UTC)
    records: list = field(default_factory=list)
    signals: list[signatures.Signal] = field(default_factory=list)  # catalogue matches, whatever the kind
    problems: list[Problem] = field(default_factory=list)
    content_hosts: frozenset[str] = digest.NO_HOSTS
    wrapped: bool = False  # pasted (quote, fence, prompt, fan-out prefix): parsed from its unwrapped text
    facts: list | None = None  # what its raw text says about the node's configuration (node_facts.text_facts)
    digest_year: int | None = None  # read from a digest: the year its year-less stamps were read with
    summary: FileSummary | None = None  # what the joining steps read from its records (record_summary)
    summary_only: bool = False  # read from a digest that carried its summary, not its records (quiet)
    digest_folder: Path | None = None  # the node folder whose digest it was read from

    def text(self, limit: int) -> str | None:
        """The file's text when it is at most ``limit`` bytes, else None; None when it cannot be read.
        For rules that read a pasted command output again as lines (a mount table, a rail map): a
        paste is small, so a multi-GB log is never read twice for it."""
        try:
            if self.path.stat().st_size > limit:
                return None
            return self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def to_dict(self) -> dict:
        out = {"path": self.display, "kind": self.kind, "host": self.host}
        if self.problems:
            out["problems"] = [p.message if p.source == str(self.path) else str(p) for p in self.problems[:5]]
        return out


@dataclass
class Inputs:
    files: list[InputFile] = field(default_factory=list)
    checkpoint_dirs: list[tuple[Path, Path]] = field(default_factory=list)  # (root given, folder)
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)  # what was skipped on purpose, and why
    deferred: list[tuple[InputFile, str]] = field(default_factory=list)  # kernel logs, parsed last

    def of_kind(self, *kinds: str) -> list[InputFile]:
        return [f for f in self.files if f.kind in kinds]

    @property
    def known_hosts(self) -> set[str]:
        hosts: set[str] = set()
        for f in self.files:
            hosts |= f.content_hosts
            if f.host_basis in ("bundle", "content"):
                hosts.add(f.host)
        return {h for h in hosts if h}


def _unlistable(problems: list[Problem]):
    """``os.walk`` error hook: a folder we may not list is named, never silently skipped."""

    def note(exc: OSError) -> None:
        reason = "permission denied" if isinstance(exc, PermissionError) else (exc.strerror or str(exc))
        problems.append(Problem(str(exc.filename), f"cannot list folder: {reason}; its files were not read"))

    return note


def _walk(root: Path, problems: list[Problem], notes: list[Problem], digests: Thresholds | None = None,
          tz: str | None = None, base: Path | None = None) -> list[tuple[Path, dict]]:
    """(file, bundle info) for every file below ``root``; bundle files carry their manifest facts.
    Hidden folders below ``root`` are skipped with a note: a ``.node-a.partial-1234`` folder is a
    capture that lost the rename race (or died mid-way) - a duplicate or a fragment of a bundle.
    ``digests`` (the caller's thresholds; None: read no digest): a folder with a current digest
    (:mod:`gpulib.evidence.digest`) is one entry ``(folder, {"digest": loaded})`` in the walk's
    order, instead of its files; its files are made :class:`InputFile` (named from ``base``) as
    soon as it is read, so 10,000 digests' decoded JSON never lives at once."""
    out: list[tuple[Path, dict]] = []
    if root.is_file():
        return [(root, {})]
    #: folder (as os.walk spells it) -> the facts of the nearest bundle at or above it, handed down
    #: the top-down walk (not looked up among each folder's parents: 9,000 folders at 1,024 nodes)
    inherited: dict[str, dict] = {}
    for dirpath, dirnames, filenames in os.walk(root, onerror=_unlistable(problems)):
        here = Path(dirpath)
        info = inherited.pop(dirpath, {})
        if digests and DIGEST in filenames and (loaded := digest.load(here, tz, digests)) is not None:
            loaded.files = [InputFile(display=_display(fields["path"], base or root), root=base or root,
                                      digest_folder=here, **fields) for fields in loaded.files]
            out.append((here, {"digest": loaded}))
            dirnames[:] = []
            continue
        for name in sorted(d for d in dirnames if d.startswith(".")):
            notes.append(Problem(str(here / name), "hidden folder skipped (a '.partial' folder is an unfinished or "
                                                   "duplicate capture); name it explicitly to read it"))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        bundle = MANIFEST in filenames and is_bundle(here)  # a listed name first: no stat per folder
        if bundle:
            try:
                b = Bundle.open(here)
                info = {"host": b.host, "timezone": b.timezone, "boot_time": b.boot_time, "root": here,
                        "captured_at": b.manifest.get("captured_at"),
                        "collectors": {rel: c for c in b.collectors for rel in c.files}}
            except Exception as exc:  # noqa: BLE001 - a broken manifest: still read the raw files
                info = {"problem": str(exc), "root": here}
        for name in dirnames:
            inherited[os.path.join(dirpath, name)] = info
        for name in sorted(filenames):
            if name == MANIFEST and bundle:
                continue
            if name == DIGEST and digest.is_digest(here / name):  # derived from the files, not evidence
                continue
            out.append((here / name, info))
    return out


def _display(path: Path, base: Path) -> str:
    """``path`` as the user would name it: relative to ``base`` when below it (compared by parts:
    ``base in path.parents`` builds a Path per parent, and 10,000 nodes have 90,000 files)."""
    n = len(base.parts)
    return "/".join(path.parts[n:]) if len(path.parts) > n and path.parts[:n] == base.parts else str(path)


def _folder_names(path: Path, root: Path) -> list[str]:
    """The names of ``path``'s folders from its own up to ``root`` (included), nearest first; none
    when ``path`` is not below ``root``."""
    parts, n = path.parts, len(root.parts)
    if len(parts) <= n or parts[:n] != root.parts:
        return []
    return [parts[k] for k in range(len(parts) - 2, n - 1, -1)] + [root.name]


def _read_head(path: Path) -> tuple[bytes, Problem | None]:
    try:
        with open(path, "rb") as handle:
            return handle.read(HEAD_BYTES), None
    except PermissionError:
        return b"", Problem(str(path), "permission denied (run as root or copy the file readable)")
    except OSError as exc:
        return b"", Problem(str(path), f"cannot read: {exc.strerror or exc}")


@lru_cache(maxsize=4096)
def _holds_model_files(folder: Path) -> bool:
    try:
        return any(entry.name.lower().endswith(MODEL_SUFFIXES) for entry in os.scandir(folder))
    except OSError:
        return False


def _may_be_model_state(f: InputFile) -> bool:
    """A collector's output in a bundle is never model state (only its ``checkpoints/`` listing and
    copied ``logs/`` hold the operator's files): no folder listing for the other ~8 files a node."""
    return f.bundle_path is None or f.bundle_path.startswith(("checkpoints/", BUNDLE_COPIES))


def _is_checkpoint(path: Path) -> bool:
    """Model state, or the small metadata beside it (sidecar JSON, ``latest``, ``.tmp`` markers)."""
    name = path.name.lower()
    if name.endswith(MODEL_SUFFIXES):
        return True
    if name.endswith(".log") or not (name == "latest" or name.endswith(METADATA_SUFFIXES) or "." not in name):
        return False
    return _holds_model_files(path.parent) and (name == "latest" or not name.endswith(".txt"))


def _parse(f: InputFile, tz: str | None, year: int | None = None) -> bool:
    """Parse ``f`` with its kind's parser; True when its signature scan was done on the way (a
    parser that streams the file and shares its read feeds the signature scanner too)."""
    spec = registry.BY_KIND[f.kind]
    opts = registry.Options(tz=f.timezone or tz, year=year, boot_time=f.boot_time)
    lines = None
    if f.wrapped or spec.input == "text":
        text, problems = read_text(f.path)
        f.problems.extend(problems)
        if not text:
            return False
        src = registry.Source(str(f.path), f.path, text=unwrap.unwrap(text).text if f.wrapped else text)
    elif spec.input == "bytes":
        src = registry.Source(str(f.path), f.path, data=f.path.read_bytes())
    else:  # the parser streams the file itself: memory flat for multi-GB logs
        if spec.shares_read:
            lines = signatures.SignatureScanner(f.display, tz=opts.tz, year=year, written=f.path,
                                                generic=f.kind in signatures.GENERIC_KINDS)
        src = registry.Source(str(f.path), f.path, readers=(lines,) if lines else ())
    result = spec.parse(src, opts)
    if lines is not None:
        scanned = lines.finish()
        f.signals = scanned.records
        f.problems.extend(scanned.problems)
    f.records = list(result.records)
    f.problems.extend(result.problems)
    if f.kind == kinds.TRAINING_LOG:
        _rank_from_name(f)
    return lines is not None


_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)(?:\D|$)", re.I)
_RANKED_KINDS = {"cuda_oom", "cuda_error", "exception", "traceback", "step", "eval_progress", "device_assert",
                 "dataloader_error", "watchdog_timeout", "watchdog_progress", "watchdog_stuck", "nccl_error",
                 "driver_too_old", "barrier_wait", "barrier_timeout"}


def _rank_from_name(f: InputFile) -> None:
    """Per-rank log files (``rank3.log``, ``train_rank_03.out``): lines that do not say their rank
    belong to the file's rank - unless the content says otherwise. A file whose own lines name
    another rank (``[rank3]:`` in ``train_rank0.log``) or several ranks says the name is no
    evidence: a log copied from another rank, or renamed, must keep its answer."""
    m = _RANK_IN_NAME.search(f.path.name)
    if not m:
        return
    rank = int(m.group(1))
    if {ev.rank for ev in f.records if ev.rank is not None} - {rank}:
        return
    for ev in f.records:
        if ev.rank is None and ev.kind in _RANKED_KINDS:
            ev.rank = rank
            ev.details.setdefault("rank_from", "file name")


def _content_hosts(f: InputFile, head: str) -> None:
    host = detect.host_from_content(head)
    hosts = {host} if host else set()
    for rec in f.records:
        h = getattr(rec, "host", None)
        if isinstance(h, str) and h not in hosts and _HOSTLIKE.match(h):  # each host tested once
            hosts.add(h)
        root = getattr(rec, "details", {}).get("root") if hasattr(rec, "details") else None
        if isinstance(root, dict) and root.get("host"):
            hosts.add(root["host"])
        if isinstance(rec, JobEvent) and rec.folded and rec.kind == "nccl_init":  # the other ranks' hosts
            hosts.update(m["host"] for m in members_of(rec) if isinstance(m["host"], str) and _HOSTLIKE.match(m["host"]))
    hosts.update(s.fields["host"] for s in f.signals if s.fields.get("host"))  # a line that names a node, any kind
    f.content_hosts = frozenset(hosts) if hosts else digest.NO_HOSTS
    if f.host:
        return
    if host:
        f.host, f.host_basis = host, "content"
    elif len(hosts) == 1:  # a job console that names one node only (srun's error, `hostname`): it ran there
        f.host, f.host_basis = next(iter(hosts)), "content"


def _assign_hosts(inputs: Inputs) -> None:
    """Files that do not name their host: a known host in a folder or file name, else the only
    host of the incident, else the nearest folder that looks like a host name."""
    known = inputs.known_hosts
    per_node = _per_node_folders(inputs.files)
    job_nodes = _single_node_jobs(inputs.files)
    for f in inputs.files:
        if not f.host and f.kind == kinds.TRAINING_LOG and f.fallback_host and not f.content_hosts:
            f.host, f.host_basis = f.fallback_host, "bundle"  # a copied job log that names no host
        m = _SLURM_OUTPUT.match(f.path.name) if not f.host and not f.content_hosts else None
        if m and m["job"] in job_nodes:
            f.host, f.host_basis = job_nodes[m["job"]], "scheduler"  # sbatch's slurm-<jobid>.out: where sacct ran it
        if not f.host and f.kind in (kinds.TRAINING_LOG, kinds.TEXT) and not f.content_hosts and f.path.parent in per_node:
            f.host, f.host_basis = f.path.parent.name, "folder"  # one folder per node, this log names none
        if f.host or f.kind in (kinds.CHECKPOINT, kinds.TRAINING_LOG, kinds.TEXT, kinds.DOCUMENTATION):
            continue  # job logs and pasted text come from any node of the job: their lines name it
        folders = _folder_names(f.path, f.root)
        hit = next((name for name in folders if name in known), None)
        if hit:
            f.host, f.host_basis = hit, "folder"
            continue
        hit = next((h for h in sorted(known, key=len, reverse=True) if h in f.path.name), None)
        if hit:
            f.host, f.host_basis = hit, "file name"
            continue
        if f.fallback_host:  # a log copied into a bundle: the capturing node, unless the log names another
            f.host, f.host_basis = f.fallback_host, "bundle"
            continue
        if len(known) == 1:
            f.host, f.host_basis = next(iter(known)), "only host"
            continue
        hit = next((name for name in folders[:-1] if _HOSTLIKE.match(name) and not GENERIC_DIRS.match(name)), None)
        if not hit and folders and _NUMBERED_HOST.match(folders[-1]) and not GENERIC_DIRS.match(folders[-1]):
            hit = folders[-1]
        if hit:
            f.host, f.host_basis = hit, GUESSED_FROM_FOLDER


#: The folder the user passed is named after the incident as often as after a node (``in``,
#: ``paste``, ``bob-logs``): it is taken for a node only when it is numbered as nodes are (``gpu-n07``).
_NUMBERED_HOST = re.compile(r"^[A-Za-z][\w.-]*\d[\w.-]*$")

#: The weakest basis: a folder that merely looks like a host name (the folder the user named the
#: incident after may look like one too); a node the file's own lines state wins over it.
GUESSED_FROM_FOLDER = "host-like folder"

#: sbatch's default output names: ``slurm-<jobid>.out`` and, for an array task, ``slurm-<jobid>_<task>.out``.
_SLURM_OUTPUT = re.compile(r"^slurm-(?P<job>\d+(?:_\d+)?)\.(?:out|err|log|txt)$")


def _single_node_jobs(files: list[InputFile]) -> dict[str, str]:
    """Job id -> node, for the jobs an ``sacct`` listing shows on exactly one node: a job's output file
    does not say where it ran, the scheduler's accounting does (several nodes: no single host)."""
    nodes: dict[str, set[str]] = defaultdict(set)
    for f in files:
        if f.kind == kinds.SACCT:
            for row in f.records:
                nodes[row.job_id].update(row.nodes)
    return {job: next(iter(hosts)) for job, hosts in nodes.items() if len(hosts) == 1}


def _per_node_folders(files: list[InputFile]) -> set[Path]:
    """Folders laid out one per node: two or more sibling folders, each holding files and each
    named like a host (``gb-n04/task-162.log``, ``gb-n11/task-163.log``). A job log in such a folder
    that names no host of its own is that node's."""
    siblings: dict[Path, set[Path]] = defaultdict(set)
    for f in files:
        folder = f.path.parent
        if folder != f.root and _HOSTLIKE.match(folder.name) and not GENERIC_DIRS.match(folder.name):
            siblings[folder.parent].add(folder)
    return {folder for group in siblings.values() if len(group) >= 2 for folder in group}


def gather(paths: list[str | Path], tz: str | None = None, *, full_series: bool = False,
           thresholds: Thresholds | None = None, digests: bool = True) -> Inputs:
    """Walk, detect, parse and locate every file below ``paths``.

    GPU time series are kept as one :class:`~gpulib.parsers.gpu_series.GpuSeries` per GPU and file
    (memory flat in the length of the monitoring logs); ``full_series`` keeps every sample, for
    plotting one evidence folder. A folder with a current per-node digest is read from it (not
    with ``full_series`` or ``digests=False``, which want every record; nor when the digest judged
    its files with other ``thresholds`` than the caller's, default :class:`Thresholds`).
    """
    thresholds = (thresholds or Thresholds()) if digests and not full_series else None
    inputs, year = _gather(paths, tz, full_series=full_series, digests=thresholds)
    _assign_hosts(inputs)
    _read_shared_quiet_files(inputs, tz, year)
    if tz is None:  # a zone given is the operator's word; without one, the evidence may say it
        clock_offset.align(inputs.files)
    return inputs


def gather_node(folder: str | Path, tz: str | None = None) -> tuple[Inputs, int | None]:
    """One node's folder read as :func:`gather` reads it inside a bigger incident, before the
    steps that join nodes (host assignment): what its digest holds. Never reads a digest. Also
    returns the year its year-less kernel-log stamps were read with. Files are named from the
    folder's parent (``node-7/kernel/dmesg.txt``), as in a diagnosis of the incident folder."""
    return _gather([folder], tz, full_series=False, digests=None, base=Path(folder).parent)


def _gather(paths: list[str | Path], tz: str | None, *, full_series: bool, digests: Thresholds | None,
            base: Path | None = None) -> tuple[Inputs, int | None]:
    _holds_model_files.cache_clear()  # folders may have changed since the last diagnosis
    inputs = Inputs()
    redo: list[InputFile] = []  # kernel logs of digests: re-read if the incident's year is not theirs
    for given in paths:
        root = Path(given)
        if not root.exists():
            inputs.problems.append(Problem(str(given), "no such file or folder"))
            continue
        listing_problems = len(inputs.problems)
        named_from = base or (root if root.is_dir() else root.parent)
        files = _walk(root, inputs.problems, inputs.notes, digests, tz, named_from)
        if not files and len(inputs.problems) == listing_problems:
            inputs.problems.append(Problem(str(given), "empty folder: no evidence files in it"))
        processes = fanout.workers(len(files))
        parts = _parts(files, fanout.CHUNK_FILES if processes > 1 else 1)
        read = fanout.ordered_map(partial(_read_files, named_from=named_from, tz=tz, full_series=full_series),
                                  (part for part in parts if not isinstance(part, dict)), processes)
        with Progress(len(files), f"reading {given}", "files", min_total=PROGRESS_MIN_FILES) as bar:
            for part in parts:
                if isinstance(part, dict):  # a node's digest, read here in the walk's order
                    redo += _from_digest(inputs, part.pop("digest"), named_from)
                    bar.update()
                    continue
                _merge(inputs, next(read))
                bar.update(len(part))
    year = _incident_year(inputs) if inputs.deferred or redo else None
    for f in redo:
        if f.digest_year != year:
            f.records, f.signals, f.problems, f.summary, f.summary_only = [], [], [], None, False
            head, _problem = _read_head(f.path)
            inputs.deferred.append((f, head.decode("utf-8", "replace")))
    for f, head in inputs.deferred:
        _parse_safely(f, tz, head, year)
    inputs.deferred.clear()
    return inputs, year


def _parts(files: list[tuple[Path, dict]], size: int) -> list[list[tuple[Path, dict]] | dict]:
    """The walk's entries in its order: each digest alone (its info), the files between digests in
    chunks of ``size`` (what one worker process reads at a time, :mod:`gpulib.evidence.fanout`)."""
    parts: list = []
    run: list[tuple[Path, dict]] = []
    for path, info in files:
        if "digest" in info:
            parts += fanout.chunked(run, size)
            parts.append(info)
            run = []
        else:
            run.append((path, info))
    return parts + fanout.chunked(run, size)


def _read_files(entries: list[tuple[Path, dict]], *, named_from: Path, tz: str | None, full_series: bool) -> Inputs:
    """Detect, parse and place each file of ``entries`` (the walk's, none a digest): what it adds
    to the evidence (its files, checkpoint folders, kernel logs left for later), in a fresh
    :class:`Inputs` that :func:`_merge` adds to the incident's - the same in a worker process."""
    got = Inputs()
    for path, info in entries:
        f = InputFile(path=path, display=_display(path, named_from), root=named_from, timezone=info.get("timezone"),
                      boot_time=info.get("boot_time"), captured_at=info.get("captured_at"))
        if "root" in info:
            _place_in_bundle(f, info)
        got.files.append(f)
        first = len(got.files) - 1
        _examine(f, tz, got)
        if not full_series:
            for g in got.files[first:]:  # the file and its pasted sessions' outputs
                _reduce_series(g)
    return got


def _merge(inputs: Inputs, got: Inputs) -> None:
    """Add what :func:`_read_files` read to ``inputs``, as if it had been read into it directly."""
    inputs.files += got.files
    inputs.checkpoint_dirs += [d for d in dict.fromkeys(got.checkpoint_dirs) if d not in inputs.checkpoint_dirs]
    inputs.deferred += got.deferred


def _from_digest(inputs: Inputs, node, base: Path) -> list[InputFile]:
    """Add a loaded digest's files to ``inputs``; returns its kernel logs (read with the node's year)."""
    kernel_logs = []
    for f in node.files:  # made by _walk
        inputs.files.append(f)
        if f.kind == kinds.KERNEL_LOG:
            f.digest_year = node.year
            kernel_logs.append(f)
    inputs.problems += node.problems
    inputs.notes += node.notes
    inputs.checkpoint_dirs += [(base, d) for d in node.checkpoint_dirs if (base, d) not in inputs.checkpoint_dirs]
    return kernel_logs


def _read_shared_quiet_files(inputs: Inputs, tz: str | None, year: int | None) -> None:
    """Parse the raw files of the quiet files a digest summarised where its promise does not hold.

    A node's digest leaves behind the records of a file no rule of that node made anything of
    (:mod:`gpulib.diagnose.node_digest`), which is the whole story only while nothing outside the
    node is read together with them: the rules join kernel events and GPU records by host
    (:data:`~gpulib.evidence.record_summary.JOINED_BY_HOST`). Where a file outside the node names
    the same host in the same family - two captures of one node, a cluster-wide syslog, a
    dcgm-exporter scrape - that node's quiet files are parsed from their raw files after all."""
    if not any(f.summary_only for f in inputs.files):
        return
    nodes: dict[tuple[str, str | None], set] = defaultdict(set)  # (family, host) -> folders whose files name it
    for family, members in JOINED_BY_HOST.items():
        for f in inputs.of_kind(*members):
            for host in {f.host, *summary_of(f).hosts}:
                nodes[(family, host)].add(f.digest_folder)
    shared = {folder for folders in nodes.values() if len(folders) > 1 for folder in folders}
    for f in inputs.files:
        if f.summary_only and f.digest_folder in shared:
            f.records, f.signals, f.problems, f.summary, f.summary_only = [], [], [], None, False
            head, _problem = _read_head(f.path)
            _parse_safely(f, tz, head.decode("utf-8", "replace"), year if f.kind == kinds.KERNEL_LOG else None)
            _reduce_series(f)


def _reduce_series(f: InputFile) -> None:
    """A time series' samples -> one summary per GPU. GPUs whose samples carry no throttle reasons
    (``nvidia-smi dmon``) keep their samples: they are judged against their peers at each moment."""
    if f.kind not in SERIES_KINDS:
        return
    samples = [r for r in f.records if isinstance(r, GpuSample)]
    if not samples:
        return
    series = gpu_series.summarize(samples)
    blind = {(s.host, s.pci_bus_id or s.index) for s in series if not s.reasons_reported}
    f.records = [r for r in f.records if not isinstance(r, GpuSample)] + \
        [s for s in series if s.reasons_reported] + [r for r in samples if (r.host, r.pci_bus_id or r.index) in blind]


def _place_in_bundle(f: InputFile, info: dict) -> None:
    """What the bundle says about one of its files: its path inside the bundle, the collector that
    wrote it, and its host - except for copied logs, which may come from any node of the job."""
    f.bundle_path = "/".join(f.path.parts[len(info["root"].parts):])  # the walk found it below the bundle's root
    record = info.get("collectors", {}).get(f.bundle_path)
    if record is not None:
        f.collector = {"name": record.name, "status": record.status, "reason": record.reason}
    if f.bundle_path.startswith(BUNDLE_COPIES):
        f.fallback_host = info.get("host")
    elif info.get("host"):
        f.host, f.host_basis = info["host"], "bundle"


def _bundle_bookkeeping(f: InputFile) -> bool:
    """Bundle files that are not evidence to parse: metadata, version files (read by
    :mod:`gpulib.diagnose.node_facts`), a collector's stderr. True when ``f`` is one (and is settled)."""
    rel = f.bundle_path
    if rel is None:
        return False
    if rel in BUNDLE_METADATA:
        f.kind = kinds.BUNDLE_METADATA
    elif rel.startswith("versions/"):
        f.kind = kinds.VERSIONS
    elif rel.endswith(".stderr") and not rel.startswith(BUNDLE_COPIES):
        f.kind = kinds.COLLECTOR_STDERR
        c = f.collector
        if c and c["status"] not in ("ok", "unavailable"):
            f.problems.append(Problem(str(f.path), f"collector {c['name']} {c['status']}: "
                                                   f"{c['reason'] or 'see this file'}"))
    else:
        return False
    return True


def _examine(f: InputFile, tz: str | None, inputs: Inputs) -> None:
    try:
        status = f.path.stat()
    except OSError as exc:
        f.kind = kinds.UNREADABLE
        f.problems.append(Problem(str(f.path), "broken symbolic link" if f.path.is_symlink() else
                                  f"cannot stat: {exc.strerror or exc}"))
        return
    if not stat.S_ISREG(status.st_mode):  # a FIFO or device would block or never end
        f.kind = kinds.UNREADABLE
        f.problems.append(Problem(str(f.path), "not a regular file (pipe, socket or device): skipped"))
        return
    if _bundle_bookkeeping(f):
        return
    if _may_be_model_state(f) and _is_checkpoint(f.path):
        f.kind = kinds.CHECKPOINT
        folder = f.path.parent
        if (f.root, folder) not in inputs.checkpoint_dirs:
            inputs.checkpoint_dirs.append((f.root, folder))
        return
    head_bytes, problem = _read_head(f.path)
    if problem:
        f.kind = kinds.UNREADABLE
        f.problems.append(problem)
        return
    if not head_bytes.strip():
        f.kind = kinds.EMPTY
        f.problems.append(Problem(str(f.path), "empty file"))
        return
    binary = looks_binary(head_bytes)
    head = "" if binary else head_bytes.decode("utf-8", "replace")
    kind = BUNDLE_KINDS.get(f.bundle_path or "") or detect.detect_kind(f.display, head, head_bytes)
    body = head  # what the file says, without a paste's wrapping
    if not binary and f.bundle_path is None:
        bare = unwrap.unwrap(head)
        body = bare.text
        if bare.changed:  # a pasted table or log: its layout is under the wrapping
            inner = detect.detect_kind(f.display, bare.text, head_bytes)
            if inner is not None and status.st_size <= UNWRAP_MAX_BYTES:
                kind, f.wrapped = inner, True
                f.host = f.host or bare.host
                f.host_basis = f.host_basis or ("content" if bare.host else None)
        if bare.commands and status.st_size <= UNWRAP_MAX_BYTES and not README_NAME.search(f.path.name):
            kind = _session_log_kind(kind, head)
            inputs.files += _session_outputs(f, kind, tz)
    if kind is None and README_NAME.search(f.path.name) and not binary:
        f.kind = kinds.DOCUMENTATION
        return
    if kind is None and not binary:
        documented = DOC_NAME.search(f.path.name) and DOC_STRUCTURE.search(body)
        f.kind = kinds.DOCUMENTATION if documented else kinds.TEXT  # no structure known: lines only
        _scan(f, tz)
        _content_hosts(f, head)
        return
    if kind is None:
        f.kind = kinds.UNKNOWN
        what = "binary data, not a log or tool output"
        if f.collector:
            what += f"; written by collector {f.collector['name']} ({f.collector['status']})"
        f.problems.append(Problem(str(f.path), what))
        return
    f.kind = kind
    if kind == kinds.KERNEL_LOG:  # parsed last: syslog stamps carry no year, the other files tell it
        inputs.deferred.append((f, head))
        return
    _parse_safely(f, tz, head)


#: Kinds that read any log: a session's output of these kinds is read with the whole file, not again.
CATCH_ALL_KINDS = (kinds.TRAINING_LOG, kinds.KERNEL_LOG)


def _session_log_kind(kind: str | None, head: str) -> str | None:
    """The kind a session file is read as whole. A file that starts with a table read by structure
    alone (three rows of ``nvidia-smi --query-gpu``) but goes on, after a later prompt, with a job
    log or lines no parser knows (two files pasted as one) is read as that log, or as plain text
    (None): every line of it is then scanned, and the table is one of its outputs. So is one tool's
    output on several hosts (``ip -br addr`` here, then ``ssh node-2 ip -br addr``): read whole, every
    record would be the first prompt's host's; read as text, each output is its own host's input."""
    if kind in CATCH_ALL_KINDS:
        return kind
    if kind not in STRUCTURED_ONLY:
        one_tool = set(session.output_kinds(head)) == {kind}
        return None if one_tool and len(session.output_hosts(head)) > 1 else kind
    held = session.output_kinds(head)
    if any(k is None for k in held) and not any(k in CATCH_ALL_KINDS for k in held):
        return None
    return next((k for k in held if k in CATCH_ALL_KINDS), kind)


def _session_outputs(f: InputFile, kind: str | None, tz: str | None) -> list[InputFile]:
    """A pasted shell session holds several commands' outputs (:mod:`gpulib.parsers.session`):
    each tool output after a later prompt is also an input of its own kind, cited with the file's
    name and line numbers (its lines are scanned once, with the whole file)."""
    text, _problems = read_text(f.path)
    opts = registry.Options(tz=f.timezone or tz)
    return [InputFile(path=f.path, display=f.display, root=f.root, kind=out.kind, host=out.host,
                      host_basis="content" if out.host else None, timezone=f.timezone, wrapped=True,
                      records=list(out.result.records), problems=list(out.result.problems))
            for out in session.outputs(text, str(f.path), opts, skip=(kind, *CATCH_ALL_KINDS))]


def _parse_safely(f: InputFile, tz: str | None, head: str, year: int | None = None) -> None:
    scanned = False
    try:
        scanned = _parse(f, tz, year)
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the diagnosis
        log.warning("%s: parser %s failed: %s", f.path, f.kind, exc)
        f.problems.append(Problem(str(f.path), f"{f.kind} parser failed: {type(exc).__name__}: {exc}"))
    if f.kind not in STRUCTURED_ONLY and not scanned:
        _scan(f, tz, year)
    _content_hosts(f, head)


#: Kinds whose every value is a field of a table the kind parser reads completely (GPU samples,
#: snapshots): a line scan would only find the same facts without their structure.
STRUCTURED_ONLY = frozenset({kinds.NVML_SNAPSHOT, kinds.NVML_SAMPLES, kinds.NVIDIA_SMI_XML, kinds.NVIDIA_SMI_CSV,
                             kinds.NVIDIA_SMI_DMON, kinds.FLIGHT_RECORDER, kinds.DCGM_EXPORTER})


def _scan(f: InputFile, tz: str | None, year: int | None = None) -> None:
    """Every line through the signature catalogue, whatever the file's kind (never raises)."""
    try:
        result = signatures.scan_file(f.path, f.display, tz=f.timezone or tz, year=year,
                                      generic=f.kind in signatures.GENERIC_KINDS)
    except Exception as exc:  # noqa: BLE001 - a scanner bug must cost this file's signals, not the diagnosis
        log.warning("%s: signature scan failed: %s", f.path, exc)
        f.problems.append(Problem(str(f.path), f"signature scan failed: {type(exc).__name__}: {exc}"))
        return
    f.signals = result.records
    f.problems.extend(result.problems)


def _incident_year(inputs: Inputs) -> int | None:
    """The year most stamps of the job logs and snapshots carry (for year-less syslog lines). The
    kernel logs are what the year is for: they do not vote (the raw ones are not parsed yet)."""
    years: Counter = Counter()
    for f in inputs.files:
        if f.kind != kinds.KERNEL_LOG:
            years.update(f.summary.years if f.summary is not None else count_years(f.records))
    return years.most_common(1)[0][0] if years else None
