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


def looks_like(head: str) -> bool:
    # the command or a comment above the table (a prolog's ``# written by ...``) is not its header
    lines = [line for line in head.splitlines() if line.strip()]
    first = next((line.strip() for line in lines if not _command_echo([line])), "")
    if first.startswith("#") or "," not in first:
        return False
    columns = {_column(c) for c in first.split(",")}
    if _unsupported(columns):
        return False
    return bool(columns & (set(COLUMNS) | {"pci.bus_id", "gpu_bus_id", "pid"})) and len(columns) >= 2


#: Distinct cells remembered per converter: readings repeat (a few temperatures, clocks, masks, the
#: same PCI ids), so a long monitoring log converts each spelling once.
_MEMO_CELLS = 4096
_MISSING = object()
#: converter -> {cell: value}, shared by every file of the process: the converters are pure, and
#: the 1,024 monitoring logs of a fleet spell their readings alike (``1980 MHz``, ``Not Active``),
#: so a per-file memo converted the same ~75 spellings again in each file.
_MEMOS: dict[Callable[[str], object], dict] = {}


@dataclass
class _Reader:
    """How one column's cells become a record field, decided once from the header."""

    column: str
    field: str | None  # record field; "time" for the timestamp, None for a single-reason column
    convert: Callable[[str], object]
    reason: str | None = None  # ``clocks_event_reasons.<reason>`` columns: the canonical reason
    memo_cells: int = _MEMO_CELLS  # 0: every cell differs (timestamps)
    memo: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.memo_cells:
            self.memo = _MEMOS.setdefault(self.convert, {})

    def read(self, cell: str, number: int, source: str, problems: list[Problem]):
        value = self.memo.get(cell, _MISSING)
        if value is _MISSING:
            try:
                value = self.convert(cell)
            except ValueError as exc:
                problems.append(Problem(source, f"column {self.column!r}: {exc}", number))
                return None
            if len(self.memo) < self.memo_cells:
                self.memo[cell] = value
        return value


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


def _readers(columns: list[str], table: dict, tz: str | None) -> list[_Reader | None]:
    """One reader per header column (None: a column gpulib does not read)."""
    out: list[_Reader | None] = []
    for column in columns:
        if column == "timestamp":
            out.append(_Reader(column, "time", _Stamps(tz), memo_cells=0))
        elif column in ("pci.bus_id", "gpu_bus_id"):
            out.append(_Reader(column, "pci_bus_id", normalize_pci))
        elif column.startswith(("clocks_event_reasons.", "clocks_throttle_reasons.")) and column not in table:
            reason = canonical_reason(column.split(".", 1)[1])
            out.append(_Reader(column, None, _FLAG, reason) if reason else None)
        elif column in table:
            name, convert = table[column]
            out.append(_Reader(column, name, convert))
        else:
            out.append(None)
    return out


def _plan(readers: list[_Reader | None]) -> list[tuple[int, _Reader, str, dict]]:
    """(column, reader, role, memo) of the columns read, role ``reason`` / ``time`` / ``field``:
    decided once per file, not looked up on each of its cells (~2 million at 1,024 nodes)."""
    return [(i, r, "reason" if r.reason else "time" if r.field == "time" else "field", r.memo)
            for i, r in enumerate(readers) if r is not None]


def _row_values(plan, row, number, source, problems) -> dict:
    values: dict = {"line": number}
    reasons: list[str] = []
    cells = len(row)
    for i, reader, role, memo in plan:
        if i >= cells:
            break  # a cut row keeps the cells it has
        cell = row[i]
        if role == "reason":
            value = memo.get(cell, _MISSING)  # the memo inline
            if value is _MISSING:
                value = reader.read(cell, number, source, problems)
            if value:
                reasons.append(reader.reason)
        elif role == "time":
            values["time"], values["time_note"] = reader.read(cell, number, source, problems) or (None, None)
        elif values.get(reader.field) is None:
            value = memo.get(cell, _MISSING)
            values[reader.field] = reader.read(cell, number, source, problems) if value is _MISSING else value
    mask = values.get("throttle_bitmask")
    values["throttle_reasons"] = decode_throttle_bitmask(mask) if mask is not None else reasons
    return values


def _repeats(rows: list[dict]) -> bool:
    """Some GPU (index, PCI id, UUID) has more than one row: a time series, not a snapshot."""
    seen: set[tuple] = set()
    for v in rows:
        key = (v.get("index"), v.get("pci_bus_id"), v.get("uuid"))
        if key in seen:
            return True
        seen.add(key)
    return False


def _command_echo(row: list[str]) -> bool:
    """Whether ``row`` is the command line itself (``$ nvidia-smi --query-gpu=index,pci.bus_id ...``):
    a paste or a script's ``set -x`` shows it above the table, and its commas are not columns."""
    first = row[0].lstrip()
    return first.startswith(("$ ", "# ", "+ ")) or "nvidia-smi " in first


def parse(text: str, source: str = "<text>", *, tz: str | None = None) -> ParseResult:
    """Parse nvidia-smi CSV into GpuSample (time series), GpuState (snapshot) or GpuProcess rows."""
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
    columns = [_column(c) for c in header]
    is_apps = "pid" in columns
    table = _PROCESS_COLUMNS if is_apps else COLUMNS
    if _unsupported(columns):
        result.problems.append(Problem(source, f"not parsed: {_unsupported(columns)}", header_number))
        return result
    if not set(columns) & (set(table) | {"pci.bus_id"}):
        result.problems.append(Problem(source, f"not an nvidia-smi --query CSV (header: {','.join(header)[:80]!r})",
                                       header_number))
        return result
    parsed = []
    plan = _plan(_readers(columns, table, tz))
    for number, row in rows[1:]:
        if PROMPT.match(row[0]):
            break  # the next command of a pasted session: the table ended
        if _column(row[0]) == columns[0] and [_column(c) for c in row] == columns:
            continue  # the header again (several runs appended to one file)
        if len(row) != len(columns):
            result.problems.append(Problem(source, f"row has {len(row)} cells, header has {len(columns)}", number))
        parsed.append(_row_values(plan, row, number, source, result.problems))
    if is_apps:
        result.records = [GpuProcess(**{k: v for k, v in values.items() if k in ("pid", "name", "used_mib", "uuid",
                                                                              "pci_bus_id")})
                          for values in parsed]
        return result
    series = "timestamp" in columns and _repeats(parsed)
    for values in parsed:
        if series:
            values["time_utc"] = values.pop("time", None)
            fields = values if values.keys() <= _SAMPLE_FIELDS else {k: v for k, v in values.items() if k in _SAMPLE_FIELDS}
            result.records.append(GpuSample(**fields))
        else:
            values["captured_at"] = values.pop("time", None) or captured
            values["host"] = values.get("host") or host
            result.records.append(GpuState(source=source, **{k: v for k, v in values.items() if k in _STATE_FIELDS}))
    if not result.records:
        result.problems.append(Problem(source, "header only: the query returned no rows"))
    return result
