"""Message sizes, data types and element counts exactly as nccl-tests computes them.

Why exact: an engineer compares our table with an ``all_reduce_perf`` run from last month. The
rows only line up if the sweep (``-b/-e/-f/-i``), the per-rank element counts (rounded down to
16-byte multiples for the split collectives) and the printed ``size`` column are the same.
Sizes on the command line are *binary* (``1K`` = 1024) while bandwidth is decimal (GB = 1e9).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.errors import InputError

_SIZE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[kKmMgGtT])?(?:i?[bB])?\s*$")
_UNITS = {None: 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str | int) -> int:
    """``"64K"`` -> 65536, ``"1M"`` -> 1048576, ``"8"`` -> 8 (nccl-tests ``parsesize``, binary units).

    >>> parse_size("1K"), parse_size("256M"), parse_size("16GiB")
    (1024, 268435456, 17179869184)
    """
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise InputError(f"cannot read size {text!r}", hint="use a byte count with an optional K/M/G suffix, e.g. 64K or 256M")
    return int(float(m["num"]) * _UNITS[m["unit"].lower() if m["unit"] else None])


def format_size(n_bytes: int) -> str:
    """Short binary spelling for messages: 1048576 -> ``1 MiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{n_bytes // scale} {unit}"
    return f"{n_bytes} B"


def size_sweep(min_bytes: int, max_bytes: int, step_factor: int = 1, step_bytes: int = 1 << 20) -> list[int]:
    """The sizes nccl-tests visits: multiply by ``step_factor`` when it is > 1, else add ``step_bytes``."""
    if min_bytes <= 0 or max_bytes < min_bytes:
        raise InputError(f"bad size range: minBytes {min_bytes} maxBytes {max_bytes}", hint="need 0 < -b <= -e")
    if step_factor <= 1 and step_bytes <= 0:
        raise InputError("step is zero: the sweep would never end", hint="give -f 2 or -i 1M")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size = size * step_factor if step_factor > 1 else size + step_bytes
    return sizes


@dataclass(frozen=True)
class DType:
    """An nccl-tests data type name, its size and the torch dtype attribute that carries it."""

    name: str
    nbytes: int
    torch_name: str
    is_float: bool


DTYPES = {
    d.name: d
    for d in (
        DType("int8", 1, "int8", False),
        DType("uint8", 1, "uint8", False),
        DType("int32", 4, "int32", False),
        DType("uint32", 4, "uint32", False),
        DType("int64", 8, "int64", False),
        DType("uint64", 8, "uint64", False),
        DType("half", 2, "float16", True),
        DType("float", 4, "float32", True),
        DType("double", 8, "float64", True),
        DType("bfloat16", 2, "bfloat16", True),
    )
}
_ALIASES = {"float32": "float", "fp32": "float", "float16": "half", "fp16": "half", "bf16": "bfloat16",
            "float64": "double", "fp64": "double", "int": "int32", "char": "int8"}


def dtype(name: str) -> DType:
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in DTYPES:
        raise InputError(f"unknown data type {name!r}", hint=f"one of {', '.join(DTYPES)}")
    return DTYPES[key]


@dataclass(frozen=True)
class Counts:
    """Element counts for one row. ``count`` is the printed (per-rank parameter) count,
    ``size_bytes`` the printed size = max(send, recv) bytes, which is also the S of algbw = S/t."""

    count: int
    send_count: int
    recv_count: int
    size_bytes: int


#: Collectives whose per-rank share is ``size / nranks`` (nccl-tests ``getCollByteCount``).
SPLIT_COLLECTIVES = ("all_gather", "reduce_scatter", "alltoall")


def counts(collective: str, size_bytes: int, elt_bytes: int, nranks: int) -> Counts:
    """nccl-tests' ``getCollByteCount``: the split collectives round the per-rank count down to a
    multiple of 16 bytes (``(count/nranks) & -(16/eltSize)``), so a printed size can be smaller
    than the requested one, and zero for tiny messages on many ranks."""
    total = size_bytes // elt_bytes
    if collective in SPLIT_COLLECTIVES:
        align = max(1, 16 // elt_bytes)
        base = (total // nranks) // align * align
        if collective == "all_gather":
            send, recv = base, base * nranks
        elif collective == "reduce_scatter":
            send, recv = base * nranks, base
        else:  # alltoall
            send = recv = base * nranks
        return Counts(base, send, recv, max(send, recv) * elt_bytes)
    return Counts(total, total, total, total * elt_bytes)
