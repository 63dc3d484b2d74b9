"""Line prefixes of every kernel-log format, and their times normalised to UTC.

A kernel message reaches the operator wrapped in one of many prefixes, depending on how it was
captured. The message is the same; the clock is not:

==========================  ==========================================  ===========================
format                      example prefix                              clock
==========================  ==========================================  ===========================
``dmesg -T``                ``[Tue Mar 11 03:12:07 2025] ``              local wall time, no zone
``dmesg -H`` / ``-e``        ``[Mar11 03:12] `` then ``[  +0.000912] ``      local minute, then seconds since
                                                                        the line before (no zone, no year)
raw ``dmesg``               ``[12345.678901] ``                          seconds since boot
``dmesg --time-format=iso`` ``2024-11-15T05:39:15,491363+00:00 ``        wall time with offset
``dmesg --decode``          ``kern  :warn  : `` then one of the above    (as the inner prefix)
``journalctl -o short-iso`` ``2025-01-17T17:10:43+0000 host kernel: ``   wall time with offset
syslog / ``journalctl``     ``Mar 11 03:12:07 host kernel: ``            local time, no zone, no year
``/dev/kmsg``               ``6,3964,206764307,-;``                      microseconds since boot
pstore / ERST               ``<6>[  201.650687] ``                       seconds since boot
nv-fabricmanager log        ``[Feb 27 2025 15:10:02] [ERROR] ``          local wall time, no zone
==========================  ==========================================  ===========================

``dmesg -H`` (``--human``, ``-e``/``--reltime``) prints the local minute only when it changes and, on
every other line, the seconds since the line before: a line's time is its minute plus the deltas
printed since, which only a reader that sees every line can sum (the kernel-log scanner does).

`dmesg -T` is also *wrong* after suspend/resume and drifts (it is boot time + monotonic seconds),
which is one more reason to prefer ``--time-format=iso`` or the journal when collecting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from gpulib.parsers.logtime import fixed_offset

MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}
_MON = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"

_DECODE = re.compile(
    r"(?:kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])\s*:"
    r"\s*(?:emerg|alert|crit|err|warn|notice|info|debug)\s*:\s?")
_PRIO = re.compile(r"<\d{1,3}>")
#: ``> `` (nested ``> > ``) in front of lines pasted into an issue, a chat or an e-mail.
MARKDOWN_QUOTE = re.compile(r"(?:[ ]{0,3}>[ ]?)+")
#: ``pdsh -w node[01-16] dmesg -T`` / clush prefix each line with ``host: `` before the kernel's clock.
_FANOUT_HOST = re.compile(
    r"([A-Za-z][\w.-]*): (?=\[ *[\d+]|\[[A-Z][a-z]{2}[ \d]|<\d|\d{4}-\d\d-\d\d|[A-Z][a-z]{2} [ \d]\d \d)")
_CTIME = re.compile(
    rf"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) +({_MON}) +(\d{{1,2}}) (\d\d):(\d\d):(\d\d) (\d{{4}})\] ?")
_MONO = re.compile(r"\[ *(\d+)\.(\d+)\] ?")
# dmesg -H: "[Feb17 13:42] " when the minute changes, else "[  +0.000912] " (seconds since the line before)
_HUMAN_MINUTE = re.compile(rf"\[({_MON})(\d{{1,2}}) (\d\d):(\d\d)\] ?")
_HUMAN_DELTA = re.compile(r"\[ *\+ *(\d+\.\d+)\] ?")
#: Every dmesg -H stamp at a line start (after an optional markdown quote or pdsh host): the minute or the delta.
HUMAN_STAMP = re.compile(rf"^(?:[ ]{{0,3}}>[ ]?)*(?:(?P<host>[A-Za-z][\w.-]*): )?\[(?:(?P<mon>{_MON})(?P<day>\d{{1,2}}) "
                         r"(?P<h>\d\d):(?P<mi>\d\d)| *\+ *(?P<delta>\d+\.\d+))\]", re.M)
_FM = re.compile(rf"\[({_MON}) +(\d{{1,2}}) (\d{{4}}) (\d\d):(\d\d):(\d\d)\] ?")
_ISO = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:([.,])(\d{1,9}))?(Z|[+-]\d\d:?\d\d)? ?")
# dmesg --time-format=iso is exactly this shape (comma, microseconds, offset with a colon)
_DMESG_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d ")
# journalctl -o short-full: "Tue 2025-03-11 03:12:07 UTC host kernel: ..."
_FULL = re.compile(r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)? (\S+) ")
_KMSG = re.compile(r"(\d{1,3}),(\d+),(\d+),[^;]*;")
_SYSLOG = re.compile(rf"({_MON}) +(\d{{1,2}}) (\d\d):(\d\d):(\d\d)(?:\.\d+)? ")
#: journalctl and rsyslog print the month with the locale's ``%b``: ``kwi 15 07:56:59 host kernel: ...``
#: (Polish), ``Mär``/``Okt`` (German), ``avril``, ``ago``, ``июл``. Tried only when the English month is not there.
LOCAL_MONTHS = {name: number for number, names in enumerate((
    "sty gen ene janv. янв", "lut fev févr. фев", "mär mars", "kwi abr avril апр", "maj mai mag мая",
    "cze giu juin июн", "lip lug juil. июл", "sie ago août авг", "wrz set sept. сен", "paź okt ott out окт",
    "lis ноя", "gru dez dic déc. дек"), start=1) for name in names.split()}
_LOCAL_SYSLOG = re.compile(r"(\w{3,4}\.?|\w{5}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(?:\.\d+)? ")
# "host ident[pid]: " after a journal/syslog timestamp
_HOST_IDENT = re.compile(r"([^\s\[\]:]+) ([^\s\[\]:]+)(?:\[(\d+)\])?:(?: |$)")
_JOURNAL_HEADER = re.compile(
    r"-- (?:Journal begins|Logs begin) at \w+ (\d{4})-(\d\d)-(\d\d) [\d:]+ (\S+?),")


@dataclass
class Prefix:
    """What the prefix of one line said. ``clock`` is one of: wall (aware), local (naive wall
    time, zone unknown), syslog (naive, year unknown), boot (seconds since boot), human (``dmesg -H``
    minute header: ``month``/``day``/``hms`` with seconds 0), delta (``dmesg -H`` seconds since the
    line before, in ``delta_s``), none."""

    clock: str
    message: str
    wall: datetime | None = None
    month: int = 0
    day: int = 0
    hms: tuple[int, int, int] = (0, 0, 0)
    uptime_s: float | None = None
    delta_s: float | None = None
    host: str | None = None
    ident: str | None = None
    fmt: str = "unknown"


def split_prefix(line: str) -> Prefix:
    """Recognise the capture format of one line and split its prefix from the message."""
    pos = 0
    m = MARKDOWN_QUOTE.match(line)  # pasted into an issue or a chat as a quote
    if m:
        pos = m.end()
    m = _FANOUT_HOST.match(line, pos)  # pdsh/clush: "node07: [Tue Mar 11 ...] NVRM: ..."
    if m:
        prefix = _split_at(line, m.end())
        if prefix.clock != "none":  # a host prefix stands before a kernel clock, else it was no prefix:
            prefix.host = prefix.host or m[1]  # "pkg.module.SomeError: [702] Call to ..." is a message
            return prefix
    return _split_at(line, pos)


def _split_at(line: str, pos: int) -> Prefix:
    fmt_outer = ""
    m = _DECODE.match(line, pos)
    if m:
        pos, fmt_outer = m.end(), "dmesg --decode "
    m = _PRIO.match(line, pos)
    if m:
        pos = m.end()
    first = line[pos:pos + 1]
    if first == "[":
        m = _CTIME.match(line, pos)
        if m:
            mon, day, hh, mi, ss, year = m.groups()
            wall = datetime(int(year), MONTHS[mon], int(day), int(hh), int(mi), int(ss))
            return Prefix("local", line[m.end():], wall=wall, fmt=fmt_outer + "dmesg -T")
        m = _MONO.match(line, pos)
        if m:
            rest, host = line[m.end():], None
            h = _HOST_IDENT.match(rest)
            if h and h[2] == "kernel":  # journalctl -o short-monotonic
                rest, host = rest[h.end():], h[1]
            return Prefix("boot", rest, uptime_s=float(f"{m[1]}.{m[2]}"), host=host, fmt=fmt_outer + "dmesg")
        m = _FM.match(line, pos)
        if m:
            mon, day, year, hh, mi, ss = m.groups()
            wall = datetime(int(year), MONTHS[mon], int(day), int(hh), int(mi), int(ss))
            return Prefix("local", line[m.end():], wall=wall, fmt="fabricmanager")
        m = _HUMAN_DELTA.match(line, pos)
        if m:
            return Prefix("delta", line[m.end():], delta_s=float(m[1]), fmt=fmt_outer + "dmesg -H")
        m = _HUMAN_MINUTE.match(line, pos)
        if m:
            mon, day, hh, mi = m.groups()
            return Prefix("human", line[m.end():], month=MONTHS[mon], day=int(day), hms=(int(hh), int(mi), 0),
                          fmt=fmt_outer + "dmesg -H")
    elif first.isdigit():
        m = _ISO.match(line, pos)
        if m:
            y, mo, d, hh, mi, ss, sep, frac, off = m.groups()
            try:
                wall = datetime(int(y), int(mo), int(d), int(hh), int(mi), int(ss),
                                int((frac or "0")[:6].ljust(6, "0")))
            except ValueError:
                return Prefix("none", line)
            if off:
                wall = wall.replace(tzinfo=fixed_offset(off))
            rest = line[m.end():]
            if _DMESG_ISO.match(line, pos):  # no host field in dmesg output
                return Prefix("wall", rest, wall=wall, fmt=fmt_outer + "dmesg --time-format=iso")
            # journal short-iso / rsyslog RFC 3339: 'T', dot fraction, an offset, then "host ident:"
            h = _HOST_IDENT.match(rest) if off and sep != "," and line[pos + 10] == "T" else None
            if h:
                return Prefix("wall", _strip_mono(rest[h.end():]), wall=wall, host=h[1],
                              ident=h[2], fmt="journal short-iso")
            return Prefix("wall" if off else "local", rest, wall=wall, fmt="iso")
        m = _KMSG.match(line, pos)
        if m:
            return Prefix("boot", line[m.end():], uptime_s=int(m[3]) / 1e6, fmt="/dev/kmsg")
    else:
        m = _FULL.match(line, pos)
        if m:
            y, mo, d, hh, mi, ss, zone = m.groups()
            rest = line[m.end():]
            h = _HOST_IDENT.match(rest)
            if h:
                try:
                    wall = datetime(int(y), int(mo), int(d), int(hh), int(mi), int(ss))
                except ValueError:
                    return Prefix("none", line)
                utc = zone in ("UTC", "GMT")
                return Prefix("wall" if utc else "local", _strip_mono(rest[h.end():]),
                              wall=wall.replace(tzinfo=timezone.utc) if utc else wall, host=h[1], ident=h[2],
                              fmt=f"journal short-full ({zone})")
        m = _SYSLOG.match(line, pos)
        month = MONTHS[m[1]] if m else 0
        if m is None and first.isalpha():
            m = _LOCAL_SYSLOG.match(line, pos)
            month = LOCAL_MONTHS.get(m[1].lower(), 0) if m else 0
        if month:
            _mon, day, hh, mi, ss = m.groups()
            rest = line[m.end():]
            h = _HOST_IDENT.match(rest)
            host = ident = None
            if h:
                rest, host, ident = _strip_mono(rest[h.end():]), h[1], h[2]
            return Prefix("syslog", rest, month=month, day=int(day),
                          hms=(int(hh), int(mi), int(ss)), host=host, ident=ident, fmt="syslog")
    if fmt_outer or pos:
        return Prefix("none", line[pos:], fmt=fmt_outer.strip() or "printk")
    return Prefix("none", line)


def _strip_mono(message: str) -> str:
    """kern.log lines repeat the dmesg clock after the syslog prefix: drop it from the message."""
    if message.startswith("["):
        m = _MONO.match(message)
        if m:
            return message[m.end():]
    return message


def parse_instant(value: str | float | int | None) -> datetime | None:
    """ISO-8601 (with or without zone; naive means UTC) or epoch seconds -> aware UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    text = str(value).strip()
    try:
        return datetime.fromtimestamp(float(text), tz=timezone.utc)
    except ValueError:
        pass
    m = _ISO.fullmatch(text + " ") or _ISO.fullmatch(text)
    if not m:
        return None
    y, mo, d, hh, mi, ss, _sep, frac, off = m.groups()
    try:
        moment = datetime(int(y), int(mo), int(d), int(hh), int(mi), int(ss), int((frac or "0")[:6].ljust(6, "0")))
    except ValueError:
        return None
    return moment.replace(tzinfo=fixed_offset(off) if off else timezone.utc).astimezone(timezone.utc)


def journal_header(line: str) -> tuple[int, str] | None:
    """(year, zone abbreviation) from journalctl's '-- Journal begins at ...' / '-- Logs begin at ...'."""
    m = _JOURNAL_HEADER.match(line)
    return (int(m[1]), m[4]) if m else None
