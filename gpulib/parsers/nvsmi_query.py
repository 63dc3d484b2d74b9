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
    if not (head.startswith("GPU ") or "\nGPU " in head):
        return False  # no line starts a GPU block (tested first: the anchored search tries every line)
    return bool(re.search(r"^GPU [0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$", head, re.M)) and bool(
        re.search(r"^\s{4}\S[^:\n]*?\s+: ", head, re.M)
    )


#: (parent path, label as printed) -> field path: the same few hundred labels repeat in every GPU
#: block of every file (bounded by the labels nvidia-smi prints; cleared if a file floods it).
_PATHS: dict[tuple[str, str], str] = {}
_MAX_PATHS = 20_000
#: A field line read in the sections open before it -> (the sections open after it, its path, its
#: value or None, whether it is a process's field). Most lines of a ``-q`` file are the same in every GPU block of every node (800
#: lines a node, ~2 % of them distinct over 1,024 nodes), so each is taken apart once. The open
#: sections (``((indent, path), ...)``) are numbered in :data:`_SECTIONS` (their position in it).
_STEPS: dict[tuple[int, str], tuple[int, str, str | None, bool]] = {}
_SECTIONS: list[tuple[tuple[int, str], ...]] = [()]
_SECTION_IDS: dict[tuple[tuple[int, str], ...], int] = {(): 0}
_MAX_STEPS = 200_000


class _Block:
    def __init__(self, pci: str, line: int, index: int, header: dict):
        self.pci, self.line, self.index, self.header = pci, line, index, dict(header)
        self.fields: FieldMap = {}
        self.processes: list[GpuProcess] = []

    def process_field(self, path: str, value: str) -> None:
        """Processes repeat the same labels once per process: collect them in order."""
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


def _step(open_id: int, line: str) -> tuple[int, str, str | None, bool]:
    """Read one field line (tabs expanded, trailing blanks removed) of a GPU block."""
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    key, sep, value = body.partition(":")  # labels never contain ':'; values may (bus ids, times)
    key = key.rstrip()
    sections = _SECTIONS[open_id]
    depth = len(sections)
    while depth and sections[depth - 1][0] >= indent:
        depth -= 1
    parent = sections[depth - 1][1] if depth else ""
    path = _PATHS.get((parent, key))
    if path is None:
        name = norm_key(key)
        path = _PATHS[parent, key] = f"{parent}/{name}" if parent else name
    after = (*sections[:depth], (indent, path))  # each section carries its full path
    after_id = _SECTION_IDS.get(after)
    if after_id is None:
        after_id = _SECTION_IDS[after] = len(_SECTIONS)
        _SECTIONS.append(after)
    return after_id, path, value.strip() if sep else None, path.startswith("processes/")


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
    if len(_STEPS) > _MAX_STEPS:
        _STEPS.clear()
        del _SECTIONS[1:]
        _SECTION_IDS.clear()
        _SECTION_IDS[()] = 0
    steps = _STEPS
    open_id = 0  # the sections open in the current GPU block (see _STEPS)
    fields: FieldMap = {}
    headers: dict[tuple, dict] = {}  # the file header as said -> its fields (read once, not per GPU block)
    for number, raw in enumerate(text.splitlines(), 1):
        # the bulk: a field line of a GPU block, most of them seen before (a field line is never
        # blank, a banner or a block header, so a line found here is one)
        step = steps.get((open_id, raw)) if block is not None else None
        if step is None:
            line = (raw.expandtabs(4) if "\t" in raw else raw).rstrip()
            if not line:
                continue
            if _LOG_MARK in line:  # a new snapshot (capture files hold idle and load runs)
                seen_log, block, raw_header, index = True, None, {}, 0
                continue
            if block is not None and line[0].isspace():
                step = steps[open_id, raw] = _step(open_id, line)
        if step is not None:
            open_id, path, value, of_process = step
            if value is not None:
                if path not in fields:
                    fields[path] = (value, number)
                if of_process:
                    block.process_field(path, value)
            continue
        m = _GPU_HEADER.match(line) if line.startswith("GPU ") else None
        if m:
            said = (raw_header.get("timestamp"), raw_header.get("kmd_version") or raw_header.get("driver_version"),
                    raw_header.get("cuda_umd_version") or raw_header.get("cuda_version"))
            header = headers.get(said) or headers.setdefault(said, header_fields(*said, tz))  # each block copies it
            block = _Block(m["pci"], number, index, header)
            blocks.append(block)
            open_id, fields = 0, block.fields
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
