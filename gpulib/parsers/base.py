"""Shared shapes of every parser: records plus problems, and safe reading of files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

T = TypeVar("T")

#: Files larger than this are read only up to the cap by :func:`read_text` (logs can be GBs).
DEFAULT_READ_CAP_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Problem:
    """Something a parser could not read. ``source`` names the file, ``line`` is 1-based."""

    source: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.message}"


@dataclass
class ParseResult(Generic[T]):
    """What a parser read (``records``) and what it could not (``problems``)."""

    kind: str
    records: list[T] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.records) and not self.problems


#: Bytes that count as text: printable ASCII, tab, newlines, ESC (terminal colours) and any byte >= 128 (UTF-8).
_TEXT_BYTES = bytes([*range(32, 127), 9, 10, 13, 27, *range(128, 256)])


def looks_binary(data: bytes) -> bool:
    """True when a chunk is not text: NUL bytes, or mostly non-printable bytes."""
    if not data:
        return False
    if b"\x00" in data[:8192]:
        return True
    sample = data[:8192]
    printable = len(sample) - len(sample.translate(None, _TEXT_BYTES))  # C speed, no per-byte Python loop
    return printable / len(sample) < 0.85


def read_text(path: str | Path, cap_bytes: int = DEFAULT_READ_CAP_BYTES) -> tuple[str, list[Problem]]:
    """Read a file as text without ever raising.

    Undecodable bytes become U+FFFD; binary junk, a missing file or a refused permission come
    back as a :class:`Problem` naming the file, with empty text.
    """
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(cap_bytes + 1)
    except PermissionError:
        return "", [Problem(source, "permission denied (run as root or copy the file readable)")]
    except FileNotFoundError:
        return "", [Problem(source, "file not found")]
    except IsADirectoryError:
        return "", [Problem(source, "is a directory, not a file")]
    except OSError as exc:
        return "", [Problem(source, f"cannot read: {exc.strerror or exc}")]
    problems = []
    if len(data) > cap_bytes:
        data = data[:cap_bytes]
        problems.append(Problem(source, f"larger than {cap_bytes} bytes: only the first part was read"))
    if looks_binary(data):
        return "", problems + [Problem(source, "binary data, not a text log or tool output")]
    return data.decode("utf-8", errors="replace"), problems


def line_chunks(handle: BinaryIO, chunk_bytes: int) -> Iterator[tuple[int, bytearray, int]]:
    """Stream a binary file as chunks of whole lines, for logs too big to hold in memory.

    Yields ``(offset, buf, limit)``: ``buf[:limit]`` holds whole lines starting at file offset
    ``offset`` (at the end of the file the last line may lack its newline). One buffer is reused
    for the whole file (``readinto``): the partial line after the last newline is moved to the
    front for the next read, so no multi-MB string is allocated per chunk. Use ``buf`` before
    asking for the next chunk. A line longer than the buffer grows it. A file smaller than
    ``chunk_bytes`` gets a buffer of its size: zero-filling 32 MiB for each 100 KiB dmesg of a
    1,024-node incident costs seconds of page faults.
    """
    try:
        size = os.fstat(handle.fileno()).st_size
    except (AttributeError, OSError, ValueError):  # BytesIO and friends: no file descriptor
        size = chunk_bytes
    buf = bytearray(max(1, min(chunk_bytes, size + 1)))
    offset, filled = 0, 0  # file offset of buf[0]; bytes carried over at the front of buf
    while True:
        view = memoryview(buf)
        got = handle.readinto(view[filled:])
        view.release()
        total = filled + (got or 0)
        if not got:
            if filled:
                yield offset, buf, filled
            return
        cut = buf.rfind(b"\n", 0, total)
        if cut == -1:  # one line longer than the buffer: grow it
            filled = total
            if total == len(buf):
                buf.extend(bytes(len(buf)))
            continue
        yield offset, buf, cut + 1
        tail = bytes(buf[cut + 1:total])
        buf[:len(tail)] = tail
        offset, filled = offset + cut + 1, len(tail)
