"""``nvml/samples.csv`` of an evidence bundle (``gpulib collect --sample-seconds N``) read back
into :class:`~gpulib.parsers.gpu_records.GpuSample` rows.

Why: one snapshot shows a GPU at one moment; the 1 Hz series shows *when* its SM clock fell
and which clocks-event reasons were active, which is when its rank began to straggle. The
collector writes the :class:`GpuSample` field names as the header (:data:`COLUMNS`); a row of a
GPU NVML could not read carries only time and index, and a capture cut short may end in half a
row - both are read as far as they go.
"""

from __future__ import annotations

import csv

from gpulib.identity import normalize_pci
from gpulib.nvml_fields import SAMPLE_COLUMNS, decode_throttle_bitmask
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.gpu_records import GpuSample

KIND = "nvml_samples"
COLUMNS = SAMPLE_COLUMNS
_NUMBERS = ("temp_c", "sm_clock_mhz", "sm_clock_max_mhz", "power_draw_w", "util_gpu_pct", "mem_used_mib")


def looks_like(head: str) -> bool:
    return head.lstrip().startswith(",".join(COLUMNS[:4]))


def _number(cell: str | None) -> float | None:
    if cell in (None, ""):
        return None
    return float(cell)


def parse(text: str, source: str = "<text>") -> ParseResult[GpuSample]:
    result: ParseResult[GpuSample] = ParseResult(KIND)
    try:
        table = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        result.problems.append(Problem(source, f"not a CSV file: {exc}"))
        return result
    rows = iter(table)
    header = next(rows, None)
    if not header or header[:4] != list(COLUMNS[:4]):
        result.problems.append(Problem(source, "not an NVML samples CSV (header "
                                               f"{','.join(COLUMNS[:4])},... expected)", 1))
        return result
    for number, row in enumerate(rows, 2):
        if not any(row):
            continue
        cells = dict(zip(header, row, strict=False))  # a row cut short keeps its first cells
        try:
            mask_text = cells.get("throttle_bitmask") or ""
            mask = int(mask_text, 0) if mask_text else None
            sample = GpuSample(cells.get("time_utc") or None,
                               index=int(cells["index"]) if cells.get("index") else None,
                               pci_bus_id=normalize_pci(cells.get("pci_bus_id") or None),
                               throttle_bitmask=mask, line=number,
                               **{name: _number(cells.get(name)) for name in _NUMBERS})
        except ValueError as exc:
            result.problems.append(Problem(source, f"unreadable row ({exc})", number))
            continue
        reasons = cells.get("throttle_reasons")
        sample.throttle_reasons = (reasons.split("|") if reasons else
                                   decode_throttle_bitmask(mask) if mask is not None else [])
        result.records.append(sample)
    if not result.records:
        result.problems.append(Problem(source, "no sample rows (the sampling was cut before its first tick?)"))
    return result
