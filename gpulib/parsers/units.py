"""Reading nvidia-smi style values: numbers with units, placeholders, yes/no, timestamps.

nvidia-smi spells "no reading" many ways: ``N/A`` (-q, XML), ``[N/A]``, ``[Not Supported]``,
``[Function Not Found]``, ``[Requested functionality has been deprecated]`` (CSV), ``ERR!``
(default table), ``-`` (dmon), ``Unknown Error`` (-q). All of them mean "this GPU could not tell
us", which is a value (``None``), not a parse failure: a GeForce has no ECC, a MIG GPU has no
utilization, a lost GPU has no temperature. Every parser uses these helpers so the spellings
are handled in one place.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from gpulib.parsers.logtime import parse_zone

_PLACEHOLDERS = {
    "",
    "n/a",
    "na",
    "-",
    "none",
    "err!",
    "unknown error",
    "not supported",
    "not available",
    "function not found",
    "requested functionality has been deprecated",
    "insufficient permissions",
    "gpu is lost",
    "gpu requires reset",
    "unknown",
}

# "1410 MHz", "-8 C", "67.74 W", "16x", "0 us", "3875 KB/s", "85 %", "1 bank(s)".
_NUMBER = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/()!.]*)\s*$")
_HEX = re.compile(r"^\s*0x([0-9a-fA-F]+)\s*$")


def is_placeholder(value: str | None) -> bool:
    """True for every nvidia-smi spelling of "no value" (``N/A``, ``[N/A]``, ``ERR!``, ``-``...)."""
    if value is None:
        return True
    text = value.strip().strip("[]").strip().lower()
    return text in _PLACEHOLDERS


def number(value: str | None) -> float | None:
    """The number in ``'1410 MHz'``, ``'-8 C'``, ``'16x'``, ``'67.74 W'``; None for placeholders.

    Raises ValueError for text that is neither a number nor a known placeholder, so a caller
    can report the field as unreadable (a renamed or corrupted field, not a missing reading).
    """
    if is_placeholder(value):
        return None
    assert value is not None
    m = _NUMBER.match(value)
    if not m:
        raise ValueError(f"not a number: {value.strip()!r}")
    return float(m.group(1))


def integer(value: str | None) -> int | None:
    """Like :func:`number` but an int; also accepts hex (``0x68``)."""
    if is_placeholder(value):
        return None
    assert value is not None
    m = _HEX.match(value)
    if m:
        return int(m.group(1), 16)
    num = number(value)
    return None if num is None else int(num)


def yes_no(value: str | None) -> bool | None:
    """``Yes``/``No``, ``Active``/``Not Active``, ``Enabled``/``Disabled`` -> bool; else None."""
    if is_placeholder(value):
        return None
    assert value is not None
    text = value.strip().strip("[]").strip().lower()
    if text in ("yes", "active", "enabled", "true", "on", "1"):
        return True
    if text in ("no", "not active", "disabled", "false", "off", "0"):
        return False
    raise ValueError(f"not yes/no: {value.strip()!r}")


def text_value(value: str | None) -> str | None:
    """Stripped text, or None for a placeholder."""
    if is_placeholder(value):
        return None
    assert value is not None
    return value.strip()


_TIME_FORMATS = (
    "%a %b %d %H:%M:%S %Y",  # nvidia-smi -q / -x / table header: "Wed Jul 31 11:22:39 2024"
    "%Y/%m/%d %H:%M:%S.%f",  # --query-gpu timestamp: "2025/04/22 10:58:30.154"
    "%Y/%m/%d %H:%M:%S",
    "%Y%m%d %H:%M:%S",  # dmon -o DT: "20250422 10:58:30"
    "%Y-%m-%d %H:%M:%S",
)

#: ``2025/04/22 10:58:30.154`` and ``2025-04-22 10:58:30``: the numeric forms of :data:`_TIME_FORMATS`.
_NUMERIC_STAMP = re.compile(r"^(\d{4})[/-](\d\d)[/-](\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")

NAIVE_TIME_NOTE = "nvidia-smi prints local time without a zone; kept as written (pass tz= to convert)"


def parse_time(value: str | None, tz: str | None = None) -> tuple[str | None, str | None]:
    """Parse an nvidia-smi timestamp.

    Returns ``(iso, note)``. With ``tz`` (an IANA name such as ``"UTC"`` or
    ``"Europe/Berlin"``, usually the evidence bundle's timezone) the time is converted to UTC
    and ends in ``Z``. Without it the time stays naive (no zone, exactly as the machine's clock
    showed it) and ``note`` says so, because nvidia-smi never prints the zone. Unreadable text
    gives ``(None, reason)``.
    """
    if is_placeholder(value):
        return None, None
    assert value is not None
    text = " ".join(value.split())
    fast = _NUMERIC_STAMP.match(text)  # --query-gpu time series: one stamp per GPU per sample, skip strptime
    if fast:
        y, mo, d, h, mi, s, frac = fast.groups()
        try:
            moment = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int((frac or "0").ljust(6, "0")))
        except ValueError:
            return None, f"unreadable timestamp {value.strip()!r}"
    else:
        for fmt in _TIME_FORMATS:
            try:
                moment = datetime.strptime(text, fmt)
                break
            except ValueError:
                continue
        else:
            return None, f"unreadable timestamp {value.strip()!r}"
    if tz is None:
        return moment.isoformat(timespec="milliseconds" if moment.microsecond else "seconds"), NAIVE_TIME_NOTE
    zone = parse_zone(tz)
    if zone is None:
        return moment.isoformat(), f"unknown time zone {tz!r}; kept as written"
    utc = moment.replace(tzinfo=zone).astimezone(timezone.utc)
    spec = "milliseconds" if utc.microsecond else "seconds"
    return utc.replace(tzinfo=None).isoformat(timespec=spec) + "Z", None


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Remove terminal escapes (nvidia-smi underlines the topo header even into a file)."""
    return _ANSI.sub("", text)
