"""Evidence printed safe: no byte of a log line, tensor name or pickle key drives the terminal.

A log line can carry terminal control sequences: ``ESC ] 0 ; title BEL`` renames the on-call
engineer's window, ``ESC [ 2 J`` clears the screen (hiding what came before), an OSC 8
hyperlink shows one text and opens another URL, a carriage return or a right-to-left override
(U+202E) makes a line read differently from what it holds. Whoever crafted the log (or the
checkpoint: tensor names and pickle keys are free text) would rewrite what gpulib tells them.

:func:`safe` writes every such character as a visible ``\\uXXXX`` escape instead: C0 controls
but newline and tab, DEL, the C1 range (U+0080-U+009F: 8-bit CSI/OSC), the bidi overrides and
isolates, and lone surrogates (a file name that is not UTF-8, decoded with ``surrogateescape``,
which a UTF-8 terminal could not print at all). The escape is JSON's own spelling, so the same
filter leaves JSON output valid and meaning the same (``json.dumps`` already escapes C0 controls,
but not DEL, C1, bidi or surrogates when ``ensure_ascii=False``).

:func:`escaped_stdout` puts the filter on ``sys.stdout`` for one command (``gpulib.cli.main``
does, for every command); stderr stays raw for the progress bar's own cursor moves, and error
messages written there pass through :func:`safe` themselves.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterator

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def safe(text: str) -> str:
    """``text`` with every character that could drive a terminal written as ``\\uXXXX``
    (newline and tab kept); text without one is returned as is."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


class SafeStream(io.TextIOBase):
    """A text stream that writes :func:`safe` text to the one it wraps (everything else is the
    wrapped stream's: ``fileno``, ``isatty``, ``flush``, ``encoding``)."""

    def __init__(self, raw) -> None:
        super().__init__()
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(safe(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def fileno(self) -> int:
        return self.raw.fileno()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return getattr(self.raw, "encoding", "utf-8")


@contextlib.contextmanager
def escaped_stdout() -> Iterator[None]:
    """``sys.stdout`` writes :func:`safe` text while the block runs, and is put back after."""
    before = sys.stdout
    sys.stdout = SafeStream(before)
    try:
        yield
    finally:
        sys.stdout = before
