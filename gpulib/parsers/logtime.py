"""Timestamps as job logs print them, turned into UTC.

Training logs mix many clocks on one line stream: Python logging (``2025-04-22 11:02:24,583``),
torch's glog prefix without a year (``[E422 13:53:38.835985689 ProcessGroupNCCL.cpp:616]``), the
elastic agent (``E0311 03:22:13.004000 ...``), ChildFailedError reports (``2025-03-11_03:22:11``),
``date`` output (``Tue May  6 07:51:07 UTC 2025``) and ISO stamps with offsets. A stamp without a
zone is read in ``tz`` (default UTC); a stamp without a year borrows the year of the log's other
stamps, because torch's glog prefix never prints one.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpulib.identity import to_utc_iso

_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}

#: ``2025-04-22 11:02:24,583`` / ``2025-07-02T23:05:29+0000`` / ``2025-03-11_03:22:11`` / ``2025/04/22 10:58:30.154``
ISO_STAMP = re.compile(
    r"(?P<y>20\d\d)[-/](?P<mo>\d\d)[-/](?P<d>\d\d)[ T_](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    r"(?:[.,](?P<frac>\d{1,9}))?(?P<zone>Z|[+-]\d\d:?\d\d|\s?UTC)?")
#: glog: ``E422 13:53:38.835985689`` (torch c10) or ``E0311 03:22:13.004000`` (elastic agent)
GLOG_STAMP = re.compile(r"(?<![\w])[EWIF](?P<md>\d{3,4}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\.\d+")
#: ``Tue May  6 07:51:07 UTC 2025`` (``date``) and ``Mon Mar 10 18:52:38 2025`` (``dmesg -T``)
DATE_STAMP = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    r"(?: (?P<zone>[A-Z]{3,4}))? (?P<y>20\d\d)")
#: Zone abbreviations ``date`` prints that name one offset only (``CST``, ``IST`` name several, and a
#: stamp in them is not read).
ZONE_ABBREVIATIONS = {"UTC": "Z", "GMT": "Z", "WET": "+00:00", "WEST": "+01:00", "BST": "+01:00", "CET": "+01:00",
                      "CEST": "+02:00", "EET": "+02:00", "EEST": "+03:00", "MSK": "+03:00", "JST": "+09:00",
                      "KST": "+09:00", "AEST": "+10:00", "AEDT": "+11:00", "EST": "-05:00", "EDT": "-04:00",
                      "PST": "-08:00", "PDT": "-07:00", "MST": "-07:00", "MDT": "-06:00"}
#: What a glog and a ``date`` stamp hold, as patterns that start with a literal (the regex engine
#: skips to it): tested first, as GLOG_STAMP and DATE_STAMP try every position of a line (~3 us).
_GLOG_CLOCK = re.compile(r":\d\d:\d\d\.\d")
_DATE_CLOCK = re.compile(r":\d\d:\d\d ")
YEAR_HINT = re.compile(rb"(20\d\d)[-/]\d\d[-/]\d\d[ T_]\d\d:\d\d")


def fixed_offset(text: str) -> timezone:
    """``Z``, ``+02:00``, ``-0500`` -> a fixed-offset zone."""
    if text == "Z":
        return timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4])))


@lru_cache(maxsize=256)
def parse_zone(name: str | None) -> tzinfo | None:
    """An IANA zone name, 'UTC'/'Z', or a fixed offset ('+02:00', '-0500'); None if unknown.

    Bundles record the zone as ``date +%Z``/``%z`` gave it, so both forms occur.
    """
    if not name:
        return None
    text = name.strip()
    if text.upper() in ("UTC", "Z", "GMT", "ETC/UTC"):
        return timezone.utc
    if re.fullmatch(r"(?:UTC)?[+-]\d\d:?\d\d", text):
        return fixed_offset(text.removeprefix("UTC"))
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def zone_argument(text: str) -> str:
    """argparse type of ``--tz``: a zone :func:`parse_zone` knows, kept as typed. A misspelt zone
    (``Europe/Berln``) is a usage error: read as UTC instead, every naive time of the incident
    would be off by the zone's offset without a word."""
    if parse_zone(text) is None:
        import argparse  # noqa: PLC0415 - only for a command given --tz

        raise argparse.ArgumentTypeError(f"unknown time zone {text!r}: give an IANA name (Europe/Berlin), "
                                         "UTC, or an offset (+02:00)")
    return text


def zone_of(name: str | None) -> tzinfo:
    """The zone naive stamps are read in: ``name`` (see :func:`parse_zone`), else UTC."""
    return parse_zone(name) or timezone.utc


def _finish(moment: datetime, zone_text: str | None, tz: tzinfo) -> str:
    zone_text = (zone_text or "").strip()
    if zone_text in ("Z", "UTC", "GMT"):
        moment = moment.replace(tzinfo=timezone.utc)
    elif zone_text:
        moment = moment.replace(tzinfo=fixed_offset(zone_text))
    else:
        moment = moment.replace(tzinfo=tz)
    return to_utc_iso(moment)


def stamp_in(line: str, *, year: int | None, tz: tzinfo) -> str | None:
    """The first timestamp printed on ``line`` as UTC ISO (``...Z``), or None.

    ``year`` completes glog stamps, which carry only month and day.
    """
    m = ISO_STAMP.search(line)
    if m:
        return _utc(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), m["zone"], tz)
    m = GLOG_STAMP.search(line) if year and _GLOG_CLOCK.search(line) else None
    if m:
        md = m["md"]
        return _utc(year, int(md[:-2]), int(md[-2:]), int(m["h"]), int(m["mi"]), int(m["s"]), None, tz)
    m = DATE_STAMP.search(line) if _DATE_CLOCK.search(line) else None
    if m and m["mon"].lower() in _MONTHS and (m["zone"] is None or m["zone"] in ZONE_ABBREVIATIONS):
        return _utc(int(m["y"]), _MONTHS[m["mon"].lower()], int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]),
                    ZONE_ABBREVIATIONS.get(m["zone"] or ""), tz)
    return None


@lru_cache(maxsize=1 << 16)
def _utc(y: int, mo: int, d: int, h: int, mi: int, s: int, zone_text: str | None, tz: tzinfo) -> str | None:
    """One second of a log read as UTC ISO, or None for a date that does not exist. Remembered:
    the ranks of a job print the same second thousands of times (every watchdog timeout)."""
    try:
        moment = datetime(y, mo, d, h, mi, s)
    except ValueError:
        return None
    return _finish(moment, zone_text, tz)


def year_hint(data: bytes | bytearray) -> int | None:
    """The year of the first full date in a chunk of log (to complete year-less glog stamps)."""
    m = YEAR_HINT.search(data)
    return int(m.group(1)) if m else None


#: How far into a file :func:`first_year` looks for a dated line (~1 ms a MB): past the init lines of
#: ~45,000 nodes; a log with no date that far in is read with its file's year.
YEAR_SCAN_BYTES = 64 * 1024 * 1024


def first_year(path: str | Path, limit: int = YEAR_SCAN_BYTES) -> int | None:
    """The year of the first full date anywhere in the first ``limit`` bytes of ``path``.

    Why the whole file and not its head: a job console opens with one NCCL init line per rank
    (8 per node, ~170 bytes each), so its first dated line sits ~1.4 MB in at 1,024 nodes and
    ~11 MB in at 8,192. A year looked for in a fixed head would be found at 768 nodes and not at
    1,024, and the year-less glog stamps of the watchdog time-outs would then go unread: the
    answer would depend on the node count."""
    try:
        with open(path, "rb") as fh:
            tail = b""
            read = 0
            while read < limit:
                block = fh.read(8 * 1024 * 1024)
                if not block:
                    return None
                read += len(block)
                year = year_hint(tail + block)
                if year:
                    return year
                tail = block[-32:]  # a date cut by the block boundary
    except OSError:
        return None
    return None


def modified_year(path: str | Path | None) -> int | None:
    """The year ``path`` was last written (a log is not newer than its file), or None: the year of
    last resort for a log whose lines never print one (glog stamps only)."""
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, tz=timezone.utc).year if path else None
    except OSError:
        return None


def seconds_between(a: str, b: str) -> float:
    """``b - a`` in seconds for two UTC ISO stamps made by :func:`stamp_in` (fractional seconds
    allowed: time series such as ``nvidia-smi --query-gpu -l`` print milliseconds)."""
    return (datetime.fromisoformat(b.replace("Z", "+00:00"))
            - datetime.fromisoformat(a.replace("Z", "+00:00"))).total_seconds()
