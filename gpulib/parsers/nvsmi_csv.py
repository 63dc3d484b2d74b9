"""``nvidia-smi --query-gpu=... --format=csv`` (and ``--query-compute-apps``) output.

Columns are found by the name in the header row, never by position, because every site asks for
its own field list (``timestamp, index, pci.bus_id, temperature.gpu, clocks.sm [MHz], ...``).
Header cells carry units (``power.draw [W]``), values carry them too unless ``nounits`` was
given (``272.01 W``), and missing readings are bracketed (``[N/A]``, ``[Not Supported]``).

What comes back depends on the file, and it is decided from the content:

* a monitoring log (``--query-gpu ... -l 30`` appended to a file: a ``timestamp`` column and the
  same GPU on many rows) -> one :class:`GpuSample` per row. This is the time series that shows
  *when* a GPU started to throttle: ``clocks_event_reasons.active`` ``0x20`` (SW thermal) then
  ``0x68`` (HW slowdown + HW thermal + SW thermal) on one GPU while the others stay at ``0x1``;
* a one-shot query (one row per GPU) -> one :class:`GpuState` per row;
* ``--query-compute-apps`` -> one :class:`GpuProcess` per row (which PIDs hold which GPU).

Every bad cell is None plus a problem naming the line and column; a short (cut) row keeps the
cells it has.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable
from dataclasses import dataclass

from gpulib.identity import normalize_pci
from gpulib.parsers import units
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.gpu_records import (
    GpuProcess,
    GpuSample,
    GpuState,
    canonical_reason,
    decode_throttle_bitmask,
)
from gpulib.parsers.line_identity import PROMPT
from gpulib.parsers.logtime import stamp_in, zone_of

KIND = "nvidia_smi_csv"

_NUM, _INT, _FLAG, _TEXT = units.number, units.integer, units.yes_no, units.text_value

# --query-gpu column (unit stripped, lower case; nvidia-smi accepts aliases) -> (field, converter)
COLUMNS: dict[str, tuple[str, object]] = {
    "index": ("index", _INT),
    "name": ("name", _TEXT),
    "gpu_name": ("name", _TEXT),
    "uuid": ("uuid", _TEXT),
    "gpu_uuid": ("uuid", _TEXT),
    "serial": ("serial", _TEXT),
    "driver_version": ("driver_version", _TEXT),
    "hostname": ("host", _TEXT),
    "fan.speed": ("fan_pct", _NUM),
    "temperature.gpu": ("temp_c", _NUM),
    "temperature.memory": ("temp_memory_c", _NUM),
    "temperature.gpu.tlimit": ("temp_tlimit_margin_c", _NUM),
    "clocks.sm": ("sm_clock_mhz", _NUM),
    "clocks.current.sm": ("sm_clock_mhz", _NUM),
    "clocks.max.sm": ("sm_clock_max_mhz", _NUM),
    "clocks.max.sm_clock": ("sm_clock_max_mhz", _NUM),
    "clocks.mem": ("mem_clock_mhz", _NUM),
    "clocks.current.memory": ("mem_clock_mhz", _NUM),
    "power.draw": ("power_draw_w", _NUM),
    "power.draw.average": ("power_draw_w", _NUM),
    "power.draw.instant": ("power_draw_w", _NUM),
    "enforced.power.limit": ("power_limit_w", _NUM),
    "power.limit": ("power_limit_w", _NUM),
    "utilization.gpu": ("util_gpu_pct", _NUM),
    "memory.used": ("mem_used_mib", _NUM),
    "memory.total": ("mem_total_mib", _NUM),
    "mig.mode.current": ("mig_enabled", _FLAG),
    "ecc.mode.current": ("ecc_mode_enabled", _FLAG),
    "ecc.errors.corrected.volatile.total": ("ecc_volatile_sbe", _INT),
    "ecc.errors.uncorrected.volatile.total": ("ecc_volatile_dbe", _INT),
    "ecc.errors.corrected.aggregate.total": ("ecc_aggregate_sbe", _INT),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_aggregate_dbe", _INT),
    "retired_pages.single_bit_ecc.count": ("retired_pages_sbe", _INT),
    "retired_pages.sbe": ("retired_pages_sbe", _INT),
    "retired_pages.double_bit.count": ("retired_pages_dbe", _INT),
    "retired_pages.dbe": ("retired_pages_dbe", _INT),
    "retired_pages.pending": ("retired_pages_pending", _FLAG),
    "remapped_rows.correctable": ("remapped_rows_correctable", _INT),
    "remapped_rows.uncorrectable": ("remapped_rows_uncorrectable", _INT),
    "remapped_rows.pending": ("remapped_rows_pending", _FLAG),
    "remapped_rows.failure": ("remapped_rows_failure", _FLAG),
    "pcie.link.gen.current": ("pcie_gen_current", _INT),
    "pcie.link.gen.max": ("pcie_gen_max", _INT),
    "pcie.link.width.current": ("pcie_width_current", _INT),
    "pcie.link.width.max": ("pcie_width_max", _INT),
    "clocks_event_reasons.active": ("throttle_bitmask", _INT),
    "clocks_throttle_reasons.active": ("throttle_bitmask", _INT),
}
_PROCESS_COLUMNS = {"pid": ("pid", _INT), "process_name": ("name", _TEXT),
                    "used_gpu_memory": ("used_mib", _NUM), "used_memory": ("used_mib", _NUM),
                    "gpu_bus_id": ("pci_bus_id", _TEXT), "gpu_uuid": ("uuid", _TEXT)}
_SAMPLE_FIELDS = {f.name for f in dataclasses.fields(GpuSample)}
_STATE_FIELDS = {f.name for f in dataclasses.fields(GpuState)}


def _column(cell: str) -> str:
    """``'power.draw [W]'`` -> ``'power.draw'``."""
    return cell.split("[", 1)[0].strip().lower()


# Other --query-* outputs share the CSV shape but hold no GPU state: say so instead of guessing.
_OTHER_QUERIES = {
    "retired_pages.address": "--query-retired-pages lists page addresses; take the counts from -q",
    "max_memory_usage": "--query-accounted-apps lists finished processes, not the GPU state",
}


def _unsupported(columns) -> str | None:
    return next((why for column, why in _OTHER_QUERIES.items() if column in columns), None)


def _date_line(line: str) -> bool:
    """``Sun Jul 19 04:19:07 CEST 2026``: what ``date; nvidia-smi --query-gpu=...`` prints first."""
    return "," not in line and stamp_in(line, year=None, tz=None) is not None


def looks_like(head: str) -> bool:
    # the command, a comment (a prolog's ``# written by ...``) or the answer of ``date;`` above the
    # table is not its header (parse() reads the same lines above it)
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    first = next((line for line in lines if not _command_echo([line]) and not _date_line(line)), "")
    if first.startswith("#") or "," not in first:
        return False
    columns = {_column(c) for c in first.split(",")}
    if _unsupported(columns):
        return False
    return bool(columns & (set(COLUMNS) | {"pci.bus_id", "gpu_bus_id", "pid"})) and len(columns) >= 2


#: Distinct cells remembered per converter: readings repeat (a few temperatures, clocks, masks, the
#: same PCI ids), so a long monitoring log converts each spelling once.
_MEMO_CELLS = 4096
#: converter -> {cell: value}, shared by every file of the process: the converters are pure, and
#: the 1,024 monitoring logs of a fleet spell their readings alike (``1980 MHz``, ``Not Active``),
#: so a per-file memo converted the same ~75 spellings again in each file.
_MEMOS: dict[Callable[[str], object], dict] = {}
#: Record field -> column: the columns :func:`parse` builds besides the table's fields.
_LINE, _REASONS, _TIME, _TIME_NOTE = "line", "throttle_reasons", "time", "time_note"


class _Refused:
    """A cell its converter refused, and why (one per distinct cell; a problem per row holding it)."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


class _Stamps:
    """``timestamp`` cells -> ``(iso, note)`` as :func:`units.parse_time` gives them. A monitoring
    log has a new stamp on every row, but the rows of one moment differ only in milliseconds: the
    date and the time-zone conversion are worked out once per second, and the fraction appended."""

    def __init__(self, tz: str | None):
        self.tz = tz
        self.seconds: dict[str, tuple[str | None, str | None]] = {}

    def __call__(self, cell: str) -> tuple[str | None, str | None]:
        whole, dot, frac = cell.strip().partition(".")
        if not (dot and frac.isascii() and frac.isdigit() and len(frac) <= 6):
            return units.parse_time(cell, self.tz)
        got = self.seconds.get(whole)
        if got is None:
            got = units.parse_time(whole, self.tz)
            if len(self.seconds) < _MEMO_CELLS:
                self.seconds[whole] = got
        iso, note = got
        if iso is None or note not in (None, units.NAIVE_TIME_NOTE):
            return units.parse_time(cell, self.tz)  # its own message, or an unknown zone kept as written
        if int(frac) == 0:
            return got
        ms = "." + frac.ljust(6, "0")[:3]  # isoformat(timespec="milliseconds") truncates
        return (iso[:-1] + ms + "Z" if iso.endswith("Z") else iso + ms), note


@dataclass
class _Column:
    """How one header column's cells become a record field, decided once from the header."""

    position: int  # in the header
    name: str  # as the header says it (unit stripped, lower case): named in problems
    field: str | None  # record field; :data:`_TIME` for the timestamp, None for a single-reason column
    convert: Callable[[str], object]
    reason: str | None = None  # ``clocks_event_reasons.<reason>`` columns: the canonical reason
    memo: dict | None = None  # shared by every file (:data:`_MEMOS`); None: every cell differs (timestamps)


def _columns(names: list[str], table: dict, tz: str | None) -> list[_Column]:
    """The header columns gpulib reads, in header order (the others are never looked at)."""
    out: list[_Column] = []
    for i, name in enumerate(names):
        if name == "timestamp":
            out.append(_Column(i, name, _TIME, _Stamps(tz)))
        elif name in ("pci.bus_id", "gpu_bus_id"):
            out.append(_Column(i, name, "pci_bus_id", normalize_pci, memo=_MEMOS.setdefault(normalize_pci, {})))
        elif name.startswith(("clocks_event_reasons.", "clocks_throttle_reasons.")) and name not in table:
            reason = canonical_reason(name.split(".", 1)[1])
            if reason:
                out.append(_Column(i, name, None, _FLAG, reason, _MEMOS.setdefault(_FLAG, {})))
        elif name in table:
            field, convert = table[name]
            out.append(_Column(i, name, field, convert, memo=_MEMOS.setdefault(convert, {})))
    return out


def _convert(column: _Column, cells: list[str | None], numbers: list[int], source: str,
             problems: list[tuple[int, int, Problem]]) -> list:
    """``cells`` (None: a cut row's missing cell, or a cell not to read) -> values. Each distinct
    spelling is converted once; a refused cell is None and a problem on every row that holds it,
    keyed (row, column) so that problems keep the order a row-by-row reading gives them."""
    lookup: dict = {None: None}
    shared = column.memo
    refused = False
    for cell in dict.fromkeys(cells):
        if cell in lookup:
            continue
        value = shared.get(cell, _Refused) if shared is not None else _Refused
        if value is _Refused:
            try:
                value = column.convert(cell)
            except ValueError as exc:
                value, refused = _Refused(str(exc)), True
            else:
                if shared is not None and len(shared) < _MEMO_CELLS:
                    shared[cell] = value
        lookup[cell] = value
    values = list(map(lookup.__getitem__, cells))
    if refused:
        for row, value in enumerate(values):
            if type(value) is _Refused:
                problems.append((row, column.position,
                                 Problem(source, f"column {column.name!r}: {value.why}", numbers[row])))
                values[row] = None
    return values


def _cells(rows: list[list[str]], position: int, whole: list[tuple[str, ...]]) -> list[str | None]:
    """One column of ``rows``; None where a cut row ends before it. ``whole``: the columns every
    row has, transposed at once (the common case: no row is cut)."""
    if position < len(whole):
        return list(whole[position])
    return [row[position] if position < len(row) else None for row in rows]


def _field_columns(columns: list[_Column], rows: list[list[str]], numbers: list[int], source: str,
                   problems: list[tuple[int, int, Problem]]) -> dict[str, list]:
    """Record field -> its value on each row, read a column at a time. Where two header columns
    name one field (``clocks.sm`` and ``clocks.current.sm``), the first with a value wins and the
    later one is read only on the rows still without one."""
    out: dict[str, list] = {}
    reasons: list[tuple[str, list]] = []
    narrowest = min(map(len, rows), default=0)
    whole = list(zip(*(row[:narrowest] for row in rows), strict=True)) if narrowest else []
    for column in columns:
        cells = _cells(rows, column.position, whole)
        if column.field is None:
            reasons.append((column.reason, _convert(column, cells, numbers, source, problems)))
        elif column.field == _TIME:
            stamps = [v or (None, None) for v in _convert(column, cells, numbers, source, problems)]
            out[_TIME], out[_TIME_NOTE] = [s[0] for s in stamps], [s[1] for s in stamps]
        elif column.field not in out:
            out[column.field] = _convert(column, cells, numbers, source, problems)
        else:
            earlier = out[column.field]
            later = _convert(column, [c if v is None else None for c, v in zip(cells, earlier, strict=True)], numbers, source,
                             problems)
            out[column.field] = [v if v is not None else w for v, w in zip(earlier, later, strict=True)]
    out[_REASONS] = _reasons(out.get("throttle_bitmask"), reasons, len(rows))
    out[_LINE] = numbers
    return out


def _reasons(masks: list | None, columns: list[tuple[str, list]], count: int) -> list[list[str]]:
    """Each row's active reasons: its ``clocks_event_reasons.active`` mask decoded (each mask
    once), else the single-reason columns that say Active."""
    decoded: dict[int, list[str]] = {}
    out = []
    for row in range(count):
        mask = masks[row] if masks is not None else None
        if mask is None:
            out.append([reason for reason, active in columns if active[row]])
            continue
        names = decoded.get(mask)
        if names is None:
            names = decoded[mask] = decode_throttle_bitmask(mask)
        out.append(list(names))  # each record owns its list
    return out


def _repeats(values: dict[str, list], count: int) -> bool:
    """Some GPU (index, PCI id, UUID) has more than one row: a time series, not a snapshot."""
    none = [None] * count
    keys = zip(values.get("index", none), values.get("pci_bus_id", none), values.get("uuid", none), strict=True)
    return len(set(keys)) < count


def _command_echo(row: list[str]) -> bool:
    """Whether ``row`` is the command line itself (``$ nvidia-smi --query-gpu=index,pci.bus_id ...``):
    a paste or a script's ``set -x`` shows it above the table, and its commas are not columns."""
    first = row[0].lstrip()
    return first.startswith(("$ ", "# ", "+ ")) or "nvidia-smi " in first


def _body(rows: list[tuple[int, list[str]]], columns: list[str]) -> list[tuple[int, list[str]]]:
    """The data rows: the header printed again (several runs appended to one file) is dropped.
    Only a row whose first cell names the first column is compared whole, and the distinct first
    cells are tested once (a timestamp on every row of a monitoring log)."""
    heads = {c for c in {row[0] for _n, row in rows} if _column(c) == columns[0]}
    if not heads:
        return rows
    return [(n, row) for n, row in rows if row[0] not in heads or [_column(c) for c in row] != columns]


def _records(result: ParseResult, values: dict[str, list], count: int, is_apps: bool, series: bool,
             source: str, seen: tuple = (None, None)) -> None:
    """The rows as records: GpuProcess (compute apps), GpuSample (a series) or GpuState (a snapshot).
    ``seen``: when and on which host a snapshot was taken, read above its header (``date``, a prompt)
    for rows that print neither."""
    none = [None] * count
    if is_apps:
        names = ("pid", "name", "used_mib", "uuid", "pci_bus_id")
        rows = zip(*(values.get(n, none) for n in names), strict=True)
        result.records = [GpuProcess(**dict(zip(names, row, strict=True))) for row in rows]
    elif series:
        values["time_utc"] = values.pop(_TIME, none)
        result.records = list(map(GpuSample, *(values.get(n, none) for n in _SAMPLE_ORDER)))
    else:
        captured, host = seen
        values["captured_at"] = [t or captured for t in values.pop(_TIME, none)]
        if host:
            values["host"] = [h or host for h in values.get("host", none)]
        names = [n for n in values if n in _STATE_FIELDS]
        rows = zip(*(values[n] for n in names), strict=True)
        result.records = [GpuState(source=source, **dict(zip(names, row, strict=True))) for row in rows]


#: GpuSample's fields in the order its constructor takes them (records are built from columns).
_SAMPLE_ORDER = [f.name for f in dataclasses.fields(GpuSample)]


def parse(text: str, source: str = "<text>", *, tz: str | None = None) -> ParseResult:
    """Parse nvidia-smi CSV into GpuSample (time series), GpuState (snapshot) or GpuProcess rows.

    Read a column at a time (the ~2 million cells of a 1,024-node incident's monitoring logs):
    the C ``csv`` reader splits the rows, each read column is converted one distinct spelling at
    a time, and the records are built from the columns; columns no rule reads are never touched.
    """
    result: ParseResult = ParseResult(KIND)
    if "\x00" in text:
        result.problems.append(Problem(source, "binary data, not an nvidia-smi CSV"))
        return result
    try:
        rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text), skipinitialspace=True), 1) if row]
    except csv.Error as exc:
        result.problems.append(Problem(source, f"not readable as CSV: {exc}"))
        return result
    captured = host = None
    while rows and (_command_echo(rows[0][1]) or captured is None and len(rows[0][1]) == 1
                    and (captured := stamp_in(rows[0][1][0], year=None, tz=zone_of(tz))) is not None):
        # the command that printed the table, pasted above it: the header is the next row; or the
        # answer of ``date; nvidia-smi --query-gpu=...``: the moment of the snapshot its rows do not print
        prompt = PROMPT.match(",".join(rows.pop(0)[1]))
        host = host or (prompt and (prompt["h1"] or prompt["h2"] or prompt["h3"]))
    if not rows:
        result.problems.append(Problem(source, "empty file: no nvidia-smi CSV"))
        return result
    header_number, header = rows[0]
    names = [_column(c) for c in header]
    is_apps = "pid" in names
    table = _PROCESS_COLUMNS if is_apps else COLUMNS
    if _unsupported(names):
        result.problems.append(Problem(source, f"not parsed: {_unsupported(names)}", header_number))
        return result
    if not set(names) & (set(table) | {"pci.bus_id"}):
        result.problems.append(Problem(source, f"not an nvidia-smi --query CSV (header: {','.join(header)[:80]!r})",
                                       header_number))
        return result
    end = next((i for i, (_n, row) in enumerate(rows) if "@" in row[0] and PROMPT.match(row[0])), len(rows))
    body = _body(rows[1:end], names)  # up to the next command of a pasted session: the table ended there
    numbers, cells = [n for n, _row in body], [row for _n, row in body]
    problems: list[tuple[int, int, Problem]] = [
        (i, -1, Problem(source, f"row has {len(row)} cells, header has {len(names)}", numbers[i]))
        for i, row in enumerate(cells) if len(row) != len(names)]
    values = _field_columns(_columns(names, table, tz), cells, numbers, source, problems)
    problems.sort(key=lambda p: p[:2])
    result.problems += [p for _row, _column_at, p in problems]
    _records(result, values, len(cells), is_apps, not is_apps and "timestamp" in names and _repeats(values, len(cells)),
             source, (captured, host))
    if not result.records and not is_apps:
        result.problems.append(Problem(source, "header only: the query returned no rows"))
    return result
