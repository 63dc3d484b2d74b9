"""A kernel clock printed without a zone, read against the job's zoned clock.

``journalctl -k`` (short), syslog and ``dmesg -T`` print the machine's local wall time with no
zone; ``docker logs --timestamps``, Kubernetes and most loggers print UTC with a ``Z`` (or an
offset). With neither ``--tz`` nor a bundle manifest naming the zone, the kernel clock is read as
UTC - and on a workstation in CET its Xid 79 lands an hour *after* the CUDA error it caused, so
the engine blames the application.

The zone is recovered from the evidence itself, conservatively: a whole- or half-hour offset is
adopted for one kernel log only when, read under it, a hardware event of that log (an Xid, a GPU
that fell off the bus) comes within :data:`ALIGN_S` seconds of the first error a zoned job log on
that host reported, when no event lines up as read, and when exactly one offset does. Offsets that
line nothing up leave the file as read; an explicit ``--tz`` or a bundle's zone is never second-
guessed (the caller does not ask). Every adopted offset is said on the file ("kernel clock read as
UTC+01:00: ...") so the operator can check it.
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import datetime, timedelta

from gpulib.evidence import kinds
from gpulib.identity import to_utc_iso
from gpulib.parsers.base import Problem
from gpulib.parsers.logtime import ISO_STAMP
from gpulib.parsers.training_log import INFO_KINDS

#: How close (seconds) a hardware event and the job's first error must come to be one moment: the
#: driver logs the Xid, the next CUDA call in the job fails a moment later (or logs a moment late).
ALIGN_S = 5
#: Offsets of the world's zones from UTC, in half hours: -12:00 ... +14:00 (UTC itself excluded).
OFFSETS_S = tuple(half * 1800 for half in range(-24, 29) if half)
#: Kernel events that are the hardware failing (the GPU-side cause a job error follows).
HARDWARE_EVENTS = frozenset({"xid", "fell_off_bus"})


def align(files: list) -> None:
    """Shift each zone-less kernel log of ``files`` (:class:`~gpulib.evidence.gather.InputFile`)
    by the one offset that puts its hardware event on its job's first error, where there is one."""
    errors: dict[str | None, set[tuple[float, str]]] = {}
    for host, when, where in _first_errors(files):
        errors.setdefault(host, set()).add((when, where))
    if not errors:
        return
    used = _job_gpus(files)
    for f in files:
        if f.kind != kinds.KERNEL_LOG or f.timezone or f.summary_only:
            continue
        gpus = used.get(f.host, set()) | used.get(None, set())
        hardware = {}  # epoch second -> first line: an Xid storm repeats the same few seconds
        for e in f.records:
            if e.kind in HARDWARE_EVENTS and e.time_utc and "time_assumption" in e.details and (
                    not gpus or e.pci_bus_id in gpus):
                hardware.setdefault(_epoch(e.time_utc), e.line)
        if not hardware:
            continue
        mine = sorted(errors.get(None, set()) | (errors.get(f.host, set()) if f.host else set()))
        if not mine:
            continue
        times = [when for when, _ in mine]
        if any(_nearest(times, moment) is not None for moment in hardware):
            continue  # lines up as read: the clock needs no offset
        fits = {}
        for offset in OFFSETS_S:
            for moment, line in hardware.items():
                if (at := _nearest(times, moment - offset)) is not None:
                    fits.setdefault(offset, (line, mine[at][1]))
        if len(fits) == 1:
            ((offset, (line, where)),) = fits.items()
            _shift(f, offset, line, where)


def _first_errors(files: list) -> list[tuple[str | None, float, str]]:
    """(host, epoch seconds, where) of the first failure each job log printed with a zoned stamp."""
    out = []
    for f in files:
        if f.kind != kinds.TRAINING_LOG:
            continue
        first = min((e for e in f.records if e.kind not in INFO_KINDS and e.time_utc and not e.time_approx
                     and _zoned(e.text)), key=lambda e: e.time_utc, default=None)
        if first is not None:
            out.append((first.host or f.host, _epoch(first.time_utc), f"{f.display}:{first.line}"))
    return out


def _nearest(times: list[float], moment: float) -> int | None:
    """Index in sorted ``times`` of one within :data:`ALIGN_S` of ``moment``, else None."""
    at = bisect_left(times, moment - ALIGN_S)
    return at if at < len(times) and times[at] <= moment + ALIGN_S else None


def _epoch(utc: str) -> float:
    return datetime.fromisoformat(utc.replace("Z", "+00:00")).timestamp()


def _job_gpus(files: list) -> dict[str | None, set[str]]:
    """The GPUs (PCI bus ids) each host's ranks named, e.g. in NCCL's init lines: an Xid on a GPU
    the job did not use is no reason to move its host's clock onto the job's."""
    out: dict[str | None, set[str]] = {}
    for f in files:
        if f.kind == kinds.TRAINING_LOG:
            for e in f.records:
                if bus := e.details.get("pci_bus_id"):
                    out.setdefault(e.host or f.host, set()).add(bus)
    return out


def _zoned(text: str) -> bool:
    m = ISO_STAMP.search(text)
    return bool(m and m["zone"])


def _label(offset_s: int) -> str:
    sign = "+" if offset_s >= 0 else "-"
    minutes = abs(offset_s) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _shift(f, offset_s: int, line: int, where: str) -> None:
    label = _label(offset_s)
    said = (f"kernel clock read as {label}: it prints no zone, and under {label} its hardware event "
            f"(line {line}) comes within {ALIGN_S} s of the job's first error ({where}); pass --tz to override")
    delta = timedelta(seconds=offset_s)
    for e in f.records:
        if getattr(e, "time_utc", None) and "time_assumption" in getattr(e, "details", {}):
            e.time_utc = _earlier(e.time_utc, delta)
            e.details["time_assumption"] = said
    for s in f.signals:
        if s.time_utc:
            s.time_utc = _earlier(s.time_utc, delta)
    f.problems.append(Problem(str(f.path), said))


def _earlier(utc: str, delta: timedelta) -> str:
    return to_utc_iso(datetime.fromisoformat(utc.replace("Z", "+00:00")) - delta)
