"""safetensors files: 8-byte little-endian header length N, N bytes of JSON, then the tensor bytes.

The format has no checksum, but truncation is always detectable: offsets must tile the buffer
from 0 with no gap or overlap, each tensor must hold ``numel x bits / 8`` bytes, and
``8 + N + last_end`` must equal the file size (the same checks the Rust reader makes; its
messages are quoted so an operator can match them to the error they saw).
"""

from __future__ import annotations

import json
import os
import struct

from gpulib.checkpoints.records import FileReport, TensorRecord

MAX_HEADER_BYTES = 100_000_000
MAX_NAMED = 10  # bad entries named one by one; the rest are counted
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "U16": 16,
    "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "F64": 64, "I64": 64, "U64": 64,
    "C64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}


def looks_like_safetensors(head: bytes, name: str) -> bool:
    """Content first (a plausible u64 length then '{'); the file name only for files too short
    to carry a header at all."""
    if len(head) < 9:
        return name.endswith(".safetensors")
    n = struct.unpack("<Q", head[:8])[0]
    return 0 < n <= MAX_HEADER_BYTES and head[8:9] == b"{"


def _whole(v) -> bool:
    """A JSON number the reader takes as ``usize``: an int, not a bool, not negative."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64


def _entry(info) -> tuple[str | None, str, list, int, int]:
    """(why the entry is not ``{dtype, shape: [usize], data_offsets: [usize, usize]}``, or None; the
    fields). The reader deserialises these types strictly: ``["a", "b"]`` or ``[0, null]`` fail there."""
    if not isinstance(info, dict):
        return f"a JSON {type(info).__name__}, not an object", "", [], 0, 0
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        return f"unknown dtype {str(dtype)[:40]!r}", "", [], 0, 0
    if not isinstance(shape, list) or not all(_whole(d) for d in shape):
        return "shape is not a list of whole numbers", "", [], 0, 0
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_whole(o) for o in offsets):
        return "data_offsets is not two whole numbers", "", [], 0, 0
    if offsets[0] > offsets[1]:
        return f"data_offsets {offsets[0]:,} > {offsets[1]:,}", "", [], 0, 0
    return None, dtype, shape, offsets[0], offsets[1]


def inspect_safetensors(report: FileReport, fd: int, size: int) -> None:
    report.format = "safetensors"
    if size < 8:
        report.add("incomplete", f"header too small: {size} bytes (Error while deserializing header: header too small)")
        return
    n = struct.unpack("<Q", os.pread(fd, 8, 0))[0]
    if n > MAX_HEADER_BYTES:
        report.add("corrupt", f"header length {n:,} exceeds {MAX_HEADER_BYTES:,} (HeaderTooLarge)")
        return
    if 8 + n > size:
        report.add("incomplete", f"file ends inside the {n:,}-byte header (Error while deserializing header: invalid header "
                                 f"length)")
        return
    try:
        header = json.loads(os.pread(fd, n, 8).decode("utf-8"))
    except RecursionError:
        report.add("corrupt", "header is JSON nested too deeply (the safetensors reader refuses it: "
                              "InvalidHeaderDeserialization)")
        return
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, and ints over 4,300 digits
        report.add("corrupt", f"header is not valid JSON: {str(exc)[:200]} (InvalidHeaderDeserialization)")
        return
    if not isinstance(header, dict):
        report.add("corrupt", "header is not a JSON object (InvalidHeaderDeserialization)")
        return
    meta = header.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        report.add("corrupt", "__metadata__ is not an object of strings (InvalidHeaderDeserialization)")
    if isinstance(meta, dict):
        report.meta["metadata"] = {str(k)[:200]: str(v)[:200] for k, v in list(meta.items())[:50]}
    spans, bad = [], 0
    for name, info in header.items():
        problem, dtype, shape, begin, end = _entry(info)
        if problem:
            bad += 1
            if bad <= MAX_NAMED:
                report.add("corrupt", f"tensor {name[:200]}: bad header entry ({problem}; InvalidHeaderDeserialization)")
            continue
        numel = 1
        for d in shape:
            numel *= d
        want = (numel * DTYPE_BITS[dtype] + 7) // 8
        if end - begin != want:
            report.add("corrupt", f"tensor {name[:200]}: {end - begin:,} bytes for {dtype}{shape}, expected {want:,} "
                                  f"(TensorInvalidInfo)")
        spans.append((begin, end, name))
        report.tensors.append(TensorRecord(name, dtype, shape, want))
    if bad > MAX_NAMED:
        report.add("corrupt", f"{bad - MAX_NAMED:,} more bad header entries")
    spans.sort()
    cursor, gaps = 0, 0
    for begin, end, name in spans:
        if begin != cursor:
            gaps += 1
        if begin != cursor and gaps <= MAX_NAMED:
            report.add("corrupt", f"tensor {name}: offsets {begin:,}-{end:,} leave a gap or overlap at {cursor:,} "
                                  f"(InvalidOffset)")
        cursor = max(cursor, end)
    expected = 8 + n + cursor
    if expected > size:
        report.add("incomplete", f"truncated: the header needs {expected:,} bytes, the file has {size:,} "
                   "(Error while deserializing header: incomplete metadata, file not fully covered)")
    elif expected < size:
        report.add("corrupt", f"{size - expected:,} bytes after the last tensor (file not fully covered by the header)")
    report.meta["tensor_bytes"] = cursor
