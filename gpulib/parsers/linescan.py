"""One read of a big log for every reader of its lines.

A job console is read by two readers: the job parser (ranks, timeouts, OOMs, steps) and the
signature scan (every line through the catalogue). With the keyword search at memory speed
(:mod:`gpulib.parsers.prefilter`), what is left of a scan is reading the file and counting its
newlines for line numbers - each costs as much as the search. So the readers share them: the file
is read once, in chunks of whole lines; each reader says which lines of the chunk it wants
(:meth:`ChunkReader.wanted`), the newlines up to those lines are counted once for all, and each
reader gets its lines with their numbers (:meth:`ChunkReader.take`).

A reader that raises is dropped with the error recorded on it (:meth:`ChunkReader.failed`): one
parser's bug costs that parser's records, never the other readers' - the same rule as
:func:`gpulib.evidence.gather._parse_safely` for whole files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import islice
from typing import Protocol

from gpulib.logs import get_logger
from gpulib.parsers.base import line_chunks

log = get_logger(__name__)

CHUNK_BYTES = 8 * 1024 * 1024


class ChunkReader(Protocol):
    """What :func:`read_file` asks of each reader."""

    def wanted(self, buf: bytearray, limit: int, offset: int, size: int) -> list[int]:
        """Sorted start offsets of the lines of ``buf[:limit]`` (file offset ``offset`` of a file of
        ``size`` bytes) this reader wants to read."""

    def take(self, buf: bytearray, limit: int, lines: list[tuple[int, int]]) -> None:
        """Read the lines asked for: ``(start offset in buf, 1-based line number)``, in order."""

    def failed(self, exc: Exception) -> None:
        """The reader raised: record why it stopped."""


def number_lines(buf: bytes | bytearray, starts: Sequence[int], lines_before: int) -> list[int]:
    """1-based line numbers of the lines starting at ``starts`` (sorted offsets in ``buf``), the
    chunk's first line being ``lines_before + 1``: one ``count`` of the newlines up to the last."""
    numbers, counted, line = [], 0, lines_before
    for start in starts:
        line += buf.count(b"\n", counted, start)
        counted = start
        numbers.append(line + 1)
    return numbers


def read_file(path: str | os.PathLike, readers: Sequence[ChunkReader], chunk_bytes: int = CHUNK_BYTES) -> None:
    """Stream ``path`` once through every reader. Raises only ``OSError`` (the file itself)."""
    live = list(readers)
    lines_before = 0
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        for offset, buf, limit in line_chunks(handle, chunk_bytes):
            asked = {}
            for reader in list(live):
                try:
                    asked[id(reader)] = reader.wanted(buf, limit, offset, size)
                except Exception as exc:  # noqa: BLE001 - one reader's bug must not stop the others
                    _drop(live, reader, exc)
            union = sorted(set().union(*asked.values())) if asked else []
            numbers = number_lines(buf, union, lines_before)
            line_of = dict(zip(union, numbers, strict=True))
            for reader in list(live):
                starts = asked.get(id(reader), [])
                try:
                    reader.take(buf, limit, [(s, line_of[s]) for s in starts])
                except Exception as exc:  # noqa: BLE001
                    _drop(live, reader, exc)
            last = union[-1] if union else 0
            lines_before = (numbers[-1] - 1 if union else lines_before) + buf.count(b"\n", last, limit)
            if not live:
                return


def lines_up_to(path: str | os.PathLike, number: int, keep: int) -> tuple[int, list[str]]:
    """(number of the first line returned, the last ``keep`` lines up to line ``number``), decoded,
    line ends removed; ``(1, [])`` when the file cannot be read. Line numbers are counted as the
    parsers count them (newline bytes). The lines before the window are only counted, a chunk at a
    time: quoting the last line of an 800 MB console costs a pass at memory speed, not a decode of
    every line before it."""
    first = max(1, number - keep + 1)
    try:
        with open(path, "rb") as fh:
            offset, line = 0, 1  # the line that starts at ``offset``
            while line < first:
                chunk = fh.read(CHUNK_BYTES)
                if not chunk:
                    return 1, []
                newlines = chunk.count(b"\n")
                if line + newlines < first:
                    line, offset = line + newlines, offset + len(chunk)
                    continue
                at = -1
                for _ in range(first - line):
                    at = chunk.find(b"\n", at + 1)
                offset, line = offset + at + 1, first
            fh.seek(offset)
            return first, [raw.decode("utf-8", "replace").rstrip("\r\n") for raw in islice(fh, number - first + 1)]
    except OSError:
        return 1, []


def _drop(live: list, reader: ChunkReader, exc: Exception) -> None:
    log.debug("chunk reader %r failed", reader, exc_info=True)
    live.remove(reader)
    reader.failed(exc)


__all__ = ["CHUNK_BYTES", "ChunkReader", "number_lines", "read_file"]
