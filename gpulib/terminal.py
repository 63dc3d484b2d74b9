"""Evidence printed safe: no byte of a log line, tensor name or pickle key drives the terminal.

A log line can carry terminal control sequences: ``ESC ] 0 ; title BEL`` renames the on-call
engineer's window, ``ESC [ 2 J`` clears the screen (hiding what came before), an OSC 8
hyperlink shows one text and opens another URL, a carriage return or a right-to-left override
(U+202E) makes a line read differently from what it holds. Whoever crafted the log (or the
checkpoint: tensor names and pickle keys are free text) would rewrite what gpulib tells them.

:func:`safe` writes every such character as a visible ``\\uXXXX`` escape instead: C0 controls
but newline and tab, DEL, the C1 range (U+0080-U+009F: 8-bit CSI/OSC), the bidi overrides and
isolates, and lone surrogates (a file name that is not UTF-8, decoded with ``surrogateescape``:
its bytes 0x80-0x9F are C1 controls on an 8-bit terminal, and a stdout that is not itself
``surrogateescape`` cannot print any of them). On a ``surrogateescape`` stdout the bytes
0xA0-0xFF of such a name are written back as they were (a Latin-1 name stays copy-pastable);
only their C1 part is escaped. The escape is JSON's own spelling, so the same
filter leaves JSON output valid and meaning the same (``json.dumps`` already escapes C0 controls,
but not DEL, C1, bidi or surrogates when ``ensure_ascii=False``).

:func:`escaped_output` puts the filter on ``sys.stdout`` and ``sys.stderr`` for one command
(``gpulib.cli.main`` does, for every command: results, errors, warnings, ``-v`` logging). On
stderr a carriage return is kept: the progress bar redraws its line with it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import sys
from collections.abc import Iterator


@functools.cache
def _unsafe(keep_bytes: bool, keep_cr: bool) -> re.Pattern:
    """The characters to escape: C0 but newline and tab (and carriage return with ``keep_cr``),
    DEL, C1, the bidi marks, overrides and isolates, and the surrogates (but those of the bytes
    0xA0-0xFF with ``keep_bytes``, for a stream that writes them back as bytes)."""
    c0 = "\x00-\x08\x0b\x0c\x0e-\x1f" if keep_cr else "\x00-\x08\x0b-\x1f"
    surrogates = "\ud800-\udc9f" if keep_bytes else "\ud800-\udfff"
    return re.compile(f"[{c0}\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069{surrogates}]")


def _escape(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def safe(text: str, *, keep_bytes: bool = False, keep_cr: bool = False) -> str:
    """``text`` with every character that could drive a terminal written as ``\\uXXXX``
    (newline and tab kept); text without one is returned as is. ``keep_bytes``: leave the
    surrogates of the bytes 0xA0-0xFF (a ``surrogateescape`` stream writes them back as bytes);
    ``keep_cr``: leave carriage returns (a progress bar's redraw)."""
    pattern = _unsafe(keep_bytes, keep_cr)
    return pattern.sub(_escape, text) if pattern.search(text) else text


class SafeStream(io.TextIOBase):
    """A text stream that writes :func:`safe` text to the one it wraps (everything else is the
    wrapped stream's: ``fileno``, ``isatty``, ``flush``, ``encoding``)."""

    def __init__(self, raw, *, keep_cr: bool = False) -> None:
        super().__init__()
        self.raw = raw
        self.keep_bytes = getattr(raw, "errors", None) == "surrogateescape"
        self.keep_cr = keep_cr

    def write(self, text: str) -> int:
        self.raw.write(safe(text, keep_bytes=self.keep_bytes, keep_cr=self.keep_cr))
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
def escaped_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` write :func:`safe` text while the block runs (stderr
    keeps carriage returns), and are put back after."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err, keep_cr=True)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
