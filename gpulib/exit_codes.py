"""One exit-code table for every ``gpulib`` command (docs/ARCHITECTURE.md), shown in each ``--help``.

Why one table: a scheduler or a wrapper script acts on the number alone (relaunch, drain the
node, page someone). If 3 meant "hard" for one command and "the run failed" for another, the
same script would drain a healthy node because a notebook raised. Each command returns the
subset that applies to it; :func:`epilog` prints the table and, under it, that subset.
"""

from __future__ import annotations

import argparse
import os
import sys

OK = 0
SOFT = 1
USAGE = 2
HARD = 3
UNKNOWN = 4
RUN_FAILED = 5
#: Not in the table: the shell's conventions, kept so that ``| head`` and Ctrl-C read as usual.
INTERRUPTED = 130
PIPE_CLOSED = 141

#: A diagnosis's interruption -> the exit code: the one map from a verdict to a number (``gpulib
#: diagnose`` and every command that ends on a diagnosis). An interruption it does not know is
#: unknown (collect more), never "healthy".
FOR_INTERRUPTION = {"none": OK, "soft": SOFT, "hard": HARD, "unknown": UNKNOWN}
#: A finding's severity -> the exit code; the worst finding decides (:func:`for_severities`).
FOR_SEVERITY = {"critical": HARD, "error": HARD, "warning": SOFT, "info": OK}

TABLE = {
    OK: "healthy / no interruption / nothing found",
    SOFT: "soft or warnings: the process failed and the hardware is fine, or findings to look at",
    USAGE: "usage or input error: a missing or unreadable path, a bad flag or parameter",
    HARD: "hard / no-go: a GPU or node failed, a check says do not relaunch, or a checkpoint is unsafe to load",
    UNKNOWN: "unknown: a failure without an explained cause, or nothing readable (collect more)",
    RUN_FAILED: "the run itself failed (gpulib run: a notebook raised, hung or recorded nothing; "
                "any command: an internal error, its traceback above)",
}


def for_interruption(interruption: str | None) -> int:
    """The exit code of a diagnosis's interruption (:data:`FOR_INTERRUPTION`)."""
    return FOR_INTERRUPTION.get(interruption or "unknown", UNKNOWN)


def for_severities(severities) -> int:
    """The exit code of the worst of ``severities`` (:data:`FOR_SEVERITY`; none or only info: OK)."""
    return max((FOR_SEVERITY.get(s, OK) for s in severities), default=OK)


def table_text() -> str:
    rows = "\n".join(f"  {code}  {meaning}" for code, meaning in TABLE.items())
    return f"exit codes (the same for every gpulib command):\n{rows}"


def epilog(this_command: str | None = None) -> str:
    """The shared table, then what this command returns (``this_command``, one line per code)."""
    text = table_text()
    if this_command:
        text += "\nthis command:\n" + "\n".join(f"  {line.strip()}" for line in this_command.strip().splitlines())
    return text


def terminal_columns(fallback: int = 80) -> int:
    """``shutil.get_terminal_size().columns``: ``$COLUMNS``, else the terminal of stdout, else ``fallback``."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else fallback


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but each line of a description or epilog is wrapped on its own: long
    one-line descriptions still wrap, and the table keeps one row per line (continuations indented).

    The width is ``shutil.get_terminal_size()``'s, worked out without importing ``shutil`` (with
    ``bz2`` and ``lzma``, ~3 ms of every command's start-up: argparse makes a formatter per option)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        if width is None:
            width = terminal_columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)

    def _fill_text(self, text, width, indent):
        import textwrap  # noqa: PLC0415 - only --help pays for it (argparse imports it just as late)

        out = []
        for line in text.splitlines():
            lead = " " * (len(line) - len(line.lstrip()))
            wrapped = textwrap.fill(line.strip(), width, initial_indent=indent + lead,
                                    subsequent_indent=indent + lead + ("   " if lead else "")) if line.strip() else ""
            out.append(wrapped)
        return "\n".join(out)
