"""Numbers, times and units as people read them: ``79``, ``35 °C``, ``0.27 s``, ``2025-04-22T12:51:30Z``.

Why a module of its own: pandas prints a column that holds one missing value as floats
(``79.0`` for an Xid code), timestamps with six-digit microseconds (``12:51:30.270000+00:00``)
and durations as ``0 days 00:00:00.270000``; at 03:00 every extra digit is something to parse.
The notebooks' tables (:func:`gpulib.notebook.display.table`) and the runbook report's
parameters use these functions, so a value reads the same in JupyterLab and in the archive.

Units come from the column name's suffix, the convention of the parsers (``temp_c``,
``power_draw_w``, ``mem_used_mib``, ``step_time_s``): see :data:`UNITS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from typing import Any

#: Column-name suffix -> unit shown after the number.
UNITS = {"_c": "°C", "_w": "W", "_mhz": "MHz", "_mib": "MiB", "_gib": "GiB", "_s": "s", "_ms": "ms",
         "_pct": "%", "_gbps": "GB/s", "_bytes": "B"}


def unit_of(name: str | None) -> str | None:
    """The unit a column or parameter name carries (``temp_limit_c`` -> ``°C``), or None."""
    if not name:
        return None
    lower = str(name).lower()
    return next((unit for suffix, unit in UNITS.items() if lower.endswith(suffix)), None)


def number(value: float | int, unit: str | None = None) -> str:
    """``79``, ``0.27``, ``1627.5``: integers without ``.0``, at most two decimals, no trailing zeros."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "" if math.isnan(value) else str(value)
    if float(value).is_integer():
        text = str(int(value))
    else:
        text = f"{value:.2f}".rstrip("0").rstrip(".")
        if text in ("0", "-0"):  # a tiny value must not read as zero
            text = f"{value:.2g}"
    return f"{text} {unit}" if unit else text


def timestamp(value: datetime) -> str:
    """ISO-8601 in UTC with ``Z``; fractions of a second only when there are some (milliseconds)."""
    if getattr(value, "tzinfo", None) is not None:  # aware: shift to UTC; naive times are UTC already
        offset = value.utcoffset()
        value = (value - offset).replace(tzinfo=None) if offset else value.replace(tzinfo=None)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    micro = value.microsecond
    if micro:
        text += f".{micro // 1000:03d}".rstrip("0") if micro >= 1000 else f".{micro:06d}".rstrip("0")
    return text + "Z"


def duration(value: timedelta) -> str:
    """Seconds, minutes or hours: ``0.27 s``, ``12.5 min``, ``3.1 h``."""
    seconds = value.total_seconds()
    if abs(seconds) < 120:
        return number(seconds, "s")
    if abs(seconds) < 7200:
        return number(seconds / 60, "min")
    return number(seconds / 3600, "h")


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN, NaT and pandas.NA compare unequal to themselves
    except (TypeError, ValueError):  # pandas.NA raises on bool(); arrays are not missing
        return value.__class__.__name__ in ("NAType", "NaTType")


def text(value: Any, name: str | None = None) -> str:
    """One value as a table cell or parameter shows it; ``name`` (the column) gives the unit."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(text(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={text(v)}" for k, v in value.items())
    if is_missing(value):
        return ""
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):
        return "yes" if value else "no"
    if isinstance(value, datetime):  # pandas.Timestamp is a datetime
        return timestamp(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):  # pandas.Timedelta is a timedelta
        return duration(value)
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        value = value.item()
    if isinstance(value, (int, float)):
        return number(value, unit_of(name))
    return str(value)


def parameter_lines(parameters: Mapping[str, Any]) -> list[str]:
    """``key = value`` per parameter, as a notebook's parameters cell or ``-p`` spells it: strings
    unquoted (an empty one as ``""``), booleans as ``True``/``False``, numbers with the unit their
    name carries."""
    def shown(key: str, value: Any) -> str:
        if isinstance(value, str):
            return value if value else '""'
        if isinstance(value, bool):
            return str(value)
        return text(value, key)

    return [f"{key} = {shown(key, value)}" for key, value in parameters.items()]
