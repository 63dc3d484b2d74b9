"""Evidence read once: :class:`Evidence` for every face, and the runbook run's JSON cache of it.

:class:`Evidence` is how the CLI, the runbook report, the notebooks and the Slurm health check
open evidence: read and parsed at most once per process, re-judged (not re-read) when a threshold
changes. It lives here, above the rules, because judging is the rules' work (layers point down).

Why a cache as well: every step of the incident runbook analyses the *same* evidence in its own kernel. Without
a cache each kernel imports every parser and the diagnosis rules, walks the folder, parses each
file and diagnoses the incident again: eight times the same work on the cores the kernels share.
``gpulib run`` therefore reads the evidence once (:func:`write_cache`) and names the file in the
kernels' environment (:data:`gpulib.kernel_env.EVIDENCE_CACHE`); :func:`gpulib.notebook.tables.open_evidence` uses it only when
it describes the very path the notebook opens **and** the files there are unchanged (same names,
sizes and modification times, :func:`fingerprint`); otherwise it reads the evidence itself.

The cache is JSON (records as the dicts of their dataclasses), never pickle: a notebook must not
run code from a file it is handed. It lives in the run's scratch folder and is not archived.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpulib import kernel_env, resources
from gpulib.diagnose import diagnose
from gpulib.diagnose.report import Diagnosis
from gpulib.errors import InputError
from gpulib.evidence import kinds
from gpulib.evidence.gather import Inputs, gather
from gpulib.evidence.thresholds import Thresholds
from gpulib.logs import get_logger

log = get_logger(__name__)

FORMAT = "gpulib.bundle-cache/1"
#: The files that hold GPU state snapshots (one record per GPU per snapshot).
SNAPSHOT_KINDS = (*kinds.SMI_SNAPSHOTS, kinds.NVIDIA_SMI_CSV)  # a CSV query's one-row-per-GPU rows are states too


@dataclass
class EvidenceFile:
    """One file of the evidence as the notebooks use it: records as plain dicts."""

    path: Path
    display: str
    kind: str
    host: str | None
    host_basis: str | None
    records: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    facts: list | None = None  # read from the raw text when the fleet view asks (node_facts.text_facts)

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "facts"} | {"path": str(self.path)}


@dataclass
class EvidenceFiles:
    """Every file of one evidence path, and the checkpoint folders found in it."""

    files: list[EvidenceFile] = field(default_factory=list)
    checkpoint_dirs: list[Path] = field(default_factory=list)

    def of_kind(self, *kinds: str) -> list[EvidenceFile]:
        return [f for f in self.files if f.kind in kinds]

    def snapshots(self) -> list[dict]:
        """The GPU state records of every snapshot file (one per GPU per snapshot; a CSV sampling's
        rows are samples, not snapshots: only records with ``lost`` are states), ``host`` filled
        from the file where the record has none."""
        return [{**record, "host": record.get("host") or f.host} for f in self.of_kind(*SNAPSHOT_KINDS)
                for record in f.records if "lost" in record]


def resolve_evidence(evidence: str | Path, cwd: Path | None = None) -> Path:
    """Find the evidence path, trying it as given (relative to ``cwd``, default the current
    directory), then relative to the shipped folders and ``notebooks/`` (:func:`gpulib.resources.data_root`:
    a notebook's default ``examples/...`` evidence works in a checkout and from the wheel)."""
    text = str(evidence).strip()
    if not text:
        raise InputError("no evidence given",
                         hint="set the `evidence` parameter to an evidence bundle, an incident folder or a log file")
    given = Path(text).expanduser()
    root = resources.data_root()
    tried = [given] if given.is_absolute() else [(cwd or Path.cwd()) / given, root / given,
                                                   root / resources.NOTEBOOKS / given]
    for candidate in tried:
        if candidate.exists():
            return candidate.resolve()
    raise InputError("evidence path not found", path=text,
                     hint="looked in " + ", ".join(str(t.parent) for t in tried)
                     + "; give the path of an evidence bundle (gpulib collect), an incident folder or a log file")


def checked_evidence(evidence: str | Path) -> Path:
    """:func:`resolve_evidence`, then refuse an unreadable or empty folder with what to do (never a
    traceback for a typo or an empty folder, never an empty - healthy-looking - diagnosis)."""
    path = resolve_evidence(evidence)
    if path.is_dir():
        def refuse(exc: OSError) -> None:
            raise exc

        try:
            files = [name for _, _, names in os.walk(path, onerror=refuse) for name in names]
        except PermissionError as exc:
            raise InputError("cannot list the evidence folder", path=str(path),
                             hint=f"permission denied on {exc.filename}; run as a user who can read it") from None
        if not files:
            raise InputError("the evidence folder is empty", path=str(path),
                             hint="collect first (gpulib collect --out DIR) or copy the logs into it")
    return path


class Evidence:
    """The evidence of one incident, opened the same way by every face: ``gpulib diagnose``, the
    runbook report, the notebooks and the Slurm health check.

    Why one object: reading is the expensive part (walk, detect, parse every file) and judging is
    cheap (the rules over the parsed :class:`~gpulib.evidence.gather.Inputs`). An :class:`Evidence`
    reads its paths at most once per process and keeps what it read, so a notebook slider
    (``temp_limit_c=80``) re-runs the rules (:meth:`judge`) without opening a file again. Under
    ``gpulib run`` the run's JSON cache (:func:`load_cached`) stands in for the first reading: the
    files and the default diagnosis come from it, and only a slider's other thresholds read the
    evidence (once).

    ``paths``: one path (bundle, folder or file) or several (the CLI). ``tz``: the zone of
    timestamps printed without one (``gpulib diagnose --tz``). ``thresholds``: those
    :attr:`diagnosis` judges with (default: the runbook's). ``full_series``: keep every sample (the
    notebooks plot them); without it a node's current digest stands for its files (memory flat in
    the length of the monitoring logs: the CLI), which judged them with given thresholds, so other
    thresholds read the evidence again.
    """

    def __init__(self, paths: str | Path | Sequence[str | Path], tz: str | None = None,
                 thresholds: Thresholds | None = None, *, full_series: bool = True,
                 cache: str | Path | None = None):
        self.paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
        self.tz = tz
        self.thresholds = thresholds or Thresholds()
        self.full_series = full_series
        self._inputs: Inputs | None = None
        self._inputs_judged_at: Thresholds | None = None  # a lean reading's digests were judged with these
        self._files: EvidenceFiles | None = None
        self._judged: dict[Thresholds, dict] = {}
        self._cache = cache  # the run's cache file; default the one gpulib run names (load_cached)
        self._cache_tried: bool | None = None  # None: not looked yet; else whether the run's cache served

    @classmethod
    def open(cls, evidence: str | Path, tz: str | None = None, thresholds: Thresholds | None = None) -> Evidence:
        """One evidence path as a notebook or a health check names it (:func:`checked_evidence`:
        never a traceback for a typo or an empty folder)."""
        return cls(checked_evidence(evidence), tz, thresholds)

    @property
    def files(self) -> EvidenceFiles:
        """Every file walked, detected, parsed (records as dicts) and assigned a host."""
        if self._files is None and not self._from_cache():
            inputs = self.inputs()
            self._files = EvidenceFiles(
                [EvidenceFile(f.path, f.display, f.kind, f.host, f.host_basis, [asdict(r) for r in f.records],
                              [p.message for p in f.problems]) for f in inputs.files],
                list(dict.fromkeys(folder for _root, folder in inputs.checkpoint_dirs)))
        return self._files

    @property
    def diagnosis(self) -> dict:
        """The ``gpulib.diagnosis/1`` dict judged with :attr:`thresholds`."""
        return self.judge(self.thresholds)

    def judge(self, thresholds: Thresholds | None = None) -> dict:
        """The ``gpulib.diagnosis/1`` dict judged with ``thresholds`` (default :attr:`thresholds`):
        the rules run again over what was read, never the files read again (asked once per
        thresholds)."""
        wanted = thresholds or self.thresholds
        if wanted not in self._judged and not (wanted == Thresholds() and self._from_cache()):
            self._judged[wanted] = self.diagnose(wanted).to_dict()
        return self._judged[wanted]

    def diagnose(self, thresholds: Thresholds | None = None) -> Diagnosis:
        """The :class:`~gpulib.diagnose.report.Diagnosis` judged with ``thresholds`` (the CLI's text
        and JSON), over the evidence read once."""
        wanted = thresholds or self.thresholds
        return diagnose(self.paths, self.tz, inputs=self.inputs(wanted), thresholds=wanted)

    def inputs(self, thresholds: Thresholds | None = None) -> Inputs:
        """What :func:`~gpulib.evidence.gather.gather` read, once: again only for a lean reading
        (``full_series=False``) asked for other thresholds than its digests were judged with."""
        judged_at = None if self.full_series else (thresholds or self.thresholds)
        if self._inputs is None or judged_at != self._inputs_judged_at:
            self._inputs = gather(self.paths, self.tz, full_series=self.full_series, thresholds=judged_at)
            self._inputs_judged_at = judged_at
        return self._inputs

    def _from_cache(self) -> bool:
        """Take the files and the default diagnosis from the run's cache when it describes this
        one path as it is now (:func:`load_cached`); False when there is none to take."""
        if self._cache_tried is None:
            cached = load_cached(self.paths[0], self._cache, self.tz) if len(self.paths) == 1 and self.full_series else None
            if cached is not None:
                self._files, self._judged[Thresholds()] = cached
            self._cache_tried = cached is not None
        return self._cache_tried


def fingerprint(path: Path) -> list[list]:
    """``[relative path, bytes, mtime_ns]`` of every file under ``path`` (or of ``path`` itself)."""
    if path.is_file():
        st = path.stat()
        return [[path.name, st.st_size, st.st_mtime_ns]]
    out = []
    for folder, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = Path(folder, name)
            try:
                st = full.stat()
            except OSError:
                out.append([full.relative_to(path).as_posix(), None, None])
                continue
            out.append([full.relative_to(path).as_posix(), st.st_size, st.st_mtime_ns])
    return out


def write_cache(paths: list[Path], out: Path, tz: str | None = None) -> Path:
    """Read each evidence path once (with ``tz``) and write them all to ``out`` (JSON); returns ``out``."""
    entries = []
    for path in dict.fromkeys(p.resolve() for p in paths):
        stamp = fingerprint(path)  # before reading: a file changed meanwhile invalidates the entry
        evidence = Evidence(path, tz)
        files, diagnosis = evidence.files, evidence.diagnosis
        entries.append({"path": str(path), "tz": tz, "fingerprint": stamp, "diagnosis": diagnosis,
                        "files": [f.to_json() for f in files.files],
                        "checkpoint_dirs": [str(d) for d in files.checkpoint_dirs]})
    out.write_text(json.dumps({"format": FORMAT, "entries": entries}), encoding="utf-8")
    return out


def load_cached(path: Path, cache: str | Path | None = None, tz: str | None = None) -> tuple[EvidenceFiles, dict] | None:
    """The cached files and diagnosis of ``path`` from ``cache`` (default: the one ``gpulib run`` names),
    or None when there is no cache, it is unreadable, or it does not match ``path`` as it is now
    read with ``tz`` (times placed in another zone are other times)."""
    cache = cache or os.environ.get(kernel_env.EVIDENCE_CACHE)
    if not cache:
        return None
    try:
        data = json.loads(Path(cache).read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}")
        entry = next((e for e in data["entries"] if e["path"] == str(path) and e.get("tz") == tz), None)
        if entry is None or entry["fingerprint"] != fingerprint(path):
            log.debug("evidence cache %s does not describe %s as it is now", cache, path)
            return None
        files = EvidenceFiles([EvidenceFile(**{**f, "path": Path(f["path"])}) for f in entry["files"]],
                              [Path(d) for d in entry["checkpoint_dirs"]])
        return files, entry["diagnosis"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("evidence cache %s unusable (%s); reading the evidence instead", cache, exc)
        return None
