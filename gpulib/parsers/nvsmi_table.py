"""The default ``nvidia-smi`` table (what engineers paste into tickets), incl. its process table.

Each GPU takes two or three rows of the box::

    |   0  NVIDIA A40                     On  |   00000000:4F:00.0 Off |                    0 |
    |  0%   29C    P8             23W /  300W |       1MiB /  46068MiB |      0%      Default |

Columns are read by position inside each ``|`` cell, so old (<= 525, narrow) and new layouts both
work. ``ERR!`` is a reading the driver could not get: that field is None. When the temperature,
power and utilization all read ``ERR!`` the GPU is marked ``lost``; that is how the table shows a
GPU that fell off the bus while nvidia-smi could still enumerate it. Long names are cut by
nvidia-smi itself (``NVIDIA GeForce ...``); they are kept as printed.

When nvidia-smi could not run at all the file holds its error message instead of a table
(``Unable to determine the device handle ...: GPU is lost``, ``NVIDIA-SMI has failed because it
couldn't communicate with the NVIDIA driver``, ``No devices were found``): lost GPUs become lost
records, the other messages become problems that quote the tool.
"""

from __future__ import annotations

import re

from gpulib.identity import normalize_pci
from gpulib.parsers import units
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.gpu_records import GpuProcess, GpuState
from gpulib.parsers.nvsmi_common import HANDLE_ERROR, header_fields, lost_gpus, merge_lost

KIND = "nvidia_smi_table"

_BANNER = re.compile(
    r"\|\s*NVIDIA-SMI\s+(?P<smi>\S+)\s+(?:Driver|KMD) Version:\s*(?P<driver>\S+)"
    r"(?:\s+CUDA(?: UMD)? Version:\s*(?P<cuda>\S+))?"  # drivers before 410 print no CUDA version
)
_PCI = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_PROCESS = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?:(?P<gi>\S+)\s+(?P<ci>\S+)\s+)?(?P<pid>\d+)\s+(?P<type>C\+G|C|G|M|M\+C)\s+"
    r"(?P<name>.*?)\s+(?P<mem>\d+MiB|N/A)\s*\|$"
)
_TOOL_FAILURES = (
    "NVIDIA-SMI has failed",
    "No devices were found",
    "Failed to initialize NVML",
    "couldn't communicate with the NVIDIA driver",
)


def looks_like(head: str) -> bool:
    """The table banner, or a bare nvidia-smi error message (not inside -q text or XML)."""
    if _BANNER.search(head):
        return True
    if "NVSMI LOG" in head or "<nvidia_smi_log" in head:
        return False
    stripped = head.strip()
    return bool(HANDLE_ERROR.search(head)) or any(stripped.startswith(msg) for msg in _TOOL_FAILURES)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _safe(convert, value, problems: list[Problem], source: str, where: str, number: int):
    try:
        return convert(value)
    except ValueError as exc:
        problems.append(Problem(source, f"{where}: {exc}", number))
        return None


def _gpu_rows(lines: list[str], header: dict, source: str, problems: list[Problem]) -> list[GpuState]:
    states: list[GpuState] = []
    for i, line in enumerate(lines):
        cells = _cells(line)
        if len(cells) < 3 or not line.startswith("|"):
            continue
        first = cells[0].split()
        second = cells[1].split()
        if not (first and first[0].isdigit() and second and _PCI.match(second[0])):
            continue
        who = f"GPU {first[0]}"
        state = GpuState(index=int(first[0]), name=" ".join(first[1:-1]) or None,
                         pci_bus_id=normalize_pci(second[0]), source=source, line=i + 1, **header)
        if cells[2] in ("Off", "On"):  # no count: ECC off, or MIG (counts are per instance)
            state.ecc_mode_enabled = cells[2] == "On"
        else:
            state.ecc_volatile_dbe = _safe(units.integer, cells[2], problems, source, f"{who} ECC", i + 1)
        if i + 1 < len(lines):
            _readings(state, _cells(lines[i + 1]), problems, source, i + 2)
        if i + 2 < len(lines):
            mig = _cells(lines[i + 2])
            if len(mig) >= 3 and not mig[0] and mig[2] and not lines[i + 2].startswith("+"):
                state.mig_enabled = _safe(units.yes_no, mig[2], problems, source, f"{who} MIG M.", i + 3)
        states.append(state)
    return states


def _readings(state: GpuState, cells: list[str], problems: list[Problem], source: str, number: int) -> None:
    """``Fan Temp Perf Pwr:Usage/Cap | Memory-Usage | GPU-Util Compute M.``"""
    if len(cells) < 3:
        problems.append(Problem(source, f"GPU {state.index}: readings row missing (table cut short?)", number))
        return
    who = f"GPU {state.index}"
    left = cells[0].split()
    errors = 0
    if len(left) >= 3:
        state.fan_pct = _safe(units.number, left[0], problems, source, f"{who} fan", number)
        state.temp_c = _safe(units.number, left[1], problems, source, f"{who} temp", number)
        power = " ".join(left[3:]).split("/")
        state.power_draw_w = _safe(units.number, power[0], problems, source, f"{who} power", number)
        state.unreadable += [name for name, cell in (("fan_pct", left[0]), ("temp_c", left[1]),
                                                     ("power_draw_w", power[0].strip())) if cell == "ERR!"]
        errors += left[1] == "ERR!"
        errors += power[0].strip() == "ERR!"
        if len(power) > 1:
            state.power_limit_w = _safe(units.number, power[1], problems, source, f"{who} power cap", number)
    memory = cells[1].split("/")
    state.mem_used_mib = _safe(units.number, memory[0], problems, source, f"{who} memory", number)
    if len(memory) > 1:
        state.mem_total_mib = _safe(units.number, memory[1], problems, source, f"{who} memory", number)
    util = cells[2].split()
    if util:
        errors += util[0] == "ERR!"
        state.unreadable += ["util_gpu_pct"] if util[0] == "ERR!" else []
        state.util_gpu_pct = _safe(units.number, util[0], problems, source, f"{who} util", number)
    if errors >= 3:
        state.lost, state.lost_reason = True, "ERR! in temperature, power and utilization"


def _processes(lines: list[str], states: list[GpuState]) -> None:
    by_index = {s.index: s for s in states}
    in_table = False
    for line in lines:
        if "Processes:" in line:
            in_table = True
            continue
        m = _PROCESS.match(line.rstrip()) if in_table else None
        if not m:
            continue
        gpu = by_index.get(int(m["gpu"]))
        proc = GpuProcess(pid=int(m["pid"]), name=m["name"].strip() or None,
                          used_mib=units.number(m["mem"]), type=m["type"], gpu_index=int(m["gpu"]))
        if gpu is not None:
            proc.pci_bus_id, proc.uuid = gpu.pci_bus_id, gpu.uuid
            gpu.processes.append(proc)


def parse(text: str, source: str = "<text>", *, tz: str | None = None) -> ParseResult[GpuState]:
    """Parse the default ``nvidia-smi`` output into GpuStates (with processes); never raises."""
    result: ParseResult[GpuState] = ParseResult(KIND)
    if not text.strip():
        result.problems.append(Problem(source, "empty file: no nvidia-smi output"))
        return result
    lines = [line.rstrip() for line in text.splitlines()]
    banner = next((m for m in map(_BANNER.search, lines) if m), None)
    stamp = next((line for line in lines[:3] if units.parse_time(line)[0]), None)
    header = header_fields(stamp, banner and banner["driver"], banner and banner["cuda"], tz)
    states = _gpu_rows(lines, header, source, result.problems)
    _processes(lines, states)
    result.records = merge_lost(states, lost_gpus(text, source, header))
    for number, line in enumerate(lines, 1):
        if any(msg in line for msg in _TOOL_FAILURES):
            result.problems.append(Problem(source, f"nvidia-smi failed: {line.strip()}", number))
    if not result.records and not result.problems:
        why = "table has no GPU rows" if banner else "not nvidia-smi table output (no NVIDIA-SMI banner)"
        result.problems.append(Problem(source, why))
    return result
