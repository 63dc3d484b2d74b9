"""The compute NICs of a node, for the inter-node bound of the bandwidth model.

Three ways to know them, most explicit first: flags (``--nic-gbps 400 --nics 8``), ``ibstat`` as an
evidence bundle captures it (``infiniband/ibstat.txt``), or the ``NCCL_DEBUG=INFO`` lines of the run
itself (``causes.read_fabric``). From ibstat the compute NICs are the *fastest* active ports: a node's
100 Gb/s storage or management port must not count as a ninth 400 Gb/s rail, and a port that is down
carries nothing (a rail that is down is exactly why a run is slow).
"""

from __future__ import annotations

from pathlib import Path

from gpulib.errors import InputError
from gpulib.nccl.model import Nics
from gpulib.parsers import infiniband
from gpulib.parsers.base import read_text

IBSTAT_IN_BUNDLE = "infiniband/ibstat.txt"


def from_flags(nic_gbps: float | None, nics: int | None) -> Nics | None:
    if nic_gbps is None and nics is None:
        return None
    if nic_gbps is None or nics is None or nic_gbps <= 0 or nics <= 0:
        raise InputError("--nic-gbps and --nics go together, both > 0", hint="e.g. --nic-gbps 400 --nics 8")
    return Nics(int(nics), float(nic_gbps), "--nic-gbps/--nics")


def from_ibstat(path: str | Path) -> Nics | None:
    """The fastest active ports of ``ibstat`` output (a file, or a bundle folder holding one); None if none is up."""
    path = Path(path)
    if path.is_dir():
        path = path / IBSTAT_IN_BUNDLE
    text, problems = read_text(path)
    if problems and not text:
        raise InputError(f"cannot read ibstat output: {problems[0].message}", path=str(path))
    ports = [p for p in infiniband.parse(text, source=str(path)).records if p.up and p.rate_gbps]
    if not ports:
        return None
    fastest = max(p.rate_gbps for p in ports)
    count = sum(1 for p in ports if p.rate_gbps == fastest)
    return Nics(count, fastest, f"ibstat {path}")
