"""What ``nvidia-smi -q`` text and ``nvidia-smi -q -x`` XML have in common.

Both print the same tree per GPU, one as indented ``Label : value`` lines, one as XML tags. Both
are flattened into a *field map*: normalised path -> (value text, line). Normalising (lower
case, every run of non-alphanumerics -> ``_``) makes many paths identical in both forms
(``FB Memory Usage / Used`` and ``<fb_memory_usage><used>`` both become
``fb_memory_usage/used``); where the spellings differ, :data:`FIELDS` lists both. One table
therefore reads every schema generation: ``Clocks Throttle Reasons`` (<= 525) and ``Clocks Event
Reasons`` (>= 535), old ``single_bit/total`` ECC and new ``dram_correctable`` ECC, absolute and
T.Limit temperature thresholds, ``power_readings`` and ``gpu_power_readings``.

A field that is present but unreadable becomes None plus a :class:`Problem`; a missing field is
just None. A GPU is never dropped because one of its fields is bad.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from gpulib.identity import normalize_pci
from gpulib.parsers import units
from gpulib.parsers.base import Problem
from gpulib.parsers.gpu_records import GpuState, canonical_reason

_NON_WORD = re.compile(r"[^0-9a-z]+")

#: path -> (value, 1-based line or None)
FieldMap = dict[str, tuple[str, "int | None"]]


@lru_cache(maxsize=8192)
def norm_key(label: str) -> str:
    """``'GPU T.Limit Temp'`` -> ``'gpu_t_limit_temp'`` (cached: the same labels repeat per GPU)."""
    return _NON_WORD.sub("_", label.strip().lower()).strip("_")


# GpuState field -> (converter, candidate paths: -q text spelling and XML spelling).
_NUM, _INT, _FLAG, _TEXT = units.number, units.integer, units.yes_no, units.text_value
FIELDS: dict[str, tuple[Callable, tuple[str, ...]]] = {
    "name": (_TEXT, ("product_name",)),
    "uuid": (_TEXT, ("gpu_uuid", "uuid")),
    "serial": (_TEXT, ("serial_number", "serial")),
    "minor_number": (_INT, ("minor_number",)),
    "mig_enabled": (_FLAG, ("mig_mode/current", "mig_mode/current_mig")),
    "fan_pct": (_NUM, ("fan_speed",)),
    "temp_c": (_NUM, ("temperature/gpu_current_temp", "temperature/gpu_temp")),
    "temp_memory_c": (_NUM, ("temperature/memory_current_temp", "temperature/memory_temp")),
    "temp_shutdown_c": (_NUM, ("temperature/gpu_shutdown_temp", "temperature/gpu_temp_max_threshold")),
    "temp_slowdown_c": (_NUM, ("temperature/gpu_slowdown_temp", "temperature/gpu_temp_slow_threshold")),
    "temp_max_operating_c": (
        _NUM, ("temperature/gpu_max_operating_temp", "temperature/gpu_temp_max_gpu_threshold")),
    "temp_tlimit_margin_c": (_NUM, (
        "temperature/gpu_t_limit_temp", "temperature/gpu_current_t_limit_temp", "temperature/gpu_temp_tlimit")),
    "temp_shutdown_tlimit_c": (
        _NUM, ("temperature/gpu_shutdown_t_limit_temp", "temperature/gpu_temp_max_tlimit_threshold")),
    "temp_slowdown_tlimit_c": (
        _NUM, ("temperature/gpu_slowdown_t_limit_temp", "temperature/gpu_temp_slow_tlimit_threshold")),
    "temp_max_operating_tlimit_c": (_NUM, (
        "temperature/gpu_max_operating_t_limit_temp", "temperature/gpu_temp_max_gpu_tlimit_threshold")),
    "sm_clock_mhz": (_NUM, ("clocks/sm", "clocks/sm_clock")),
    "sm_clock_max_mhz": (_NUM, ("max_clocks/sm", "max_clocks/sm_clock")),
    "mem_clock_mhz": (_NUM, ("clocks/memory", "clocks/mem_clock")),
    "power_draw_w": (_NUM, tuple(
        f"{section}/{label}"
        for section in ("gpu_power_readings", "power_readings")
        for label in ("power_draw", "average_power_draw", "instantaneous_power_draw", "instant_power_draw"))),
    "power_limit_w": (_NUM, tuple(
        f"{section}/{label}"
        for section in ("gpu_power_readings", "power_readings", "gpu_power_readings/gpu_ceiling_power_limit")
        for label in ("current_power_limit", "enforced_power_limit", "power_limit"))),
    "util_gpu_pct": (_NUM, ("utilization/gpu", "utilization/gpu_util")),
    "mem_used_mib": (_NUM, ("fb_memory_usage/used",)),
    "mem_total_mib": (_NUM, ("fb_memory_usage/total",)),
    "ecc_mode_enabled": (_FLAG, ("ecc_mode/current", "ecc_mode/current_ecc")),
    "retired_pages_sbe": (
        _INT, ("retired_pages/single_bit_ecc", "retired_pages/multiple_single_bit_retirement/retired_count")),
    "retired_pages_dbe": (
        _INT, ("retired_pages/double_bit_ecc", "retired_pages/double_bit_retirement/retired_count")),
    "remapped_rows_correctable": (
        _INT, ("remapped_rows/correctable_error", "remapped_rows/remapped_row_corr")),
    "remapped_rows_uncorrectable": (
        _INT, ("remapped_rows/uncorrectable_error", "remapped_rows/remapped_row_unc")),
    "remapped_rows_pending": (_FLAG, ("remapped_rows/pending", "remapped_rows/remapped_row_pending")),
    "remapped_rows_failure": (
        _FLAG, ("remapped_rows/remapping_failure_occurred", "remapped_rows/remapped_row_failure")),
    "pcie_gen_current": (_INT, (
        "pci/gpu_link_info/pcie_generation/current", "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
    "pcie_gen_max": (_INT, (
        "pci/gpu_link_info/pcie_generation/max", "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
    "pcie_width_current": (_INT, (
        "pci/gpu_link_info/link_width/current", "pci/pci_gpu_link_info/link_widths/current_link_width")),
    "pcie_width_max": (_INT, (
        "pci/gpu_link_info/link_width/max", "pci/pci_gpu_link_info/link_widths/max_link_width")),
    "pcie_replay_count": (_INT, ("pci/replays_since_reset", "pci/replay_counter")),
}

# Either spelling of "a page is waiting to be retired" (the XML has both tags).
_RETIRED_PENDING = (
    "retired_pages/pending_page_blacklist", "retired_pages/pending_blacklist",
    "retired_pages/pending_page_retirement", "retired_pages/pending_retirement",
)
_REASON_SECTIONS = ("clocks_event_reasons", "clocks_throttle_reasons")
_COUNTER_SECTIONS = ("clocks_event_reasons_counters", "clocks_throttle_reasons_counters")
# -q counters spell the reasons differently from the reasons block.
_COUNTER_ALIASES = {
    "sw_power_capping": "sw_power_cap", "hw_power_braking": "hw_power_brake_slowdown",
    "hw_power_brake": "hw_power_brake_slowdown", "sw_therm_slowdown": "sw_thermal_slowdown",
    "hw_therm_slowdown": "hw_thermal_slowdown",
}
_LOST_WORDS = ("gpu is lost", "unable to determine the device handle", "gpu requires reset")
_LOST = re.compile("|".join(_LOST_WORDS), re.I)


#: How -q/-x print a reading the driver asked for and got no answer to (not N/A: no such sensor).
_UNANSWERED = re.compile(r"\[?(?:Unknown Error|ERR!)\]?", re.I)
#: What any such reading holds: searched once over all of a GPU's values before each is tested.
_UNANSWERED_WORDS = ("unknown error", "err!")
_UNANSWERED_HINT = re.compile(r"Unknown Error|ERR!", re.I)


class _Reader:
    """Converts field-map values, turning conversion errors into problems."""

    def __init__(self, fields: FieldMap, source: str, who: str, problems: list[Problem]):
        self.fields, self.source, self.who, self.problems = fields, source, who, problems

    def get(self, convert: Callable, paths: Iterable[str]):
        """The first of ``paths`` the GPU has, converted (None: none of them, or refused)."""
        path = next((p for p in paths if p in self.fields), None)
        return None if path is None else self.at(convert, path)

    def at(self, convert: Callable, path: str):
        """The field at ``path`` (which the GPU has), converted; None and a problem if refused."""
        value, line = self.fields[path]
        key = (convert, value)
        got = _CONVERTED.get(key, _UNSEEN)
        if got is _UNSEEN:
            try:
                got = convert(value)
            except ValueError as exc:
                got = _Refused(str(exc))
            if convert in _PURE:
                if len(_CONVERTED) >= _MAX_CONVERTED:
                    _CONVERTED.clear()
                _CONVERTED[key] = got
        if type(got) is _Refused:
            self.problems.append(Problem(self.source, f"{self.who}: {path}: {got.why}", line))
            return None
        return got


class _Refused:
    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


#: (converter, cell) -> its value (or why it was refused) for the converters whose values are
#: immutable and depend on the cell only: a -q file repeats the same few cells in every GPU block
#: of every node (~56 conversions a GPU, 8,192 GPUs at 1,024 nodes).
_PURE = frozenset({units.number, units.integer, units.yes_no, units.text_value})
_CONVERTED: dict[tuple[Callable, str], object] = {}
_MAX_CONVERTED = 50_000
_UNSEEN = object()


def _ecc_paths(have: set[str], scope: str, kind: str) -> tuple[str | None, tuple[str, ...]]:
    """Where a GPU's ECC count for ``scope`` (volatile/aggregate), ``kind`` 'sbe' (corrected) or
    'dbe' is: (the old schema's total, or None; the new schema's parts present).

    Old schema: ``single_bit/total``. New schema (Ampere+ drivers): sum of DRAM and SRAM counts.
    """
    base = f"ecc_errors/{scope}"
    total = f"{base}/{'single_bit' if kind == 'sbe' else 'double_bit'}/total"
    if kind == "sbe":
        parts = [f"{base}/dram_correctable", f"{base}/sram_correctable"]
    else:
        sram = (f"{base}/sram_uncorrectable",)
        if f"{base}/sram_uncorrectable" not in have:
            sram = (f"{base}/sram_uncorrectable_parity", f"{base}/sram_uncorrectable_secded")
        parts = [f"{base}/dram_uncorrectable", *sram]
    return (total if total in have else None), tuple(p for p in parts if p in have)


def _ecc(read: _Reader, total: str | None, parts: tuple[str, ...]) -> int | None:
    """The old schema's total when it has a value, else the sum of the parts that have one."""
    count = read.at(units.integer, total) if total is not None else None
    if count is not None:
        return count
    known = [v for v in (read.at(units.integer, p) for p in parts) if v is not None]
    return sum(known) if known else None


@lru_cache(maxsize=4096)
def _clock_path(path: str) -> tuple[str, str] | None:
    """(section, leaf) of a field path inside a clocks event/throttle section, else None."""
    if not path.startswith("clocks_"):
        return None
    section, _, rest = path.partition("/")
    return (section, rest.rsplit("/", 1)[-1]) if rest else None


def _throttle(read: _Reader, state: GpuState, clock_paths: tuple[tuple[str, str, str], ...]) -> None:
    """The active reasons and the reason counters of the GPU's clocks event/throttle sections."""
    for path, section, leaf in clock_paths:
        if section in _REASON_SECTIONS:
            reason = canonical_reason(leaf)
            if reason is None and leaf.endswith("unknown"):
                continue  # old drivers list an "Unknown" reason: it names no cause
            if reason is None:
                read.problems.append(Problem(read.source, f"{read.who}: unknown clocks event reason {path!r}",
                                            read.fields[path][1]))
                continue
            active = read.at(units.yes_no, path)  # None and a problem when refused
            if active and reason not in state.throttle_reasons:
                state.throttle_reasons.append(reason)
        elif section in _COUNTER_SECTIONS:
            leaf = leaf.replace("clocks_event_reasons_counters_", "")
            reason = _COUNTER_ALIASES.get(leaf) or canonical_reason(leaf)
            count = read.at(units.integer, path)
            if reason and count is not None:
                state.throttle_counters_us[reason] = count


@dataclass(frozen=True)
class _Layout:
    """Where one layout of a GPU's field map (its paths, in order) holds what a :class:`GpuState`
    reads: decided once per layout, not per GPU. The GPUs of a driver print the same paths, so the
    8,192 GPU blocks of a 1,024-node incident share a few layouts, and each GPU's fields are then
    read straight from their paths instead of trying every spelling of each of ~40 fields."""

    fields: tuple[tuple[str, Callable, str | None], ...]  # (GpuState field, converter, its path or None)
    retired_pending: tuple[str, ...]  # the spellings of "a page waits for retirement" present
    clock_paths: tuple[tuple[str, str, str], ...]  # (path, section, leaf) inside a clocks reasons section
    ecc: tuple[tuple[str, str | None, tuple[str, ...]], ...]  # (GpuState field, total path, part paths)

    @classmethod
    def of(cls, paths: tuple[str, ...]) -> _Layout:
        have = set(paths)
        return cls(
            fields=tuple((name, convert, next((p for p in candidates if p in have), None))
                         for name, (convert, candidates) in FIELDS.items()),
            retired_pending=tuple(p for p in _RETIRED_PENDING if p in have),
            clock_paths=tuple((p, *where) for p in paths if (where := _clock_path(p)) is not None),
            ecc=tuple((f"ecc_{scope}_{kind}", *_ecc_paths(have, scope, kind))
                      for scope in ("volatile", "aggregate") for kind in ("sbe", "dbe")))


#: Field-map layout (its paths in order) -> :class:`_Layout`; bounded (a file of hand-edited blocks
#: could make each GPU's layout new).
_LAYOUTS: dict[tuple[str, ...], _Layout] = {}
_MAX_LAYOUTS = 512


def _layout(fields: FieldMap) -> _Layout:
    paths = tuple(fields)
    got = _LAYOUTS.get(paths)
    if got is None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        got = _LAYOUTS[paths] = _Layout.of(paths)
    return got


def _holds(values: str, pattern: re.Pattern, words: tuple[str, ...]) -> bool:
    """Whether ``pattern`` (case-insensitive alternatives of ``words``) is found in ``values``.
    ASCII text is tested with ``in`` on its lower case, the same answer at C speed; other text
    runs the pattern (Unicode case folding matches more than ``str.lower``)."""
    if values.isascii():
        low = values.lower()
        return any(word in low for word in words)
    return pattern.search(values) is not None


def state_from_fields(
    fields: FieldMap,
    *,
    source: str,
    index: int | None,
    header_pci: str | None,
    header: dict[str, str | None],
    problems: list[Problem],
    line: int | None = None,
) -> GpuState:
    """Build one :class:`GpuState` from a GPU's field map.

    ``header`` carries the file-level ``driver_version``, ``cuda_version``, ``captured_at`` and
    ``time_note``, copied into the GPU so each record stands on its own.
    """
    who = f"GPU {header_pci or index}"
    read = _Reader(fields, source, who, problems)
    layout = _layout(fields)
    state = GpuState(index=index, source=source, line=line, **header)
    values = "\n".join(value for value, _line in fields.values())
    unanswered = _holds(values, _UNANSWERED_HINT, _UNANSWERED_WORDS)  # else no field needs the check below
    for name, convert, path in layout.fields:
        setattr(state, name, None if path is None else read.at(convert, path))
        if unanswered and _UNANSWERED.fullmatch((fields[path][0] if path is not None else "").strip()):
            state.unreadable.append(name)
    pci_text = read.get(units.text_value, ("pci/bus_id", "pci/pci_bus_id")) or header_pci
    state.pci_bus_id = normalize_pci(pci_text)
    pending = [read.at(units.yes_no, p) for p in layout.retired_pending]
    known = [p for p in pending if p is not None]
    state.retired_pages_pending = any(known) if known else None
    for name, total, parts in layout.ecc:
        setattr(state, name, _ecc(read, total, parts))
    _throttle(read, state, layout.clock_paths)
    if _holds(values, _LOST, _LOST_WORDS):
        path, (value, _line) = next((p, v) for p, v in fields.items() if _LOST.search(v[0]))
        state.lost = True
        state.lost_reason = f"{path}: {value.strip()}"
    return state


HANDLE_ERROR = re.compile(
    r"Unable to determine the device handle for (?:GPU|gpu)\s*(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
    r"\s*:\s*(?P<reason>.+)$"
)


def lost_gpus(text: str, source: str, header: dict[str, str | None]) -> list[GpuState]:
    """GPUs that nvidia-smi could not even open (``Unable to determine the device handle for
    GPU0000:AB:00.0: GPU is lost``): the signature of a GPU that fell off the bus (Xid 79).
    They have no index because nvidia-smi skips them when numbering."""
    lost: list[GpuState] = []
    if "device handle" not in text:
        return lost
    for number, raw in enumerate(text.splitlines(), 1):
        m = HANDLE_ERROR.search(raw)
        if m:
            lost.append(GpuState(
                pci_bus_id=normalize_pci(m["pci"]), lost=True, lost_reason=m["reason"].strip().rstrip("."),
                source=source, line=number, **header))
    return lost


def merge_lost(states: list[GpuState], lost: list[GpuState]) -> list[GpuState]:
    """Mark listed GPUs lost; add the lost ones nvidia-smi printed no block for."""
    by_pci = {s.pci_bus_id: s for s in states if s.pci_bus_id}
    for gpu in lost:
        known = by_pci.get(gpu.pci_bus_id)
        if known is not None:
            known.lost, known.lost_reason = True, gpu.lost_reason
        else:
            states.append(gpu)
            by_pci[gpu.pci_bus_id] = gpu
    return states


def header_fields(timestamp: str | None, driver: str | None, cuda: str | None, tz: str | None) -> dict:
    captured_at, note = units.parse_time(timestamp, tz)

    def version(text: str | None) -> str | None:  # 610+: "610.62 [Deprecated; ... Use KMD Version instead]"
        value = units.text_value(text)
        return value.split()[0] if value else None

    return {
        "driver_version": version(driver),
        "cuda_version": version(cuda),
        "captured_at": captured_at,
        "time_note": note,
    }
