"""``ibstat`` and ``ibstatus`` (infiniband-diags): one record per HCA port.

Why it matters: NCCL picks the IB/RoCE HCAs at start-up. A compute HCA whose port is ``Down``
(physical state ``Polling``: no link partner, ``Disabled``: shut) makes that node fall back to
``NET/Socket`` or fail the first connection, while the other nodes use IB: a classic cause of an
interrupted multi-node job. ``Link layer: Ethernet`` ports are RoCE or management NICs; the
caller decides whether they count (see :attr:`IbPort.is_infiniband`).

``ibstat`` prints ``State: Active``; ``ibstatus`` prints ``state: 4: ACTIVE``. Both are
normalised to ``Active``/``Down``/``Init``/``Armed`` and ``LinkUp``/``Polling``/``Disabled``.
When ibstat dies part-way (``ibpanic: ... stat of IB device 'mlx5_8' failed``, exit 255) the
ports read before the panic are kept, and the failed device becomes a port record with
``error`` set, because a vanished HCA is itself evidence.

This module reads both formats into one kind, ``ibstat``: the rules ask for HCA ports, not for
the tool that printed them (an ``ibstatus`` paste is judged like ``ibstat``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from gpulib.parsers import units
from gpulib.parsers.base import ParseResult, Problem

KIND = "ibstat"

_CA = re.compile(r"^CA '(?P<ca>[^']+)'")
_PORT = re.compile(r"^\s+Port (?P<port>\d+):\s*$")
_KV = re.compile(r"^\s+(?P<key>[A-Za-z_ ]+?):\s*(?P<value>.*)$")
_IBSTATUS_HEAD = re.compile(r"^Infiniband device '(?P<ca>[^']+)' port (?P<port>\d+) status:")
_PANIC_DEVICE = re.compile(r"device '(?P<ca>[^']+)'")


@dataclass
class IbPort:
    ca: str  # "mlx5_0"
    port: int | None
    state: str | None = None  # Active, Down, Init, Armed
    physical_state: str | None = None  # LinkUp, Polling, Disabled, ...
    rate_gbps: float | None = None
    base_lid: int | None = None
    sm_lid: int | None = None
    link_layer: str | None = None  # InfiniBand | Ethernet
    ca_type: str | None = None  # MT4129 = ConnectX-7
    firmware: str | None = None
    port_guid: str | None = None
    error: str | None = None  # the tool failed on this device
    line: int | None = None

    @property
    def is_infiniband(self) -> bool:
        return (self.link_layer or "").lower() == "infiniband"

    @property
    def up(self) -> bool:
        return self.state == "Active" and self.physical_state == "LinkUp"


def looks_like(head: str) -> bool:
    first = next((line for line in head.splitlines() if line.strip()), "")
    return bool(_CA.match(first) or _IBSTATUS_HEAD.match(first) or first.startswith("ibpanic:"))


def _state(value: str) -> str | None:
    """``4: ACTIVE`` -> ``Active``; ``5: LinkUp`` -> ``LinkUp``; ``Down`` -> ``Down``."""
    text = units.text_value(value)
    if text is None:
        return None
    text = re.sub(r"^\d+:\s*", "", text)
    return text.capitalize() if text.isupper() else text


def _lid(value: str) -> int | None:
    try:
        return units.integer(value)
    except ValueError:
        return None


@lru_cache(maxsize=8192)
def _reading(key: str, value: str) -> tuple[str | None, object, str | None]:
    """(IbPort field or None, its value, why the value is unreadable or None) of one ``key: value``
    line of a port block. Pure, so remembered: every node's ibstat repeats the same few lines."""
    key = key.strip().lower().replace("_", " ")
    if key == "state":
        return "state", _state(value), None
    if key in ("physical state", "phys state"):
        return "physical_state", _state(value), None
    if key == "rate":
        try:
            return "rate_gbps", units.number(value.split("(")[0].replace("Gb/sec", "")), None
        except ValueError as exc:
            return "rate_gbps", None, str(exc)
    if key in ("base lid", "sm lid"):
        return key.replace(" ", "_"), _lid(value), None
    if key == "link layer":
        return "link_layer", units.text_value(value), None
    if key == "port guid":
        return "port_guid", units.text_value(value), None
    return None, None, None


def _apply(port: IbPort, key: str, value: str, problems: list[Problem], source: str, number: int) -> None:
    field, reading, unreadable = _reading(key, value)
    if unreadable is not None:
        problems.append(Problem(source, f"{port.ca} port {port.port} rate: {unreadable}", number))
    elif field is not None:
        setattr(port, field, reading)


#: What a line is, as :func:`_line` reads it; remembered per line (every node's ibstat repeats the
#: same lines), bounded by clearing.
_LINES: dict[str, tuple] = {}
_MAX_LINES = 50_000


def _line(raw: str) -> tuple:
    """``("blank",)``, ``("ca", name)``, ``("head", ca, port)`` (ibstatus), ``("port", number)``,
    ``("panic", text, device or None)``, ``("kv", key, value)`` or ``("other",)``."""
    line = raw.expandtabs(8).rstrip()
    if not line.strip():
        return ("blank",)
    if m := _CA.match(line):
        return ("ca", m["ca"])
    if m := _IBSTATUS_HEAD.match(line):
        return ("head", m["ca"], int(m["port"]))
    if m := _PORT.match(line):
        return ("port", int(m["port"]))
    if line.startswith("ibpanic:"):
        device = _PANIC_DEVICE.search(line)
        return ("panic", line.strip(), device["ca"] if device else None)
    if m := _KV.match(line):
        return ("kv", m["key"], m["value"])
    return ("other",)


def parse(text: str, source: str = "<text>") -> ParseResult[IbPort]:
    """Parse ibstat or ibstatus output into :class:`IbPort` records (never raises)."""
    result: ParseResult[IbPort] = ParseResult(KIND)
    ca: dict[str, str | None] = {}
    port: IbPort | None = None
    if len(_LINES) > _MAX_LINES:
        _LINES.clear()
    for number, raw in enumerate(text.splitlines(), 1):
        said = _LINES.get(raw)
        if said is None:
            said = _LINES[raw] = _line(raw)
        what = said[0]
        if what == "kv":
            _what, key, value = said
            if port is not None:
                _apply(port, key, value, result.problems, source, number)
                if key.strip().lower() == "state" and "active" not in value.lower():
                    port.line = number  # a port that is not up: the line that says so is the one quoted
            elif ca:
                ca[key.strip().lower()] = value.strip()
        elif what == "ca":
            ca, port = {"name": said[1]}, None
        elif what == "head":
            port = IbPort(ca=said[1], port=said[2], line=number)
            result.records.append(port)
        elif what == "port":
            if not ca:
                continue
            port = IbPort(ca=ca["name"], port=said[1], ca_type=ca.get("ca type"),
                          firmware=ca.get("firmware version"), line=number)
            result.records.append(port)
        elif what == "panic":
            result.problems.append(Problem(source, f"ibstat failed part-way: {said[1]}", number))
            if said[2] is not None:
                result.records.append(IbPort(ca=said[2], port=None, error=said[1], line=number))
    if not result.records and not result.problems:
        why = "empty file" if not text.strip() else "not ibstat/ibstatus output (no CA '...' or 'Infiniband device' blocks)"
        result.problems.append(Problem(source, why))
    return result
