"""The typed result of a preflight check, and the same as the one finding model."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulib import exit_codes
from gpulib.findings import Finding, event_id


@dataclass
class EnvFinding:
    """One problem with the job's environment. ``fix`` is the exact line to put in the job
    script (``export NCCL_SOCKET_IFNAME=ib0``), or None when the fix is not a line (upgrade the driver)."""

    check: str  # stable id: "nccl-socket-ifname-no-match"
    severity: str  # error (no-go) | warning | info
    variable: str | None  # NCCL_SOCKET_IFNAME, or None for version checks
    message: str
    fix: str | None = None
    hosts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"check": self.check, "severity": self.severity, "variable": self.variable, "message": self.message,
                "fix": self.fix, "hosts": list(self.hosts)}


def exit_code(findings: list[EnvFinding]) -> int:
    """The worst finding's exit code (:func:`gpulib.exit_codes.for_severities`): no-go 3, warnings 1, healthy 0."""
    return exit_codes.for_severities(f.severity for f in findings)


def as_finding(check: EnvFinding) -> Finding:
    """The check as the one finding model (the preflight's go/no-go counts it with the others): a
    version check is ``driver_mismatch``, an NCCL variable ``network_fabric``; an error is no-go."""
    return Finding(event_id(check.check), "error" if check.severity == "error" else check.severity,
                   "driver_mismatch" if check.variable is None else "network_fabric", check.message,
                   actions=[check.fix] if check.fix else [], extra={"hosts": list(check.hosts)} if check.hosts else {})
