"""``last -x`` (and plain ``last``): the node's login, boot and shutdown history from wtmp.

Why read it: a node that lost power or was hard-reset leaves nothing in its own kernel log (the
disk stopped with it), but wtmp keeps the pattern. A clean stop writes a ``shutdown system down``
record (and a ``runlevel (to lvl 0|6)`` one) before the next ``reboot system boot``; a power loss,
a tripped PSU, a hang ended by the reset button or a BMC watchdog writes none. ``last`` says so
itself for the sessions that were open: their end reads ``- crash`` ("no logout record, a system
boot in between") instead of ``- down`` (the system was brought down cleanly).

Rows as util-linux ``last`` prints them, newest first::

    user     tty          host             login             logout   (duration)
    reboot   system boot  <kernel release> Tue Mar  3 14:30   still running
    shutdown system down  <kernel release> Tue Mar  3 02:11 - 02:14  (00:03)
    runlevel (to lvl 5)   <kernel release> Tue Mar  3 14:31   still running
    ops      pts/1        10.1.2.3         Tue Mar  3 09:12 - crash  (05:18)
    wtmp begins Sat Feb  1 00:00:03 2025

Three time formats: the default ``Tue Mar  3 14:30`` (no year; the logout only ``HH:MM``), ``-F``
(``Tue Mar  3 14:30:12 2025``) and ``--time-format iso`` (``2025-03-03T14:30:12+01:00``). The
host column is empty for a console login, missing with ``-R`` and last with ``-a``; user names
are cut at 8 characters and kernel releases at 16. Times are the node's local time.

A default-format row carries no year: the weekday fixes it (:func:`local_time` picks the year,
nearest a hint, whose calendar puts that weekday on that date). The hint is the year of the
``wtmp begins`` footer when the paste kept it; otherwise the rules give the incident's year.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from gpulib.parsers.base import ParseResult, Problem

KIND = "wtmp"

_DOW = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MON = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: One printed time in any of ``last``'s three formats.
_TIME = (r"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} "
         r"\d\d:\d\d(?::\d\d \d{4})?|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)")
_END = r"(?:- crash|- down|still running|still logged in|gone - no logout|- " + _TIME + r"|- \d\d:\d\d)"
_ROW = re.compile(
    r"^(?P<user>\S+) +(?P<tty>system boot|system down|\(to lvl \S\)|\S+)(?: +(?P<host>\S.*?))?? +"
    r"(?P<login>" + _TIME + r")(?: +(?P<end>" + _END + r"))?"
    r"(?: *\((?:-?(?P<days>\d+)\+)?-?(?P<hours>\d+):(?P<mins>\d\d)\))?(?: +(?P<host_last>\S+))? *$")
_BEGINS = re.compile(r"^(?P<file>\S+) begins (?P<time>" + _TIME + r")\s*$")
_PARTS = re.compile(r"(?P<dow>[A-Z][a-z]{2}) (?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hm>\d\d:\d\d)"
                    r"(?::(?P<sec>\d\d) (?P<year>\d{4}))?")
_ISO = re.compile(r"^(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,]\d+)?(?P<zone>Z|[+-]\d\d:?\d\d)?$")

#: ``ended`` of a row: how its session or boot ended, as ``last`` worked it out.
ENDINGS = {"- crash": "crash", "- down": "down", "still running": "running", "still logged in": "logged_in",
           "gone - no logout": "gone"}
#: Years before (after) the hint in which a year-less date is looked for: a weekday falls on the
#: same date again after 5, 6 or 11 years.
_YEARS_BACK, _YEARS_AHEAD = 11, 1


@dataclass
class WtmpRecord:
    """One ``last`` row. ``kind``: ``boot``, ``shutdown``, ``runlevel``, ``clock`` (date changes)
    or ``session``. ``login`` is the start as printed; ``login_local`` the same as a naive ISO
    local time (with its offset for the ISO format), None while the year is unknown (see
    :func:`local_time`). ``ended``: ``crash`` (the system went down with no shutdown record and
    the session never logged out), ``down`` (a clean shutdown ended it), ``running`` / ``logged_in``
    (still up when ``last`` ran), ``gone``, ``logout`` (a printed end time) or None (no end column)."""

    line: int
    kind: str
    user: str
    tty: str
    host: str | None  # remote host of a session; the kernel release of a boot/shutdown/runlevel row
    login: str
    login_local: str | None
    ended: str | None
    duration_min: int | None  # the ``(d+hh:mm)`` column
    runlevel: str | None  # '0'..'6' for ``(to lvl N)`` rows
    text: str

    @property
    def clean_stop(self) -> bool:
        """A record written by an orderly shutdown: ``shutdown system down`` or ``(to lvl 0|6)``."""
        return self.kind == "shutdown" or (self.kind == "runlevel" and self.runlevel in ("0", "6"))


@dataclass
class WtmpBegins:
    """The footer ``wtmp begins <time>``: the oldest record the file holds (a complete listing)."""

    line: int
    file: str
    begins: str
    begins_local: str | None


#: Words one of which a ``last`` listing's head holds (a substring test spares the row pattern on
#: every other file: detection asks every parser about every file of an incident).
_MARKS = ("system boot", "system down", "(to lvl", "- crash", "- down", "still logged in", " begins ")


def looks_like(head: str) -> bool:
    """A ``last`` listing: a boot/shutdown/run-level row, a session ended by ``crash``/``down``, or the footer."""
    if not any(mark in head for mark in _MARKS):
        return False
    for line in head.splitlines():
        m = _ROW.match(line.rstrip())
        if m and (m["tty"] in ("system boot", "system down") or m["tty"].startswith("(to lvl")
                  or (m["end"] or "").startswith(("- crash", "- down", "still logged in"))):
            return True
        if _BEGINS.match(line.strip()):
            return True
    return False


def local_time(printed: str, year_hint: int | None = None, *, earliest_year: int | None = None) -> str | None:
    """A printed ``last`` time as ISO local time (``2025-02-11T09:12:00``; ISO input keeps its
    offset), or None. A default-format time has no year: it gets the first year from
    ``earliest_year`` on (the ``wtmp begins`` footer: no row is older), else the year nearest
    ``year_hint`` (at most one after it), on which the printed date falls on the printed weekday;
    with neither it stays None."""
    m = _ISO.match(printed.strip())
    if m:
        return m["stamp"] + (m["zone"] or "")
    m = _PARTS.fullmatch(printed.strip())
    if not m or m["mon"] not in _MON or m["dow"] not in _DOW:
        return None
    month, day = _MON.index(m["mon"]) + 1, int(m["day"])
    if m["year"]:
        year = int(m["year"])
    elif earliest_year is None and year_hint is None:
        return None
    else:
        weekday = _DOW.index(m["dow"])
        years = (range(earliest_year, earliest_year + _YEARS_BACK + 1) if earliest_year is not None else
                 sorted(range(year_hint - _YEARS_BACK, year_hint + _YEARS_AHEAD + 1), key=lambda y: abs(y - year_hint)))
        year = next((y for y in years if _weekday(y, month, day) == weekday), None)
        if year is None:
            return None
    if _weekday(year, month, day) is None:
        return None
    return f"{year:04d}-{month:02d}-{day:02d}T{m['hm']}:{m['sec'] or '00'}"


def _weekday(year: int, month: int, day: int) -> int | None:
    try:
        return date(year, month, day).weekday()
    except ValueError:
        return None


def _kind(user: str, tty: str) -> str:
    if user == "reboot" or tty == "system boot":
        return "boot"
    if user == "shutdown" or tty == "system down":
        return "shutdown"
    if tty.startswith("(to lvl"):
        return "runlevel"
    if tty in ("new time", "old time") or user == "date":
        return "clock"
    return "session"


def parse(text: str, source: str = "<text>", *, year: int | None = None) -> ParseResult[WtmpRecord | WtmpBegins]:
    """Every ``last`` row and the ``begins`` footer of ``text`` (never raises). Lines that are not
    ``last`` output (a pasted prompt, other commands' output) are skipped; a text without a single
    row is a problem. ``year``: the hint for year-less times when there is no footer."""
    result: ParseResult = ParseResult(KIND)
    if "\x00" in text:
        result.problems.append(Problem(source, "binary data, not `last` output"))
        return result
    rows: list[WtmpRecord] = []
    footer: WtmpBegins | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        m = _BEGINS.match(line.strip())
        if m:
            footer = WtmpBegins(number, m["file"], m["time"], local_time(m["time"]))
            continue
        m = _ROW.match(line)
        if not m:
            continue
        end = " ".join((m["end"] or "").split())
        minutes = (int(m["days"] or 0) * 1440 + int(m["hours"]) * 60 + int(m["mins"])) if m["hours"] else None
        tty = m["tty"]
        rows.append(WtmpRecord(
            line=number, kind=_kind(m["user"], tty), user=m["user"], tty=tty,
            host=(m["host"] or m["host_last"] or "").strip() or None, login=m["login"], login_local=None,
            ended=ENDINGS.get(end, "logout" if end.startswith("- ") else None), duration_min=minutes,
            runlevel=tty[-2] if tty.startswith("(to lvl") else None, text=line.strip()))
    if not rows and footer is None:
        result.problems.append(Problem(source, "no `last` rows (user, tty, host, login time) found"))
        return result
    earliest = int(footer.begins_local[:4]) if footer and footer.begins_local else None
    for rec in rows:
        rec.login_local = local_time(rec.login, year, earliest_year=earliest)
    result.records = [*rows, *([footer] if footer else [])]
    return result


__all__ = ["KIND", "WtmpBegins", "WtmpRecord", "local_time", "looks_like", "parse"]
