"""Nodes that went down without a shutdown: ``last -x`` crash records read as a loss of power.

Why: a server that loses its power feed, trips its power supply under full GPU load or is reset
by the button or the BMC watchdog stops in the middle of a write: its kernel log ends in routine
lines, no panic, no oops, and the training log just stops. wtmp (:mod:`gpulib.parsers.wtmp`)
keeps what an orderly stop would have written: ``shutdown system down`` and ``runlevel (to lvl
0|6)`` before the next ``reboot system boot``. A boot that follows the previous one with no such
record between them, and the sessions ``last`` ends with ``- crash``, mean the node went down
hard. Under a GPU job the usual culprit is power delivery: a supply too small for every GPU at
full load, a failing PSU or feed (a motherboard fault is the other one seen); a kernel panic
would be a cause of its own, found in the kernel log.

An unclean stop explains *this* interruption when it falls in the job's window: the node was last
seen alive no later than the job's last line and came back up after the job began. With no job
log to give a window, the stop that the node's newest boot followed is the one that matters; older
ones are its history and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.identity import to_utc_iso
from gpulib.parsers import wtmp
from gpulib.parsers.logtime import seconds_between
from gpulib.parsers.wtmp import WtmpRecord

#: How far wtmp's minute-resolution times and the job log's stamps may disagree.
CLOCK_SLACK_S = 120
#: Rows ``- crash`` quoted per unclean stop.
QUOTED_ROWS = 3


@dataclass
class Crash:
    """One unclean stop: the boot that followed it (``boot``; None when the listing shows none),
    the newest record written before it (``alive``: the node was up then), the sessions it cut
    (``cut``) and whether it is the newest stop of the listing (``latest``)."""

    boot: WtmpRecord | None
    alive: WtmpRecord | None
    cut: list[WtmpRecord]
    latest: bool


def crashes(rows: list[WtmpRecord]) -> list[Crash]:
    """The unclean stops a ``last`` listing shows, newest first.

    The listing is newest first: the rows between a boot and the next older one are what the node
    wrote while that older boot lasted. With no clean-stop record among them, a ``- crash``
    session there, or a listing that shows clean stops at all (``-x``, not filtered to boots),
    makes it an unclean stop. A listing of boots alone (``last reboot``) cannot tell and says
    nothing; one without boots (filtered to a user) still has ``last``'s own ``- crash``."""
    order = sorted(rows, key=lambda r: r.line)
    extended = any(r.kind in ("shutdown", "runlevel") for r in order)
    boots = [i for i, r in enumerate(order) if r.kind == "boot"]
    if not boots:
        cut = [r for r in order if r.kind == "session" and r.ended == "crash"]
        return [Crash(None, cut[0], cut, latest=True)] if cut else []
    found = []
    for n, i in enumerate(boots):
        older = boots[n + 1] if n + 1 < len(boots) else None
        segment = order[i + 1:older]
        if any(r.clean_stop for r in segment):
            continue
        cut = [r for r in segment if r.kind == "session" and r.ended == "crash"]
        if cut or (extended and older is not None):
            found.append(Crash(order[i], segment[0] if segment else order[older], cut, latest=n == 0))
    return found


def run(ctx: Context) -> None:
    for file in ctx.inputs.of_kind(wtmp.KIND):
        start, end = _job_window(ctx, file.host)
        year = int(start[:4]) if start else None
        rows = [r for r in file.records if isinstance(r, WtmpRecord)]
        for crash in crashes(rows):
            alive = _utc(ctx, file, crash.alive, year)
            back = _utc(ctx, file, crash.boot, year) if crash.boot else _session_end(ctx, file, crash.cut[0], year)
            if start and end and (alive or back):
                if (alive and seconds_between(end, alive) > CLOCK_SLACK_S) or (back and seconds_between(back, start) > 0):
                    continue  # the node went down after the job's last line, or was back up before it began
                if back is None or end <= back:  # the job's last line is a later sign of life than wtmp's
                    alive = max(alive or end, end)
            elif not crash.latest:
                continue  # not placed in a job's window: only the stop before the newest boot counts
            _add(ctx, file, crash, alive, back)


def _add(ctx: Context, file: InputFile, crash: Crash, alive: str | None, back: str | None) -> None:
    host = file.host
    when = (f" between {alive} (last sign of life) and {back} (next boot)" if alive and back else
            f" before {back} (next boot)" if back else f" after {alive}" if alive else "")
    how = "sessions ended by 'crash'" if crash.cut else "no shutdown record before the next boot"
    rows = crash.cut[:QUOTED_ROWS] + ([crash.boot] if crash.boot else [])
    ctx.add("unclean-stop", severity="critical", category="power_fault", interruption="hard", hardware=True,
            title=f"{host or 'The node'} went down without a shutdown{when}: a loss of power or a hard reset "
                  f"(wtmp: {how})",
            host=host, time=back, observed=back is not None,
            quotes=[quote(file, r.line, r.text) for r in rows],
            actions=["Read the node's BMC event log (`ipmitool sel elist`) for AC lost / power supply failure / "
                     "power off around that time, and `journalctl -k -b -1` for a panic before it",
                     "Check that the power supplies carry every GPU at full load (sum of the GPUs' power limits "
                     "plus the host, with redundancy); reseat or replace a failing PSU or its feed",
                     "Before resuming the node, run `gpulib run preflight` and a burn-in at full GPU power"])


def _utc(ctx: Context, file: InputFile, row: WtmpRecord | None, year: int | None) -> str | None:
    if row is None:
        return None
    local = row.login_local or wtmp.local_time(row.login, year)
    return ctx.utc(local, file) if local else None


def _session_end(ctx: Context, file: InputFile, row: WtmpRecord, year: int | None) -> str | None:
    """When a ``- crash`` session was cut: ``last`` ends it at the next boot (login + duration)."""
    login = _utc(ctx, file, row, year)
    if login is None or row.duration_min is None:
        return None
    return to_utc_iso(datetime.fromisoformat(login.replace("Z", "+00:00")) + timedelta(minutes=row.duration_min))


def _job_window(ctx: Context, host: str | None) -> tuple[str | None, str | None]:
    """First and last stamped line of the job's logs written on ``host`` (or not saying where)."""
    times = [t for f, e in ctx.records(kinds.TRAINING_LOG) if (e.host or f.host) in (host, None)
             for t in (e.time_utc, e.time_last) if t]  # time_last: the latest of the lines folded into it
    return (min(times), max(times)) if times else (None, None)
