"""Every line of every readable text file through the signature catalogue.

The kind of a file (kernel log, job console, nvidia-smi output) decides which parser adds
*structure*; it must never decide whether a line is *read*. An Xid pasted into an issue comment,
an OOM in ``job-error.txt`` and a BMC event in ``notes.md`` are evidence like any other. This
scanner reads a file as bytes in chunks (:mod:`gpulib.parsers.linescan`: a job log's read is shared
with the job parser), keeps only the lines holding one of the catalogue's keywords
(:mod:`gpulib.parsers.prefilter`, at memory speed), peels their wrapping off
(:mod:`gpulib.parsers.line_identity`) and matches the catalogue's patterns on what is left.

Shell prompt lines (``root@node1:~# dmesg -T | grep -i xid``) are read for the host of the pasted
session and never matched: a ``grep 'fallen off the bus'`` is a question, not an answer.

The same pass reads the logs of processes for the *generic failure vocabulary* (the catalogue's
``failure`` rows: ERROR, a Traceback, "failed", a non-zero exit...), only where no other row read
the line; those lines say something went wrong without saying what, and feed an ``unknown`` rather
than a silent "none" (:mod:`gpulib.diagnose.generic`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from pathlib import Path

from gpulib.catalog.signatures import Signature, load_signatures
from gpulib.identity import normalize_pci
from gpulib.parsers import linescan
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.fold import Folder
from gpulib.parsers.line_identity import LineFacts, LineReader, names_a_port
from gpulib.parsers.logtime import modified_year, year_hint, zone_of
from gpulib.parsers.prefilter import KeywordLines

KIND = "signatures"
MAX_LINE_CHARS = 16 * 1024
#: Markers of a shell prompt: the line that names the host of a pasted session.
PROMPT_KEYWORDS = ("@",)
#: Rank, local rank and host that a file's path says (``rank-5.log``, ``attempt_0/3/stderr.log``,
#: ``nccl.node7.1234.log``): lines that do not say theirs belong to the file's.
_RANK_IN_PATH = re.compile(r"(?:^|[^a-z])rank[_-]?(?P<rank>\d+)(?:\D|$)", re.I)
_ELASTIC_LOCAL = re.compile(r"attempt_\d+/(?P<lrank>\d+)/(?:stderr|stdout|error)\.(?:log|json)$")
_NCCL_DEBUG_FILE = re.compile(r"nccl\.(?P<host>[A-Za-z][\w-]*(?:\.[\w-]+)*?)\.(?P<pid>\d+)(?:\.\w+)?$")


@dataclass(slots=True)  # a 10,000-node job console holds ~160,000 matches
class Signal:
    """One line that matched a catalogue signature, with who printed it and when."""

    signature: str
    line: int
    text: str
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    pid: int | None = None
    gpu_index: int | None = None
    gpu_pci: str | None = None
    time_utc: str | None = None
    fields: dict = field(default_factory=dict)
    #: ``(rank, pid, host)`` of the lines of the same shape folded into this one, and their latest
    #: time (:mod:`gpulib.parsers.fold`; read with :func:`printers_of`)
    folded: list | None = None
    time_last: str | None = None


#: Fields of a match that say who printed the line, not what it says: not part of its fold shape.
#: A line's host and GPU are (a GPU's faults are grouped per host and GPU), except for an identity
#: line, whose whole point is who printed it (NCCL's init line: rank, pid, host, device).
_PRINTER_FIELDS = frozenset({"rank", "rank2", "pid"})
_IDENTITY_PRINTER_FIELDS = _PRINTER_FIELDS | {"gpu", "gpu2", "local"}


@lru_cache(maxsize=1)
def _identity_signatures() -> frozenset[str]:
    return frozenset(sig.id for sig in load_signatures() if sig.role == "identity")


@lru_cache(maxsize=1)
def _setting_positions() -> frozenset[int]:
    return frozenset(i for i, sig in enumerate(load_signatures()) if sig.role == SETTING)


def _settings(candidates: set[int] | None) -> set[int]:
    """Of the rows a line's keywords name (every row when the prefilter did not say), the settings."""
    return set(_setting_positions()) if candidates is None else candidates & _setting_positions()


@lru_cache(maxsize=1)
def generic_signatures() -> frozenset[str]:
    """The ids of the generic failure vocabulary's rows (role ``failure``)."""
    return frozenset(sig.id for sig in load_signatures() if sig.role == GENERIC)


#: Generic failure lines kept per file: the first and the last this many of distinct shape. A log
#: that prints an ERROR for every bad sample must not hold a million signals; what an engineer reads
#: first is where the failures began and what was printed just before the log stopped.
GENERIC_KEEP = 200


def _fold_shape(s: Signal) -> tuple:
    if s.signature in _identity_signatures():
        return (s.signature, s.time_utc is None,
                tuple([kv for kv in s.fields.items() if kv[0] not in _IDENTITY_PRINTER_FIELDS]))
    return (s.signature, s.host, s.local_rank, s.gpu_index, s.gpu_pci, s.time_utc is None,
            tuple([kv for kv in s.fields.items() if kv[0] not in _PRINTER_FIELDS]))


def _fold_member(s: Signal) -> tuple:
    return s.rank, s.pid, s.host


def printers_of(s: Signal) -> Iterator[tuple[int | None, int | None, str | None]]:
    """``(rank, pid, host)`` of every line ``s`` stands for: its own, and those folded into it."""
    return chain(((s.rank, s.pid, s.host),), s.folded or ())


@dataclass(frozen=True)
class PathFacts:
    """What a file's path says about every line in it."""

    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None

    @classmethod
    def of(cls, path: str) -> PathFacts:
        posix = path.replace("\\", "/")
        name = posix.rsplit("/", 1)[-1]
        m = _NCCL_DEBUG_FILE.search(name)
        host, pid = (m["host"], int(m["pid"])) if m else (None, None)
        m = _ELASTIC_LOCAL.search(posix)
        lrank = int(m["lrank"]) if m else None
        m = _RANK_IN_PATH.search(name)
        return cls(rank=int(m["rank"]) if m else None, local_rank=lrank, host=host, pid=pid)


@lru_cache(maxsize=2)
def _keywords(generic: bool = True) -> tuple[bytes, ...]:
    words = {k for sig in load_signatures() if generic or sig.role != GENERIC for k in sig.keywords}
    return tuple(sorted(w.encode() for w in words | set(PROMPT_KEYWORDS)))


def _number(text: str | None) -> float | None:
    try:
        return float(text.replace(",", "")) if text else None
    except ValueError:
        return None


@lru_cache(maxsize=1)
def _keyword_index() -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Each keyword with the catalogue positions of the signatures that name it: a line is tested
    against the signatures of the keywords it holds, not against all ~70 (one flat pass of
    substring tests, ~6 us a line instead of ~35: a 1,024-node incident has ~80,000 such lines)."""
    owners: dict[str, list[int]] = {}
    for i, sig in enumerate(load_signatures()):
        for k in sig.keywords:
            owners.setdefault(k, []).append(i)
    return tuple((k, tuple(v)) for k, v in owners.items())


def match_line(facts: LineFacts, lineno: int, raw: str, path: PathFacts) -> list[Signal]:
    """The signatures one (unwrapped) line matches; at most one per signature, in catalogue order."""
    return [_signal(sig, fields, facts, lineno, raw, path) for sig, fields in _matches(facts, raw)]


@lru_cache(maxsize=4)
def _owners(keywords: tuple[bytes, ...]) -> tuple[tuple[int, ...], ...]:
    """For each of ``keywords`` (a prefilter's, by position), the catalogue positions of the
    signatures that name it (none for the prompt marker)."""
    owners = dict(_keyword_index())
    return tuple(owners.get(k.decode(), ()) for k in keywords)


def _matches(facts: LineFacts, raw: str, candidates: set[int] | None = None) -> list[tuple[Signature, dict]]:
    """The signatures ``raw`` (read as ``facts``) matches, with their named fields. ``candidates``:
    the signatures owning a keyword ``raw`` holds, when the prefilter already said which."""
    out = []
    message = facts.message
    catalogue = load_signatures()
    if candidates is None:
        candidates = {i for k, owners in _keyword_index() if k in raw for i in owners}
    for i in sorted(candidates):
        sig = catalogue[i]
        m = sig.pattern.search(message)
        if not m:
            continue
        fields = {k: v for k, v in m.groupdict().items() if v}
        if sig.min_value is not None and (_number(fields.get("num")) or 0) < sig.min_value:
            continue
        out.append((sig, fields))
    return _one_reading(out, message) if len(out) > 1 or (out and out[0][0].role == GENERIC) else out


#: Roles of rows that state a fact about the job (who printed a line, what a command set), never that
#: anything went wrong: a line they read may still carry the generic failure vocabulary.
FACT_ROLES = ("identity", "setting")
#: The role of the rows a shell prompt line is read by: what the user typed sets the job's environment
#: (``NCCL_SOCKET_IFNAME=eth0 torchrun ...``, ``mpirun -x NCCL_SOCKET_IFNAME=ib0``); every other row is
#: a question on a prompt line (a ``grep 'fallen off the bus'``), never an answer.
SETTING = "setting"
#: The role of the generic failure vocabulary (``signatures.tsv``): lines that say something failed
#: without saying what.
GENERIC = "failure"
#: File kinds whose lines are what a process printed, read for the generic vocabulary too: the other
#: kinds (a kernel log, nvidia-smi, a BMC table) have rules that judge every line they hold.
GENERIC_KINDS = ("training_log", "text")
_DIGITS = re.compile(r"\d+")
#: NCCL's own log level INFO: what NCCL tried and chose (``Failed to open libibverbs.so``, ``No plugin
#: found``, then the fallback it took), never a failure by itself; only its WARN lines say one.
_NCCL_INFO = re.compile(r"\bNCCL INFO\b")
#: NCCL's ``host:pid:tid [dev] `` before its message: who printed it, not what it says.
_PRINTER = re.compile(r"^[\w.-]+:\d+:\d+ \[\d+\] ")


def _one_reading(out: list[tuple[Signature, dict]], message: str) -> list[tuple[Signature, dict]]:
    """A line that a signature reads needs no generic reading (the watchdog line of 80,000 ranks stays
    one signal a line); of several generic readings the first, most severe, row's. A generic match
    carries the line's *shape* (its message with numbers blanked): lines of one shape fold into one
    signal, and how many there were says how rare the line is in its file."""
    specific = [(sig, f) for sig, f in out if sig.role != GENERIC]
    if any(sig.role not in FACT_ROLES for sig, _f in specific):
        return specific
    generic = next(((sig, f) for sig, f in out if sig.role == GENERIC), None)
    if generic is None or _NCCL_INFO.search(message):
        return specific
    generic[1]["shape"] = _DIGITS.sub("#", _PRINTER.sub("", message.strip()))[:160]
    return [*specific, generic]


#: Lines up to this long are remembered with what they matched (per reading context: year, time
#: zone, host of a pasted shell session): a repeated line (the ``Slowdown : Not Active`` rows of
#: every GPU of every node's ``nvidia-smi -q``) is read and matched once per process.
_MEMO_LINE_CHARS = 512
_MEMO_LINES = 4096
_MEMO: dict[tuple, tuple[LineFacts, list[tuple[Signature, dict]]]] = {}


def _signal(sig: Signature, fields: dict, facts: LineFacts, lineno: int, raw: str, path: PathFacts) -> Signal:
    named = fields.get("rank") or fields.get("rank2")
    rank = int(named) if named else facts.rank if facts.rank is not None else path.rank
    local = int(fields["local"]) if "local" in fields else \
        facts.local_rank if facts.local_rank is not None else path.local_rank
    gpu = fields.get("gpu") or fields.get("gpu2")
    pci = normalize_pci(fields["pci"]) if "pci" in fields and not names_a_port(raw, fields["pci"]) else facts.pci
    return Signal(sig.id, lineno, raw.strip()[:500], host=fields.get("host") or facts.host or path.host, rank=rank,
                  local_rank=local,
                  pid=int(fields["pid"]) if fields.get("pid") else facts.pid or path.pid,
                  gpu_index=int(gpu) if gpu else facts.device if facts.device is not None else local,
                  gpu_pci=pci, time_utc=facts.time_utc, fields=fields)


class SignatureScanner:
    """The catalogue matches of one file, read chunk by chunk as a
    :class:`~gpulib.parsers.linescan.ChunkReader` (alone, or riding along the job parser's read)."""

    def __init__(self, source: str, *, tz: str | None = None, year: int | None = None,
                 written: str | Path | None = None, generic: bool = True) -> None:
        self.source = source
        #: whether the generic failure vocabulary is read in this file (:data:`GENERIC_KINDS`): a kernel
        #: log's or a tool's "ERROR" is judged by the rules of its kind, and its lines are not searched
        self._generic = generic
        self.result: ParseResult[Signal] = ParseResult(KIND)
        self._folder = Folder(_fold_shape, _fold_member, Signal.__slots__)
        self._finder = KeywordLines(_keywords(generic))
        self._reader = LineReader(tz=zone_of(tz), year=year, glog_year=modified_year(written))
        self._path = PathFacts.of(source)
        self._keywords: dict[int, set[int]] | None = None  # line start -> keywords it holds (this chunk)
        self._generic_head: list[Signal] = []
        self._generic_tail: deque[Signal] = deque(maxlen=GENERIC_KEEP)
        #: the file name's rank is a hint only where the content does not say otherwise: the signals
        #: that took it, and the ranks the lines read named themselves (another one: they lose it at
        #: :meth:`finish`)
        self._named_by_path: list[Signal] = []
        self._content_ranks: set[int] = set()

    def wanted(self, buf: bytearray, limit: int, offset: int, size: int) -> list[int]:
        if self._reader.year is None:
            self._reader.year = year_hint(bytes(buf[:1 << 20]))
        # the keywords each line holds come with the pass that finds the lines (Hyperscan; None with
        # the anchors engine). They are what the line's decoded text holds, also for a keyword that
        # is not ASCII ('已杀死'): the decoder replaces only the bytes of an invalid sequence, never a
        # whole character after them, and a line is cut at the same byte for both.
        self._keywords = self._finder.line_keywords(buf, limit, within=MAX_LINE_CHARS)
        if self._keywords is not None:
            return list(self._keywords)
        return self._finder.line_starts(buf, limit)

    def take(self, buf: bytearray, limit: int, lines: list[tuple[int, int]]) -> None:
        reader, memo, records, held, fold = self._reader, _MEMO, self.result.records, self._keywords, self._folder.fold
        owners = _owners(self._finder.keywords)
        for start, lineno in lines:
            end = buf.find(b"\n", start, limit)
            raw = buf[start:end if end != -1 else limit][:MAX_LINE_CHARS].decode("utf-8", "replace")
            # what a line reads as depends on the line, the year and the host of a pasted shell
            # session only; a prompt line changes that host, so it is never remembered
            key = (raw, reader.session_host, reader.year, reader.glog_year, reader.tz, self._generic)
            hit = memo.get(key)
            if hit is None:
                facts = reader.read(raw)
                candidates = None if held is None else {i for k in held.get(start, ()) for i in owners[k]}
                if facts.command:  # what was typed: read for the settings it makes only, and never
                    settings = _matches(facts, raw, _settings(candidates))  # remembered (it moves the host)
                    if not settings:
                        continue
                    hit = (facts, settings)
                else:
                    hit = (facts, _matches(facts, raw, candidates))
                    if len(raw) <= _MEMO_LINE_CHARS:
                        if len(memo) >= _MEMO_LINES:
                            memo.clear()
                        memo[key] = hit
            facts, matches = hit
            if facts.rank is not None:
                self._content_ranks.add(facts.rank)
            for sig, fields in matches:
                if sig.role == GENERIC and not self._generic:
                    continue
                signal = _signal(sig, dict(fields), facts, lineno, raw, self._path)
                if fold(signal):
                    continue
                if signal.rank is not None:
                    if fields.get("rank") or fields.get("rank2") or facts.rank is not None:
                        self._content_ranks.add(signal.rank)
                    else:
                        self._named_by_path.append(signal)
                if sig.role != GENERIC:
                    records.append(signal)
                elif len(self._generic_head) < GENERIC_KEEP:
                    self._generic_head.append(signal)
                else:
                    self._generic_tail.append(signal)

    def finish(self) -> ParseResult[Signal]:
        """The matches once the file was read: the generic failure lines kept (see
        :data:`GENERIC_KEEP`) join the others."""
        self.result.records.extend(self._generic_head)
        self.result.records.extend(self._generic_tail)
        self._generic_head, self._generic_tail = [], deque(maxlen=GENERIC_KEEP)
        if self._content_ranks - {self._path.rank}:  # the lines name another rank (or several ranks wrote them)
            for signal in self._named_by_path:
                signal.rank = None
        self._named_by_path = []
        return self.result

    def failed(self, exc: Exception) -> None:
        self.result.problems.append(Problem(self.source, f"signature scan failed: {type(exc).__name__}: {exc}"))


def scan_file(path: str | Path, source: str | None = None, *, tz: str | None = None,
              year: int | None = None, generic: bool = True) -> ParseResult[Signal]:
    """Every catalogue match in one file, streamed (memory flat in the file size); ``generic``: also
    the generic failure vocabulary (see :class:`SignatureScanner`). Never raises."""
    scanner = SignatureScanner(source or str(path), tz=tz, year=year, written=path, generic=generic)
    try:
        linescan.read_file(path, [scanner])
    except OSError as exc:
        scanner.result.problems.append(Problem(scanner.source, f"cannot read: {exc.strerror or exc}"))
    return scanner.finish()


__all__ = ["GENERIC", "GENERIC_KINDS", "PathFacts", "Signal", "SignatureScanner", "generic_signatures", "match_line", "scan_file"]
