"""This node's network interfaces from ``/sys/class/net`` (for the NCCL environment audit).

Live state belongs in ``collect``: analysis modules take these records, never read ``/sys``.
The same records come from a bundle's ``network/ip-link.txt`` through
:mod:`gpulib.parsers.ip_link`, so a preflight on this node and an audit of a collected
incident judge the same facts.
"""

from __future__ import annotations

from pathlib import Path

from gpulib.parsers.ip_link import NetInterface

SYS_CLASS_NET = Path("/sys/class/net")
_IFF_UP = 0x1
_ARPHRD = {"1": "ether", "32": "infiniband", "772": "loopback"}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def local_interfaces(root: Path = SYS_CLASS_NET) -> list[NetInterface]:
    """One record per interface: up when administratively up (``flags`` bit 0) and its
    ``operstate`` is ``up`` (or ``unknown``, which loopback and some virtual devices report)."""
    out = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        flags = _read(path / "flags")
        operstate = _read(path / "operstate")
        try:
            admin_up = bool(int(flags or "0", 16) & _IFF_UP)
        except ValueError:
            admin_up = False
        out.append(NetInterface(name=path.name, up=admin_up and operstate in ("up", "unknown"), state=operstate,
                                link_type=_ARPHRD.get(_read(path / "type") or "", "other")))
    return out
