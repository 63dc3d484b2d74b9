"""``nvidia-smi dmon`` (per-device monitor) output -> :class:`GpuSample` rows.

Two ``#`` header lines name the columns and their units; the set of columns depends on ``-s``
and on the driver (old ``gpu pwr gtemp mtemp sm mem enc dec mclk pclk pviol tviol fb bar1 sbecc
dbecc pci rxpci txpci``; 590+ adds ``jpg ofa ccpm``), and ``-o DT`` prepends ``Date Time``
(``20250422 10:58:30``). So columns are read by their header name, never by position; ``-`` is
an unsupported reading (None). dmon prints the header again every screenful, which is skipped.

dmon has no throttle-reason column (only ``pviol``/``tviol`` percentages, not read here), so a
thermal-throttling story needs the ``--query-gpu`` CSV or NVML sampling; dmon still shows the
temperature climbing and the clock falling. ``pmon`` output (per process, has a ``pid`` column)
is not dmon and is not claimed.
"""

from __future__ import annotations

from gpulib.parsers import units
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.gpu_records import GpuSample

KIND = "nvidia_smi_dmon"

# dmon column -> (GpuSample field, converter)
_COLUMNS = {
    "gpu": ("index", units.integer),
    "pwr": ("power_draw_w", units.number),
    "gtemp": ("temp_c", units.number),
    "mtemp": ("temp_memory_c", units.number),
    "sm": ("util_gpu_pct", units.number),
    "fb": ("mem_used_mib", units.number),
    "mclk": ("mem_clock_mhz", units.number),
    "pclk": ("sm_clock_mhz", units.number),
}


def _header_names(line: str) -> list[str] | None:
    """``# gpu pwr gtemp`` or ``#Date Time gpu pwr`` -> lower-case names; None for other lines."""
    if not line.startswith("#"):
        return None
    names = line.lstrip("#").lower().split()
    if "gpu" not in names or "pid" in names:
        return None
    return names if set(names) & set(_COLUMNS) - {"gpu"} else None


def looks_like(head: str) -> bool:
    first = next((line for line in head.splitlines() if line.strip()), "")
    return _header_names(first.strip()) is not None


def parse(text: str, source: str = "<text>", *, tz: str | None = None) -> ParseResult[GpuSample]:
    """Parse dmon output into one GpuSample per GPU per interval (never raises)."""
    result: ParseResult[GpuSample] = ParseResult(KIND)
    names: list[str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        header = _header_names(line)
        if header is not None:
            names = header
            continue
        if line.startswith("#") or names is None:
            continue  # units line, or text before the first header
        cells = line.split()
        if len(cells) != len(names):
            result.problems.append(Problem(source, f"row has {len(cells)} values, header has {len(names)}", number))
            continue
        row = dict(zip(names, cells, strict=True))
        sample = GpuSample(time_utc=None, line=number)
        if "date" in row and "time" in row:
            sample.time_utc, sample.time_note = units.parse_time(f"{row['date']} {row['time']}", tz)
        for column, (field, convert) in _COLUMNS.items():
            if column in row:
                try:
                    setattr(sample, field, convert(row[column]))
                except ValueError as exc:
                    result.problems.append(Problem(source, f"column {column!r}: {exc}", number))
        result.records.append(sample)
    if names is None:
        result.problems.append(Problem(source, "not nvidia-smi dmon output (no '# gpu ...' header line)"))
    elif not result.records:
        result.problems.append(Problem(source, "dmon header but no samples"))
    return result
