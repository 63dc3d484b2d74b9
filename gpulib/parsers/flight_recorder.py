"""PyTorch Flight Recorder dumps (``TORCH_NCCL_TRACE_BUFFER_SIZE``): the last collectives per rank.

On a watchdog timeout every rank dumps its ring buffer of recent collectives to
``/tmp/nccl_trace_rank_<rank>`` (pickle; the JSON variant has the same keys). Comparing the
dumps across ranks answers the question the timeout messages cannot: *which rank never joined
collective N*. A rank whose dump is missing is often the culprit itself (it crashed or hung
before it could dump).

Pickles are read with :func:`gpulib.safe_pickle.stub_load`, which resolves no
global and calls nothing, so a hostile file cannot run code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpulib.parsers.base import ParseResult, Problem
from gpulib.safe_pickle import stub_load

KIND = "flight_recorder"

_RANK_SUFFIX = re.compile(r"(\d+)(?:\.\w+)?$")


@dataclass
class FrEntry:
    """One collective in a rank's ring buffer."""

    pg: str
    seq: int | None
    op: str
    state: str
    time_created_ns: int | None = None
    timeout_ms: int | None = None


@dataclass
class FlightRecord:
    """One rank's dump. ``rank`` comes from the file name suffix (``nccl_trace_rank_3``)."""

    rank: int | None
    version: str | None
    pg_status: dict[str, dict] = field(default_factory=dict)
    pg_desc: dict[str, str] = field(default_factory=dict)
    entries: list[FrEntry] = field(default_factory=list)


def looks_like(head: str) -> bool:
    return '"entries"' in head and ('"pg_config"' in head or '"version"' in head)


def looks_like_bytes(head: bytes) -> bool:
    """Pickle protocol 2+ starts with 0x80; FR dumps name their keys early."""
    return head[:1] == b"\x80" and b"entries" in head[:4096] and (b"pg_config" in head or b"version" in head)


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _record(doc: object, source: str, result: ParseResult) -> None:
    if not isinstance(doc, dict) or "entries" not in doc:
        result.problems.append(Problem(source, "not a flight-recorder dump (no 'entries')"))
        return
    m = _RANK_SUFFIX.search(source.rsplit("/", 1)[-1])
    rec = FlightRecord(rank=int(m.group(1)) if m else None, version=str(doc.get("version")))
    for pg, status in (doc.get("pg_status") or {}).items():
        if isinstance(status, dict):
            rec.pg_status[str(pg)] = {k: _int(v) for k, v in status.items()}
    for pg, conf in (doc.get("pg_config") or {}).items():
        if isinstance(conf, dict):
            rec.pg_desc[str(pg)] = str(conf.get("desc", ""))
    for entry in doc.get("entries") or []:
        if not isinstance(entry, dict):
            continue
        group = entry.get("process_group")
        pg = str(group[0]) if isinstance(group, (list, tuple)) and group else str(entry.get("pg_id", "0"))
        rec.entries.append(FrEntry(pg, _int(entry.get("collective_seq_id")), str(entry.get("profiling_name", "")),
                                   str(entry.get("state", "")), _int(entry.get("time_created_ns")),
                                   _int(entry.get("timeout_ms"))))
    result.records.append(rec)


def parse(text: str, source: str = "<text>", **_opts) -> ParseResult[FlightRecord]:
    """The JSON variant (``_dump_nccl_trace_json``)."""
    result: ParseResult[FlightRecord] = ParseResult(KIND)
    try:
        _record(json.loads(text), source, result)
    except ValueError as exc:
        result.problems.append(Problem(source, f"not valid JSON: {exc}"))
    return result


def parse_bytes(data: bytes, source: str = "<bytes>") -> ParseResult[FlightRecord]:
    """The pickle variant, unpickled with inert stand-ins (nothing is imported or called)."""
    result: ParseResult[FlightRecord] = ParseResult(KIND)
    loaded = stub_load(data)
    if loaded.error:
        result.problems.append(Problem(source, f"unreadable flight-recorder pickle: {loaded.error}"))
        return result
    _record(loaded.obj, source, result)
    return result
