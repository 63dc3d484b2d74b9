"""A pasted shell session: several commands' outputs in one file, each read by its own parser.

An engineer pastes what they ran, in order: the failing test, then ``nvidia-smi --query-gpu``;
``last -x``, then the previous boot's kernel log. The file as a whole is read by the parser of
the format it starts with; the outputs after later prompts are tool outputs too, and their
structure matters (who held the GPU memory when the test failed). :func:`outputs` cuts the
session at its prompt lines and detects and parses each command's output on its own, with the
line numbers of the file. Outputs of the file's own kind (already read with the whole file) and
of the kinds given in ``skip`` are left out; so is a file with one output only.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from gpulib.parsers import detect, registry
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.unwrap import unwrap

#: The head of an output that detection looks at (as for a whole file).
HEAD_CHARS = 8192


@dataclass
class Output:
    """One command's output: what was typed (None before the first prompt), the host of its
    prompt, its first and last line in the file (1-based), its kind and what its parser read."""

    command: str | None
    host: str | None
    first_line: int
    last_line: int
    kind: str
    result: ParseResult


def _blocks(text: str) -> tuple[list[str], list[tuple[int, int, str | None, str | None]]]:
    """The unwrapped lines and each command's output as (first, end, host, command): none for a
    text with one output only."""
    bare = unwrap(text)
    if not bare.commands:
        return [], []
    lines = bare.text.split("\n")
    starts = [(0, None, None)] + [(i + 1, host, cmd) for i, host, cmd in bare.commands]
    ends = [i for i, _, _ in bare.commands] + [len(lines)]
    blocks = [(a, b, host, cmd) for (a, host, cmd), b in zip(starts, ends, strict=True)
              if any(x.strip() for x in lines[a:b])]
    return (lines, blocks) if len(blocks) >= 2 else ([], [])


def output_kinds(text: str) -> list[str | None]:
    """The detected kind of each command's output, in order (empty for a text with one output):
    what the file holds besides the format it starts with."""
    lines, blocks = _blocks(text)
    return [detect.detect_kind("", "\n".join(lines[a:b]).lstrip("\n")[:HEAD_CHARS]) for a, b, _, _ in blocks]


def output_hosts(text: str) -> set[str]:
    """The hosts whose prompts (or ``ssh HOST cmd``) the outputs of a session follow."""
    _lines, blocks = _blocks(text)
    return {host for _a, _b, host, _cmd in blocks if host}


def outputs(text: str, source: str, opts: registry.Options, *, skip: Collection[str | None] = ()) -> list[Output]:
    """The outputs of a pasted session whose kind a parser knows (never raises on bad text)."""
    lines, blocks = _blocks(text)
    found = []
    for a, b, host, cmd in blocks:
        body = "\n".join(lines[a:b])
        kind = detect.detect_kind("", body.lstrip("\n")[:HEAD_CHARS])
        if kind is None or kind in skip or registry.BY_KIND[kind].input == "bytes":
            continue
        padded = "\n" * a + body  # the parser's line numbers are the file's
        try:
            result = registry.BY_KIND[kind].parse(registry.Source(source, text=padded), opts)
        except Exception as exc:  # noqa: BLE001 - a parser bug costs this output, not the file
            result = ParseResult(kind, problems=[Problem(source, f"{kind} parser failed on the output of line "
                                                                 f"{a + 1}: {type(exc).__name__}: {exc}", a + 1)])
        found.append(Output(cmd, host, a + 1, b, kind, result))
    return found


__all__ = ["Output", "output_hosts", "output_kinds", "outputs"]
