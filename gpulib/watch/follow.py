"""Follow growing log files like ``tail -F``: by name, across rotation and truncation.

Why by name: a training job's console is rotated by logrotate (``rename`` + new file, or
``copytruncate`` which empties the file in place) while the job keeps writing. Following the open
file descriptor would stay on the renamed file forever or read nothing after a truncation.

Rules, checked on every :meth:`Follower.poll`:

* the path now names a different file (device/inode changed) → read what is left of the old one
  to its end, then start the new one at offset 0 (no line is lost across ``rename`` rotation);
* the file is shorter than what was read, or the bytes just before the read offset changed → it
  was truncated (``copytruncate``) and maybe already rewritten past that offset: start again at 0;
* the file is missing → keep the old handle's remaining lines and wait for the name to come back.

``tail -F`` compares sizes only and misses a truncation that is rewritten past the old size
before its next look; the remembered tail bytes catch that, unless the new content happens to
repeat the old bytes at exactly that position.
Only whole lines are returned; a partial last line waits for its newline (bounded, see
:data:`MAX_LINE_BYTES`).
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

#: Bytes read per file per poll: a burst of output is spread over polls instead of one huge read.
READ_BYTES = 8 << 20
#: A "line" longer than this without a newline is cut (binary junk must not grow memory).
MAX_LINE_BYTES = 1 << 20
#: Bytes remembered before the read offset; if they change, the file was truncated and rewritten.
TAIL_BYTES = 64


@dataclass
class FollowNote:
    """What happened to the file besides new lines (rotation, truncation, missing, unreadable)."""

    path: str
    event: str  # opened | rotated | truncated | missing | unreadable | line_cut
    detail: str = ""


@dataclass
class Follower:
    """One followed path. ``from_start=False`` skips what the file already holds at the first poll
    (like ``tail -F -n 0``); a file that appears later, or replaces it, is read from its start."""

    path: Path
    from_start: bool = False
    _handle: object | None = None
    _identity: tuple[int, int] | None = None
    _offset: int = 0
    _partial: bytes = b""
    _tail: bytes = b""  # the last TAIL_BYTES read, to recognise a file rewritten past the old offset
    _polled: bool = False
    notes: list[FollowNote] = field(default_factory=list)
    _last_note: FollowNote | None = None
    #: wall-clock time of the last complete line read (``None`` until one arrives).
    last_line_time: float | None = None
    lines_total: int = 0

    def poll(self) -> list[bytes]:
        """Return the complete lines written since the last poll (without their newlines)."""
        lines: list[bytes] = []
        first_poll, self._polled = not self._polled, True
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._handle is not None:
                lines += self._drain()
                self._close()
                self._note("missing", "the file was removed or renamed; waiting")
            return self._stamp(lines)
        except OSError as exc:
            self._note("unreadable", str(exc))
            return self._stamp(lines)
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block the open or never end
            self._note("unreadable", "not a regular file (FIFO, device or folder); follow the file the job writes")
            return self._stamp(lines)
        identity = (st.st_dev, st.st_ino)
        if self._handle is not None and identity != self._identity:
            lines += self._drain()  # the rest of the rotated file, then the new one from its start
            self._close()
            self._note("rotated", "a new file took the name; reading it from the start")
            self._open(identity, start_at_end=False)
        elif self._handle is None:
            if not self._open(identity, start_at_end=first_poll and not self.from_start):
                return self._stamp(lines)
        elif st.st_size < self._offset or (st.st_size > self._offset and not self._tail_intact()):
            self._note("truncated", f"size {st.st_size}, {self._offset} bytes had been read and the bytes before "
                                    "that point changed; reading from 0")
            self._offset, self._partial, self._tail = 0, b"", b""
            self._handle.seek(0)
        lines += self._read()
        return self._stamp(lines)

    def close(self) -> None:
        self._close()

    def _note(self, event: str, detail: str = "") -> None:
        """Record what happened, once: an unreadable or missing file is not re-reported every poll."""
        note = FollowNote(str(self.path), event, detail)
        if note != self._last_note:
            self.notes.append(note)
        self._last_note = note

    # ---------------------------------------------------------------- internals
    def _stamp(self, lines: list[bytes]) -> list[bytes]:
        if lines:
            self.last_line_time = time.time()
            self.lines_total += len(lines)
        return lines

    def _open(self, identity: tuple[int, int], start_at_end: bool) -> bool:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - held open across polls on purpose
        except OSError as exc:
            self._note("unreadable", str(exc))
            return False
        self._handle, self._identity, self._partial, self._tail = handle, identity, b"", b""
        self._offset = handle.seek(0, os.SEEK_END) if start_at_end else 0
        self._note("opened", f"at byte {self._offset}")
        return True

    def _tail_intact(self) -> bool:
        """Do the bytes just before the read offset still hold what was read there?"""
        if not self._tail:
            return True
        try:
            return os.pread(self._handle.fileno(), len(self._tail), self._offset - len(self._tail)) == self._tail
        except OSError:
            return True

    def _close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle, self._identity = None, None

    def _read(self) -> list[bytes]:
        try:
            data = self._handle.read(READ_BYTES)
        except OSError as exc:
            self._note("unreadable", str(exc))
            return []
        if not data:
            return []
        self._offset += len(data)
        self._tail = (self._tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]
        data = self._partial + data
        cut = data.rfind(b"\n")
        if cut == -1:
            self._partial = data
            if len(self._partial) > MAX_LINE_BYTES:
                self._note("line_cut", f"no newline in {len(data)} bytes")
                self._partial = b""
                return [data[:MAX_LINE_BYTES]]
            return []
        self._partial = data[cut + 1:]
        return [line.rstrip(b"\r") for line in data[:cut].split(b"\n")]

    def _drain(self) -> list[bytes]:
        """Everything left in the old handle, including a last line without newline."""
        lines: list[bytes] = []
        while True:
            before = self._offset
            lines += self._read()
            if self._offset == before:
                break
        if self._partial:
            lines.append(self._partial)
            self._partial = b""
        return lines
