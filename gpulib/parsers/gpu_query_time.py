"""How long each GPU took to answer a query: an NVML test program's or a script's per-GPU timings.

Why read it: NVML answers a query from the driver in micro- to milliseconds. When one GPU takes
seconds for the same query its peers answer at once, the driver is retrying hardware on that GPU:
for an NVLink or peer-to-peer query, training a link that never comes up (a bridge not pushed
fully home, a bent connector), which can stall the whole machine while it retries. Nothing
prints an error; the only evidence is the time. Engineers who suspect the driver time the calls
per GPU, so the evidence arrives as a listing of GPUs, each followed by what was called and how
long it took::

    0. <GPU name> [00000000:01:00.0]
    Start calling <query> ...
    Elapsed time: 7941 ms
    1. <GPU name> [00000000:02:00.0]
    ...
    Elapsed time: 0 ms

A GPU line names the GPU by index with a PCI bus id (``0. NAME [0000:01:00.0]``, ``[1] NAME
(00000000:02:00.0)``) or as ``GPU N:``/``Device N:``; a timing line says ``elapsed``, ``took``,
``duration``, ``latency`` or ``query time`` with a value in us, ms or s. Each timing belongs to
the GPU line above it; the lines between say which query was timed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.identity import normalize_pci
from gpulib.parsers.base import ParseResult, Problem

KIND = "gpu_query_time"

_PCI = r"(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
#: ``0. NAME [00000000:01:00.0]`` / ``[1] NAME (0000:02:00.0)`` (a bus id is required), or ``GPU 2: NAME``.
_GPU = re.compile(r"^\s*(?:(?:GPU|Device)\s*#?(?P<idx1>\d{1,2})\s*[:.)]|\[?(?P<idx2>\d{1,2})[.:)\]])\s*(?P<name>.*?)\s*"
                  r"(?:[\[(](?:PCI:|Bus[ -]?Id:?\s*)?" + _PCI + r"[\])])?\s*$", re.I)
_TIMING = re.compile(r"(?i)\b(?:elapsed(?: time)?|took|duration|time taken|query time|latency)\b\s*[:=]?\s*"
                     r"(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>ms|msec|milliseconds?|us|usec|µs|microseconds?|s|secs?|seconds?)\b")
_UNIT_MS = {"ms": 1.0, "msec": 1.0, "millisecond": 1.0, "milliseconds": 1.0, "us": 1e-3, "usec": 1e-3, "µs": 1e-3,
            "microsecond": 1e-3, "microseconds": 1e-3, "s": 1000.0, "sec": 1000.0, "secs": 1000.0,
            "second": 1000.0, "seconds": 1000.0}
#: What a marker line between a GPU and its timing says, without counters and start/end words.
_MARKER_NOISE = re.compile(r"(?i)^(?:start(?:ed)?|begin|end(?:ed)?|done|finish(?:ed)?)\s+|[:=]?\s*[-+\d.]+\s*$")
_MAX_QUERY_CHARS = 120


@dataclass
class QueryTime:
    """One timed query on one GPU: ``elapsed_ms`` for ``query`` (the marker lines between the GPU
    line and the timing, without their counters, and what the timing line says before its
    keyword; empty when nothing names it)."""

    line: int  # the timing line
    gpu_line: int
    gpu_text: str  # the GPU line as printed
    gpu_index: int
    gpu_name: str | None
    pci_bus_id: str | None  # normalised '0000:01:00.0'
    query: str
    elapsed_ms: float
    text: str


def _gpu(line: str) -> tuple[int, str | None, str | None] | None:
    m = _GPU.match(line)
    if not m or not (m["pci"] or m["idx1"]):  # a numbered line without a bus id is a list item, not a GPU
        return None
    index = int(m["idx1"] or m["idx2"])
    return index, (m["name"] or None), normalize_pci(m["pci"]) if m["pci"] else None


def _scan(text: str) -> list[QueryTime]:
    out: list[QueryTime] = []
    current: tuple[int, str, int, str | None, str | None] | None = None  # (line, text, index, name, pci)
    markers: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        gpu = _gpu(line) if line else None
        if gpu:
            current, markers = (number, line, *gpu), []
            continue
        m = _TIMING.search(line)
        if m and current:
            ms = float(m["num"]) * _UNIT_MS[m["unit"].lower()]
            named = line[:m.start()].strip(" :=-")  # ``nvmlDeviceGetEccMode took 4.1 s`` names its query
            query = "; ".join(dict.fromkeys([*markers, *([named] if named else [])]))[:_MAX_QUERY_CHARS]
            out.append(QueryTime(number, *current, query, ms, line))
            markers = []
        elif line and current:
            marker = _MARKER_NOISE.sub("", _MARKER_NOISE.sub("", line)).strip()
            if marker:
                markers.append(marker)
    return out


#: Words one of which the head's timing lines hold (a substring test spares the line patterns on
#: every other file: detection asks every parser about every file of an incident).
_MARKS = ("elapsed", "took", "duration", "time taken", "query time", "latency")


#: The start of a GPU line, looked for in the whole head at once before it is read line by line.
_GPU_HINT = re.compile(r"(?m)^[ \t]*(?:GPU|Device)[ \t]*#?\d|[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")


def _timed_line(low: str) -> bool:
    """Whether a line of the lower-cased head is a timing. A timing's match starts at one of
    :data:`_MARKS`, so it is tried only from each line's first mark: a kernel log's head holds
    ``took`` a few times, and the GPU-line pattern and the line-by-line scan that follow cost
    ~0.5 ms a file for nothing (every file of an incident is asked)."""
    for mark in _MARKS:
        at = low.find(mark)
        while at != -1:
            end = low.find("\n", at)
            end = len(low) if end == -1 else end
            if _TIMING.search(low, at, end):  # a match starts at a mark; ``\b`` still sees the character before
                return True
            at = low.find(mark, end)
    return False


def looks_like(head: str) -> bool:
    """Timings of at least two different GPUs, each under its own GPU line."""
    low = head.lower()
    if not _timed_line(low) or not _GPU_HINT.search(head):
        return False
    return len({(t.gpu_index, t.pci_bus_id) for t in _scan(head)}) >= 2


def parse(text: str, source: str = "<text>", **_opts) -> ParseResult[QueryTime]:
    """Every per-GPU timing in ``text`` (never raises); none at all is a problem."""
    result: ParseResult[QueryTime] = ParseResult(KIND)
    if "\x00" in text:
        result.problems.append(Problem(source, "binary data, not per-GPU query timings"))
        return result
    result.records = _scan(text)
    if not result.records:
        result.problems.append(Problem(source, "no per-GPU timings (a GPU line followed by an elapsed time) found"))
    return result


__all__ = ["KIND", "QueryTime", "looks_like", "parse"]
