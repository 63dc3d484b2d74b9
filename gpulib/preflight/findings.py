"""The preflight's environment checks as the one finding model (:class:`gpulib.findings.Finding`).

Why no record of their own: the preflight's go/no-go counts these with the node's self-check and
the fabric test, the notebook writes them to the same ``findings-08.json``, and an operator reads
one shape everywhere. A check's stable name is the finding's ``id``, its message the ``title``,
the exact line to put in the job script (``export NCCL_SOCKET_IFNAME=ib0``) its one ``action``;
the variable it is about and the hosts it concerns travel in ``extra`` (``variable``, ``hosts``).
"""

from __future__ import annotations

from collections.abc import Iterable

from gpulib import exit_codes
from gpulib.findings import Finding, event_id


def env_finding(check: str, severity: str, variable: str | None, message: str, fix: str | None = None,
                hosts: Iterable[str] = ()) -> Finding:
    """One problem with the job's environment. ``check``: its stable id (``nccl-socket-ifname-no-match``);
    ``severity``: error (no-go) | warning | info; ``variable``: ``NCCL_SOCKET_IFNAME``, or None for a
    version check (its category is then ``driver_mismatch``, else ``network_fabric``); ``fix``: the
    line to put in the job script, or None when the fix is not a line (upgrade the driver)."""
    extra: dict = {"variable": variable} if variable else {}
    if hosts := list(hosts):
        extra["hosts"] = hosts
    return Finding(event_id(check), severity, "driver_mismatch" if variable is None else "network_fabric", message,
                   actions=[fix] if fix else [], extra=extra).check()


def exit_code(findings: list[Finding]) -> int:
    """The worst finding's exit code (:func:`gpulib.exit_codes.for_severities`): no-go 3, warnings 1, healthy 0."""
    return exit_codes.for_severities(f.severity for f in findings)
