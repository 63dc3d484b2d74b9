"""``nvidia-smi -q`` / ``-a`` text (also ``-q -d PAGE_RETIREMENT,ECC,...`` partial output).

The file is a header (``Timestamp``, ``Driver Version``, ``CUDA Version``, ``Attached GPUs``)
followed by one indented block per GPU, keyed ``GPU 00000000:19:00.0``, in PCI-bus order, which
is also nvidia-smi's index order (so the n-th block is GPU index n). A GPU nvidia-smi cannot open
prints ``Unable to determine the device handle for GPU...: GPU is lost`` instead of a block; it
is returned as a ``lost`` GpuState so the culprit of an Xid 79 is never silently missing.

Truncated or hand-edited files still yield every GPU block that is there, with problems saying
what is missing (fewer blocks than ``Attached GPUs``, renamed fields).
"""

from __future__ import annotations

import re

from gpulib.parsers import units
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.gpu_records import GpuProcess, GpuState
from gpulib.parsers.nvsmi_common import (
    HANDLE_ERROR,
    FieldMap,
    header_fields,
    lost_gpus,
    merge_lost,
    norm_key,
    state_from_fields,
)

KIND = "nvidia_smi_q"

_LOG_MARK = "==============NVSMI LOG=============="
_GPU_HEADER = re.compile(r"^GPU (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def looks_like(head: str) -> bool:
    """The ``NVSMI LOG`` banner, or GPU blocks with ``-q`` labels (a banner-less fragment)."""
    if _LOG_MARK in head:
        return True
    return bool(re.search(r"^GPU [0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$", head, re.M)) and bool(
        re.search(r"^\s{4}\S[^:\n]*?\s+: ", head, re.M)
    )


#: (parent path, label as printed) -> field path: the same few hundred labels repeat in every GPU
#: block of every file (bounded by the labels nvidia-smi prints; cleared if a file floods it).
_PATHS: dict[tuple[str, str], str] = {}
_MAX_PATHS = 20_000


class _Block:
    def __init__(self, pci: str, line: int, index: int, header: dict):
        self.pci, self.line, self.index, self.header = pci, line, index, dict(header)
        self.fields: FieldMap = {}
        self.processes: list[GpuProcess] = []
        self.stack: list[tuple[int, str]] = []

    def add(self, indent: int, key: str, value: str | None, number: int) -> None:
        stack = self.stack
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        path = _PATHS.get((parent, key))
        if path is None:
            name = norm_key(key)
            path = _PATHS[parent, key] = f"{parent}/{name}" if parent else name
        stack.append((indent, path))  # each entry carries its full path
        if value is None:
            return
        if path not in self.fields:
            self.fields[path] = (value, number)
        # Processes repeat the same labels once per process: collect them in order.
        if path == "processes/process_id":
            self.processes.append(GpuProcess(pid=_safe(units.integer, value)))
        elif path.startswith("processes/process_id/") and self.processes:
            proc = self.processes[-1]
            leaf = path.rsplit("/", 1)[-1]
            if leaf == "name":
                proc.name = units.text_value(value)
            elif leaf == "type":
                proc.type = units.text_value(value)
            elif leaf == "used_gpu_memory":
                proc.used_mib = _safe(units.number, value)


def _safe(convert, value):
    try:
        return convert(value)
    except ValueError:
        return None


def parse(text: str, source: str = "<text>", *, tz: str | None = None) -> ParseResult[GpuState]:
    """Parse ``nvidia-smi -q`` text into one :class:`GpuState` per GPU (never raises).

    ``tz``: the zone the machine's clock was in (the bundle's ``timezone``); with it the
    ``Timestamp`` becomes UTC, without it it stays naive and ``time_note`` says so.
    """
    result: ParseResult[GpuState] = ParseResult(KIND)
    if not text.strip():
        result.problems.append(Problem(source, "empty file: no nvidia-smi -q output"))
        return result
    raw_header: dict[str, str] = {}
    header = header_fields(None, None, None, tz)
    blocks: list[_Block] = []
    block: _Block | None = None
    attached: list[tuple[int, int]] = []  # (claimed GPU count, blocks before it)
    seen_log = False
    index = 0  # nvidia-smi numbers GPUs in block order, restarting with each NVSMI LOG
    if len(_PATHS) > _MAX_PATHS:
        _PATHS.clear()
    for number, raw in enumerate(text.splitlines(), 1):
        line = (raw.expandtabs(4) if "\t" in raw else raw).rstrip()
        if not line:
            continue
        if _LOG_MARK in line:  # a new snapshot (capture files hold idle and load runs)
            seen_log, block, raw_header, index = True, None, {}, 0
            continue
        m = _GPU_HEADER.match(line) if line.startswith("GPU ") else None
        if m:
            header = header_fields(raw_header.get("timestamp"),
                                   raw_header.get("kmd_version") or raw_header.get("driver_version"),
                                   raw_header.get("cuda_umd_version") or raw_header.get("cuda_version"), tz)
            block = _Block(m["pci"], number, index, header)
            blocks.append(block)
            index += 1
            continue
        if not line[0].isspace():
            block = None  # a column-0 line ends the block (header lines, capture separators)
            key, sep, value = line.partition(":")
            if sep and not HANDLE_ERROR.search(line):
                raw_header[norm_key(key)] = value.strip()
                if norm_key(key) == "attached_gpus":
                    count = units.integer(value) if value.strip().isdigit() else None
                    if count is not None:
                        attached.append((count, len(blocks)))
            continue
        if block is None:
            continue
        body = line.lstrip(" ")
        key, sep, value = body.partition(":")  # labels never contain ':'; values may (bus ids, times)
        block.add(len(line) - len(body), key.rstrip(), value.strip() if sep else None, number)
    states = []
    for b in blocks:
        state = state_from_fields(b.fields, source=source, index=b.index, header_pci=b.pci,
                                  header=b.header, problems=result.problems, line=b.line)
        state.processes = b.processes
        for proc in state.processes:
            proc.gpu_index, proc.pci_bus_id, proc.uuid = state.index, state.pci_bus_id, state.uuid
        states.append(state)
    lost = lost_gpus(text, source, header)
    result.records = merge_lost(states, lost)
    for i, (count, before) in enumerate(attached):
        after = attached[i + 1][1] if i + 1 < len(attached) else len(blocks)
        if after - before + len(lost) < count:
            result.problems.append(Problem(
                source, f"header says {count} GPUs attached but only {after - before} GPU blocks found "
                        "(file truncated, or GPUs nvidia-smi could not read)"))
    if not result.records:
        why = "no GPU blocks" if seen_log else "not nvidia-smi -q output (no NVSMI LOG banner, no GPU blocks)"
        result.problems.append(Problem(source, why))
    return result
