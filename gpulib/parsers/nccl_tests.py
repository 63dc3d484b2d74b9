"""nccl-tests output (``all_reduce_perf`` & friends, and ``gpulib nccl-test``) -> runs of typed rows.

Why read it: the fabric test an engineer ran last night is the fastest evidence that a link is
slow or corrupts data (``#wrong`` > 0). Real files come in every historical layout: the 2019 table
without ``redop``/``root`` and with ``error`` printed as ``0e+00``, 2020-2022 device lines without
``Group``, broadcast tables with ``root`` but no ``redop``, mpirun's ``[1,0]<stdout>:`` prefixes,
``N/A`` placements, and runs cut off before the footer. Columns are therefore mapped from the
header line by name, never by fixed position; a headerless table falls back on the token count.

The 2019-2021 ``error`` column is the largest deviation from the expected result (``2e-07`` is float
rounding), not a count: it is kept as ``*_max_error`` and the run's correctness comes from its ``Out
of bounds values`` line. ``NCCL INFO``/``WARN`` lines (``NCCL_DEBUG=INFO``) that show how ranks are
connected (transports, NICs, the topology dump, GPU Direct RDMA) are kept as :class:`NcclDebugLine`
so the verdict can name a cause; a run that died before its first size keeps its header and its
NCCL error instead of being "not nccl-tests output".

One file may hold several runs (``-d all``, or logs of several collectives concatenated): a new
run starts at a version/``Collective test starting``/``nThread`` line after a finished one.
Units as printed: time in microseconds, bandwidth in GB/s (1e9 bytes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath

from gpulib.identity import normalize_pci
from gpulib.parsers.base import ParseResult, Problem

KIND = "nccl_tests"

#: The collectives nccl-tests has a ``<name>_perf`` program for.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv", "gather", "scatter",
               "broadcast", "reduce", "sendrecv", "hypercube")
_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
            "all_to_all": "alltoall", "send_recv": "sendrecv"}


def canonical_collective(name: str) -> str | None:
    """``all_reduce_perf`` / ``all_reduce_perf_mpi`` / ``allreduce`` -> ``all_reduce``; None when unknown."""
    key = name.strip().lower().removesuffix("_mpi").removesuffix("_perf")
    key = _ALIASES.get(key, key)
    return key if key in COLLECTIVES else None


def average_bus_bandwidth(busbws: Iterable[float | None]) -> float:
    """nccl-tests' ``# Avg bus bandwidth``: the plain mean over every printed measurement, out-of-place
    *and* in-place, small sizes included (so it is far below the large-message plateau)."""
    values = [b for b in busbws if b is not None]
    return sum(values) / len(values) if values else 0.0


_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )")
#: Intel MPI's ``-prepend-rank`` tags every write, so one row reads ``[0]  1048576 ... -1[0]  1626.5 ... 0[0] ...``.
_RANK_TAG = re.compile(r"^\[\d+\]\s?")
_INNER_TAG = re.compile(r"(?<=\S)\[\d+\]")
_VERSION = re.compile(r"^# nccl-tests version (?P<ver>\S+)(?: \((?P<git>\w+)\))?(?: nccl-headers=(?P<hdr>\d+))?"
                      r"(?: nccl-library=(?P<lib>\d+))?")
_START = re.compile(r"^# Collective test starting: (?P<prog>\S+)")
_GPULIB = re.compile(r"^# gpulib nccl-tester (?P<ver>\S+) (?P<kv>.*)$")
_PARAMS = re.compile(r"^#? ?nThread (?P<nthread>\d+) nGpus (?P<ngpus>\d+) minBytes (?P<minbytes>\d+) maxBytes "
                     r"(?P<maxbytes>\d+) step: (?P<step>\d+)\((?P<step_type>factor|bytes)\) warmup iters: "
                     r"(?P<warmup_iters>\d+)\s+iters: (?P<iters>\d+)(?: agg iters: (?P<agg_iters>\d+))?"
                     r"(?: validation: (?P<validation>\d+))?(?: graph: (?P<graph>\d+))?")
#: A rank line; pasted ones are often cut at the terminal's edge, so the bus id and the name may be partial or
#: missing (a cut name is then an unknown GPU, judged by the interconnect's bounds).
_DEVICE = re.compile(r"^#?\s+Rank\s+(?P<rank>\d+)(?: Group\s+(?P<group>\d+))?(?: Pid\s+(?P<pid>\d+))? on\s+(?P<host>\S+) "
                     r"device\s+(?P<dev>\d+)(?: \[(?P<pci>[^\]\s]*)\]?(?: (?P<name>.+?))?)?\s*$")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*: (?P<n>\d+) (?P<ok>OK|FAILED)")  # "#" lost when pasted as Markdown
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*: (?P<bw>[-+\d.eE]+|nan|inf)(?: (?P<ok>OK|FAILED))?")
_CONCLUDED = re.compile(r"^# Collective test concluded: (?P<prog>\S+)")
_FAIL = re.compile(r"^(?:(?P<host>\S+): )?(?:Test )?(?P<kind>CUDA|NCCL) failure (?P<file>\S+):(?P<line>\d+) '(?P<msg>.*)'")
_TIMEOUT = re.compile(r"^(?:(?P<host>\S+): )?Test timeout \((?P<secs>\d+)s\) (?P<file>[^\s:]+):(?P<line>\d+)")
#: A nccl-tests program named anywhere (a command line, a path, a build log): ``all_reduce_perf``,
#: ``all_reduce_perf_mpi`` (the MPI build some images ship), ``./build/all_gather_perf``.
_BINARY = re.compile(r"(?<![\w-])(?P<name>(?:all_reduce|all_gather|reduce_scatter|alltoallv?|broadcast|reduce|sendrecv|"
                     r"gather|scatter|hypercube)_perf(?:_mpi)?)(?![\w-])")
#: gpulib's own tester names its collective with a flag.
_COLLECTIVE_FLAG = re.compile(r"(?:gpulib nccl-test|-m gpulib\.nccl)\b.*?--collective[= ](?P<name>\S+)")
#: What makes a line that names a program a *command line*: a launcher, a shell prompt, or test flags after it.
_COMMAND = re.compile(r"\b(?:mpirun|mpiexec|orterun|prterun|srun|jsrun|aprun|torchrun|sbatch)\b|^\S*[$#>] |"
                      r"_perf(?:_mpi)?\s+-[-a-zA-Z]")
#: The launcher or the operator ended the run: a time limit, a signal, Ctrl-C. A table that stops at such a
#: line hung (or was killed); a table that stops without one was only cut when it was pasted.
_STOPPED = re.compile(r"DUE TO TIME LIMIT|CANCELLED AT|srun: Job step aborted|exited on signal \d+|"
                      r"srun: error: .*: tasks? [\d,-]+: (?:Killed|Terminated|Aborted)|^\^C|Ctrl-C|"
                      r"(?:^|: )(?:Killed|Terminated)$|Test timeout \(\d+s\)")
_VERDICT = re.compile(r"^# gpulib verdict: (?P<status>PASS|WARN|FAIL) (?P<reason>.*)$")
_HEAD_MARK = re.compile(r"nccl-tests version|^#? ?nThread \d+ nGpus|algbw\s+busbw|Avg bus bandwidth|"
                        r"# gpulib nccl-tester|(?:NCCL|CUDA) failure \S+:\d+ '|Collective test starting")
#: ``host:pid:tid [dev] file.cc:123 NCCL WARN text`` / ``host:pid:tid [dev] NCCL INFO text`` (NCCL_DEBUG).
_DEBUG = re.compile(r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:\S+:\d+ )?"
                    r"NCCL (?P<level>INFO|WARN) (?P<text>.*)$")
#: The INFO lines that say how ranks are connected; the rest of an NCCL_DEBUG=INFO log is not kept.
_DEBUG_KEEP = re.compile(r" via |NET/\w+ : Using|Using network|GPU Direct RDMA|\+ (?:NET|PCI|NVL|SYS|C2C)\[|=== System|"
                         r" nranks \d+ |P2P is disabled|NVLS|_DISABLE|NCCL_TOPO_FILE|NCCL_NET_GDR|Topology detection")
_DEBUG_CAP = 5000
_TIME_COLUMNS = ("time", "cputime", "time_ms")


@dataclass
class NcclDebugLine:
    """One kept ``NCCL INFO``/``NCCL WARN`` line: ``text`` is what follows ``NCCL INFO ``."""

    line: int
    host: str
    level: str  # INFO | WARN
    text: str


@dataclass
class NcclTestsRow:
    """One size. ``oop_*`` = out-of-place, ``ip_*`` = in-place; None where the file says N/A."""

    line: int
    size_bytes: int
    count: int
    type: str | None
    redop: str | None
    root: int | None
    oop_time_us: float | None
    oop_algbw_gbps: float | None
    oop_busbw_gbps: float | None
    oop_wrong: int | None
    ip_time_us: float | None
    ip_algbw_gbps: float | None
    ip_busbw_gbps: float | None
    ip_wrong: int | None
    oop_max_error: float | None = None  # 2019-2021 ``error`` column: largest deviation, not a count
    ip_max_error: float | None = None


@dataclass
class NcclTestsDevice:
    rank: int
    group: int | None
    pid: int | None  # None in 2017-2018 builds, which printed no Pid
    host: str
    device: int
    pci_raw: str
    pci_bus_id: str | None  # normalised; None for CPU ranks and the pre-2025 bus-only ``[0x1b]``
    name: str


@dataclass
class NcclTestsFailure:
    line: int
    host: str | None  # None in pre-2019 ``NCCL failure common.cu:874 '...'`` lines
    kind: str  # CUDA | NCCL
    file: str
    source_line: int
    message: str


@dataclass
class ProgramMention:
    """A nccl-tests program named on a line of the file; ``command`` when the line starts it."""

    line: int
    collective: str
    name: str
    command: bool


@dataclass
class NcclTestsRun:
    line: int
    program: str | None = None
    collective: str | None = None
    version: str | None = None
    nccl_library: str | None = None
    params: dict = field(default_factory=dict)
    devices: list[NcclTestsDevice] = field(default_factory=list)
    rows: list[NcclTestsRow] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    oob_count: int | None = None
    oob_ok: bool | None = None
    avg_busbw_gbps: float | None = None  # as printed
    avg_busbw_ok: bool | None = None  # only when the run was given a bandwidth check threshold
    failures: list[NcclTestsFailure] = field(default_factory=list)
    gpulib: dict | None = None  # our own header: version, backend, torch, nccl, ...
    gpulib_verdict: str | None = None
    complete: bool = False
    debug: list[NcclDebugLine] = field(default_factory=list)  # shared by the runs of one file
    collective_clue: str | None = None  # which line or name said the collective (None: the table must show it)
    first_row_line: int | None = None
    stopped: str | None = None  # "line N: <text>" of the launcher/operator line that ended a run without footer

    @property
    def computed_avg_busbw_gbps(self) -> float:
        return average_bus_bandwidth(b for r in self.rows for b in (r.oop_busbw_gbps, r.ip_busbw_gbps))

    @property
    def wrong_total(self) -> int | None:
        """``#wrong`` summed over rows; layouts with an ``error`` column count on the out-of-bounds line."""
        values = [w for r in self.rows for w in (r.oop_wrong, r.ip_wrong) if w is not None]
        if values:
            return sum(values)
        return self.oob_count if self.rows else None

    @property
    def nranks(self) -> int | None:
        """Distinct ranks named by the device lines (processes that each print ``Rank 0`` count once)."""
        return len({d.rank for d in self.devices}) or None

    @property
    def hosts(self) -> list[str]:
        return sorted({d.host for d in self.devices})


#: A literal of each branch of :data:`_HEAD_MARK`: a head without any of them is not nccl-tests output
#: (tested first: the per-line search costs ~200 us on the head of every kernel log and job console).
_HEAD_WORDS = ("nccl-tests version", "nThread", "algbw", "Avg bus bandwidth", "# gpulib nccl-tester", " failure ",
               "Collective test starting")


def looks_like(head: str) -> bool:
    if not any(word in head for word in _HEAD_WORDS):
        return False
    lines = [_PREFIX.sub("", line, count=1) for line in head.splitlines()[:200]]
    return any(_HEAD_MARK.search(line) for line in lines)


def _number(token: str) -> float | None:
    if token.upper() == "N/A":
        return None
    return float(token)


def _wrong(token: str) -> int | None:
    return None if token.upper() == "N/A" else int(float(token))  # 2019 printed ``0e+00``


def _fallback_columns(tokens: list[str]) -> list[str]:
    """Column names for a row seen before any header line (cut-off or grepped files)."""
    body = ["time", "algbw", "busbw", "#wrong"] * 2
    extra = len(tokens) - 3 - len(body)
    if extra >= 2:
        return ["size", "count", "type", "redop", "root", *body]
    if extra == 1:
        return ["size", "count", "type", "root" if tokens[3].lstrip("-").isdigit() else "redop", *body]
    return ["size", "count", "type", *body]


#: 2017-2018 builds named the columns ``bytes N type op ... time algbw busbw res`` and printed the time
#: in milliseconds (``%7.3f`` of seconds x 1e3); ``res`` is the largest deviation like the later ``error``.
_LEGACY_NAMES = {"bytes": "size", "N": "count", "op": "redop", "res": "error", "time": "time_ms"}


def _header_columns(text: str) -> list[str] | None:
    tokens = text.lstrip("#").split()
    if "busbw" not in tokens:
        return None
    if tokens[0] == "size":
        return tokens
    if tokens[0] == "bytes":
        return [_LEGACY_NAMES.get(t, t) for t in tokens]
    return None


def _max_error(token: str) -> float | None:
    return None if token.upper() == "N/A" else float(token)


def _row(tokens: list[str], columns: list[str], line: int) -> NcclTestsRow:
    named: dict[str, str] = {}
    group = 0
    for name, token in zip(columns, tokens, strict=False):
        if name in _TIME_COLUMNS:
            group += 1
            if name == "time_ms" and token.upper() != "N/A":
                token = repr(float(token) * 1000.0)  # milliseconds in 2017-2018 builds
            name = "time"
        prefix = ("oop_", "ip_")[group - 1] if 1 <= group <= 2 else ""
        if group <= 2:
            named[prefix + name] = token

    def get(key: str, conv):
        return conv(named[key]) if key in named else None

    return NcclTestsRow(
        line=line, size_bytes=int(named["size"]), count=int(named["count"]), type=named.get("type"),
        redop=named.get("redop"), root=get("root", int),
        oop_time_us=get("oop_time", _number), oop_algbw_gbps=get("oop_algbw", _number),
        oop_busbw_gbps=get("oop_busbw", _number), oop_wrong=get("oop_#wrong", _wrong),
        ip_time_us=get("ip_time", _number), ip_algbw_gbps=get("ip_algbw", _number),
        ip_busbw_gbps=get("ip_busbw", _number), ip_wrong=get("ip_#wrong", _wrong),
        oop_max_error=get("oop_error", _max_error), ip_max_error=get("ip_error", _max_error),
    )


def _collective_from_name(source: str) -> str | None:
    stem = PurePath(source).name.lower()
    for name in ("reduce_scatter", "all_reduce", "all_gather", "alltoall", "sendrecv", "broadcast", "hypercube",
                 "gather", "scatter", "reduce"):
        if name in stem or name.replace("_", "") in stem:
            return name
    return None


def _mentions(line: str, line_no: int) -> list[ProgramMention]:
    command = bool(_COMMAND.search(line))
    found = [ProgramMention(line_no, c, m["name"], command) for m in _BINARY.finditer(line)
             if (c := canonical_collective(m["name"]))]
    if (m := _COLLECTIVE_FLAG.search(line)) and (c := canonical_collective(m["name"])):
        found.append(ProgramMention(line_no, c, f"--collective {m['name']}", True))
    return found


def _name_collective(r: NcclTestsRun, mentions: list[ProgramMention], after_line: int, source: str) -> None:
    """The collective from what the text says, in order: the banner (set while reading), one program named
    anywhere in the file, the command line that started this run, the file name. None: the table must show it."""
    if r.collective:
        return
    named = {m.collective for m in mentions}
    if len(named) == 1:
        m = mentions[0]
        r.collective, r.collective_clue = m.collective, f"program name {m.name} (line {m.line})"
        return
    start = r.first_row_line or r.line
    commands = [m for m in mentions if m.command and after_line < m.line <= start]
    if commands:
        m = commands[-1]
        r.collective, r.collective_clue = m.collective, f"command line {m.name} (line {m.line})"
        return
    if name := _collective_from_name(source):
        r.collective, r.collective_clue = name, f"file name {PurePath(source).name}"


def parse(text: str, source: str = "<text>", **opts) -> ParseResult[NcclTestsRun]:
    """Never raises: unreadable lines become problems, the rest of the file is still read."""
    result: ParseResult[NcclTestsRun] = ParseResult(KIND)
    runs: list[NcclTestsRun] = []
    run: NcclTestsRun | None = None
    debug: list[NcclDebugLine] = []
    mentions: list[ProgramMention] = []
    stops: list[tuple[int, str]] = []

    def current(line_no: int, starting: bool = False) -> NcclTestsRun:
        nonlocal run
        if run is None or (starting and (run.rows or run.complete or run.avg_busbw_gbps is not None)):
            run = NcclTestsRun(line=line_no)
            runs.append(run)
        return run

    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = _PREFIX.sub("", raw, count=1).rstrip()
        if tag := _RANK_TAG.match(line):
            line = _INNER_TAG.sub(" ", line[tag.end():])
        if not line.strip():
            continue
        if "_perf" in line or "--collective" in line:
            mentions += _mentions(line, line_no)
        if _STOPPED.search(line.strip()):
            stops.append((line_no, line.strip()))
        if m := _DEBUG.match(line.strip()):
            if len(debug) < _DEBUG_CAP and (m["level"] == "WARN" or _DEBUG_KEEP.search(m["text"])):
                debug.append(NcclDebugLine(line_no, m["host"], m["level"], m["text"].strip()))
        elif m := _GPULIB.match(line):
            r = current(line_no, starting=True)
            r.gpulib = {"gpulib": m["ver"], **dict(kv.split("=", 1) for kv in m["kv"].split() if "=" in kv)}
            r.collective = canonical_collective(r.gpulib.get("collective", "")) or r.collective
            r.collective_clue = f"gpulib nccl-tester header (line {line_no})"
        elif m := _VERSION.match(line):
            r = current(line_no, starting=True)
            r.version, r.nccl_library = m["ver"], m["lib"]
        elif m := _START.match(line):
            r = current(line_no, starting=not (run and run.version and not run.rows and run.program is None))
            r.program = m["prog"]
            r.collective = canonical_collective(m["prog"]) or r.collective
            r.collective_clue = f"banner '# Collective test starting: {m['prog']}' (line {line_no})"
        elif m := _PARAMS.match(line):
            r = current(line_no, starting=bool(run and (run.params or run.rows)))
            r.params = {k: (int(v) if v and v.isdigit() else v) for k, v in m.groupdict().items() if v is not None}
        elif m := _DEVICE.match(line):
            current(line_no).devices.append(NcclTestsDevice(
                rank=int(m["rank"]), group=int(m["group"]) if m["group"] else None, pid=int(m["pid"]) if m["pid"] else None,
                host=m["host"], device=int(m["dev"]), pci_raw=m["pci"] or "",
                pci_bus_id=normalize_pci(m["pci"]) if m["pci"] else None, name=m["name"] or "unknown GPU"))
        elif m := _OOB.match(line):
            r = current(line_no)
            r.oob_count, r.oob_ok = int(m["n"]), m["ok"] == "OK"
        elif m := _AVG.match(line):
            r = current(line_no)
            r.avg_busbw_gbps = float(m["bw"])
            r.avg_busbw_ok = None if m["ok"] is None else m["ok"] == "OK"
        elif m := _CONCLUDED.match(line):
            r = current(line_no)
            r.complete = True
            r.program = r.program or m["prog"]
            if r.collective is None and canonical_collective(m["prog"]):
                r.collective = canonical_collective(m["prog"])
                r.collective_clue = f"banner '# Collective test concluded: {m['prog']}' (line {line_no})"
        elif m := _VERDICT.match(line):
            current(line_no).gpulib_verdict = f"{m['status']} {m['reason']}"
        elif m := _FAIL.search(line):
            current(line_no).failures.append(NcclTestsFailure(line_no, m["host"], m["kind"], m["file"], int(m["line"]), m["msg"]))
        elif m := _TIMEOUT.match(line.strip()):
            current(line_no).failures.append(NcclTestsFailure(line_no, m["host"], "timeout", m["file"], int(m["line"]),
                                                              f"no progress for {m['secs']} s (-T): the run hung"))
        elif columns := _header_columns(line):
            current(line_no).columns = columns
        elif line.lstrip().startswith("#"):
            continue
        else:
            tokens = line.split()
            if len(tokens) < 7 or not tokens[0].isdigit() or not tokens[1].isdigit():
                continue  # NCCL INFO lines, launcher chatter, ...
            r = current(line_no)
            columns = r.columns or _fallback_columns(tokens)
            try:
                r.rows.append(_row(tokens, columns, line_no))
                r.first_row_line = r.first_row_line or line_no
            except (ValueError, KeyError) as exc:
                result.problems.append(Problem(source, f"cannot read result row ({exc}): {line.strip()[:120]}", line_no))

    warned = any(d.level == "WARN" for d in debug)
    kept = [r for r in runs if r.rows or r.failures or r.avg_busbw_gbps is not None or r.params or r.devices or r.version]
    for i, r in enumerate(kept):
        r.debug = debug
        _name_collective(r, mentions, kept[i - 1].first_row_line or kept[i - 1].line if i else 0, source)
        if r.avg_busbw_gbps is None and not r.failures:
            after = r.rows[-1].line if r.rows else r.line
            until = kept[i + 1].line if i + 1 < len(kept) else None
            stop = next(((n, t) for n, t in stops if n > after and (until is None or n < until)), None)
            r.stopped = f"line {stop[0]}: {stop[1]}" if stop else None
        if r.rows and r.avg_busbw_gbps is None and not r.failures:
            result.problems.append(Problem(source, "the table ends before '# Avg bus bandwidth' after "
                                           f"{len(r.rows)} rows: " + (f"ended by {r.stopped}" if r.stopped else
                                                                      "cut off when it was pasted, or still running"),
                                           r.rows[-1].line))
        elif not r.rows and not r.failures and r.avg_busbw_gbps is None and not warned:
            result.problems.append(Problem(source, "the run printed its header but no result row and no error: it "
                                           "hung while connecting (or at the first size), or the paste was cut", r.line))
        result.records.append(r)
    if not result.records:
        first_warn = next((d for d in debug if d.level == "WARN"), None)
        why = (f"; its first NCCL error (line {first_warn.line}): NCCL WARN {first_warn.text}" if first_warn else "")
        result.problems.append(Problem(source, "no nccl-tests result rows found (not nccl-tests output, or it failed "
                                       f"before the first size){why}"))
    return result
