"""Identity and time: the keys that join the kernel side to the job side.

GPUs are joined on UUID or on a *normalised* PCI bus id. The same device is spelled
``PCI:0000:9b:00`` in kernel Xid lines, ``00000000:9B:00.0`` by nvidia-smi, ``9b000`` as an NCCL
``busId`` and ``0000:9b:00.0`` in sysfs; all of them normalise to ``0000:9b:00.0`` (lower case,
4-digit domain, function included).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

_PCI_FULL = re.compile(
    r"(?:PCI:)?(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})(?:\.(?P<fn>[0-7]))?$"
)
_NCCL_BUSID = re.compile(r"^(?P<head>[0-9a-fA-F]{1,6})(?P<dev>[0-9a-fA-F]{2})(?P<fn>[0-7])$")


def normalize_pci(value: str | None) -> str | None:
    """Return ``dddd:bb:dd.f`` (lower case) for any PCI spelling, or None when it is not one.

    >>> normalize_pci("00000000:9B:00.0"), normalize_pci("PCI:0000:9b:00"), normalize_pci("9b000")
    ('0000:9b:00.0', '0000:9b:00.0', '0000:9b:00.0')
    """
    if not value:
        return None
    text = value.strip()
    m = _PCI_FULL.match(text)
    if m:
        domain = int(m["domain"] or "0", 16)
        return f"{domain:04x}:{m['bus'].lower()}:{m['dev'].lower()}.{m['fn'] or '0'}"
    m = _NCCL_BUSID.match(text)
    if m:  # NCCL prints "dddd:bb:dd.f" with the separators removed, as a hex number: 9b000
        head = int(m["head"], 16)
        return f"{head >> 8:04x}:{head & 0xFF:02x}:{m['dev'].lower()}.{m['fn']}"
    return None


def to_utc_iso(moment: datetime) -> str:
    """ISO-8601 UTC with a ``Z`` suffix; naive datetimes are taken as UTC already."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now_iso() -> str:
    return to_utc_iso(datetime.now(timezone.utc))
