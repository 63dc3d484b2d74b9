"""BMC event log (SEL) power events, placed on the incident's timeline: a power fault or history.

Why: ``ipmitool sdr`` shows a power supply that lost its feed at 03:12 as ``ok`` again at 03:40.
Only the SEL remembers it ("Power Supply AC lost", "Power Unit failure", "Redundancy Lost",
"Power off/down"). But a SEL is years of a machine's life: the supply unplugged during
installation, the feed maintenance of last spring. An entry says something about *this* job only
when it falls in the incident window; before it, it is history (context) - and a "Fully
Redundant" / deasserted entry after it says the node was whole again.

SEL times are on the BMC's own clock (no zone, often minutes or hours off): they are put on UTC
with the offset between ``ipmitool sel time get`` and the bundle's capture time
(:func:`gpulib.parsers.ipmi_sel.align_to_utc`); without both, the BMC clock is read in the
bundle's zone (or ``--tz``) and the finding says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpulib.diagnose import verdict
from gpulib.diagnose.context import Context, quote
from gpulib.diagnose.rules import job
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.parsers.ipmi_sel import SelEvent, align_to_utc
from gpulib.parsers.logtime import seconds_between, stamp_in, zone_of

#: How far SEL times and log times may disagree once aligned (BMC clock drift between the capture
#: and the event, log stamps of a node that kept no NTP): the window is widened by this much.
CLOCK_SLACK_S = 300
#: With no progress line before the failure, how long the surviving ranks may have waited on a
#: dead node before printing their first failure line: the longest default collective timeout.
COLLECTIVE_TIMEOUT_S = 1800
#: Job-log events that say the job failed (the first of them bounds the window's start).
FAILURE_KINDS = frozenset({"watchdog_timeout", "nccl_error", "process_failed", "child_failed", "srun_task_exit",
                           "cuda_error", "exception", "socket_error", "ib_completion_error", "node_failure",
                           "slurm_cancelled", "watchdog_stuck"})

_NODE_LOSS = ("power off/down", "power cycle", "soft power control failure", "power unit failure", "ac/dc lost",
              "interlock")
_RECOVERY = ("fully redundant", "redundancy regained")


@dataclass
class Window:
    """When the job died, from its own logs. ``start``: its last progress line before the first
    failure (the node was alive then: every rank took that step), else the first failure minus
    the longest collective timeout; ``end``: the diagnosis's failure time (the last failure line
    any rank printed). Both widened by :data:`CLOCK_SLACK_S`."""

    start: str
    end: str
    last_progress: str | None

    def holds(self, when: str) -> bool:
        return seconds_between(self.start, when) >= -CLOCK_SLACK_S and seconds_between(when, self.end) >= -CLOCK_SLACK_S


def incident_window(ctx: Context) -> Window | None:
    """The window in which a power loss explains this interruption, or None when the job logs give
    no failure time (no job log, or no stamped failure line).

    A node that loses power stops at once; its peers stop at the next collective and print their
    first failure line up to one collective timeout later. So the loss lies after the job's last
    progress line (every rank, the lost one included, took that step) and no later than the last
    failure line. A SEL entry outside that is not what stopped this job.
    """
    failure = job.last_failure_time(ctx)
    if failure is None:
        return None
    events = [e for _f, e in ctx.records(kinds.TRAINING_LOG) if e.time_utc and not e.time_approx]
    first = min((e.time_utc for e in events if e.kind in FAILURE_KINDS), default=failure)
    progress = [e.time_utc for e in events if e.kind == "step" and e.time_utc <= first]
    last_progress = max(progress) if progress else None
    if last_progress:
        start = last_progress
    else:
        start = _shift(first, -COLLECTIVE_TIMEOUT_S)
        job_start = verdict.known_start(job.job_start_time(ctx), first)
        if job_start and job_start > start:
            start = job_start
    return Window(start, failure, last_progress)


@dataclass
class PowerLoss:
    """One SEL power-loss entry: what it cut (the node's own power, or one of its supplies) and the
    entry, if any, that says it was restored."""

    event: SelEvent
    node_power: bool  # the node itself lost power (power off/down, power unit failure, AC lost on the unit)
    restored: SelEvent | None


def power_losses(events: list[SelEvent]) -> list[PowerLoss]:
    """Every entry that cut or degraded the node's power, each with its recovery: the same sensor's
    deassertion, "Fully Redundant" on the same sensor, or a removed supply present again."""
    out = []
    for i, e in enumerate(events):
        removed = "presence detected" in e.event.lower() and e.direction == "Deasserted" and e.is_power_event
        if not (e.is_power_loss or removed):
            continue
        text, sensor = e.event.lower(), f"{e.sensor_type or ''} {e.sensor}".lower()
        node = any(k in text for k in _NODE_LOSS) or ("power unit" in sensor and "ac lost" in text)
        out.append(PowerLoss(e, node and "redundan" not in text, _restored(e, events[i + 1:], removed)))
    return out


def _restored(e: SelEvent, later: list[SelEvent], removed: bool) -> SelEvent | None:
    for x in later:
        if x.sensor != e.sensor:
            continue
        text = x.event.lower()
        if removed and "presence detected" in text and x.direction != "Deasserted":
            return x
        if not removed and (x.direction == "Deasserted" and text == e.event.lower() or any(k in text for k in _RECOVERY)):
            return x
    return None


def run(ctx: Context) -> None:
    window = incident_window(ctx)
    clocks = {f.path.parent: rec for f, rec in ctx.records(kinds.IPMITOOL_SEL_TIME)}
    for file in ctx.inputs.of_kind(kinds.IPMITOOL_SEL):
        events = [e for e in file.records if isinstance(e, SelEvent)]
        clock_note = _place_on_utc(ctx, file, events, clocks.get(file.path.parent))
        ctx.judged |= {(file.display, e.line) for e in events if e.is_power_event and e.line is not None}
        _judge(ctx, file, power_losses(events), window, clock_note)


def _place_on_utc(ctx: Context, file: InputFile, events: list[SelEvent], clock) -> str:
    return place_on_utc(events, clock.time_bmc if clock is not None else None, file.captured_at,
                        file.timezone or ctx.tz or "UTC")


def place_on_utc(events: list[SelEvent], clock_bmc: str | None, captured_at: str | None, zone: str = "UTC") -> str:
    """Fill each event's ``time_utc`` and return how it was done (shown beside the entries).

    With the BMC's clock at capture (``sel time get``) and the bundle's UTC capture time, the
    BMC's offset is measured and taken off; without them the BMC clock is read in ``zone``."""
    if clock_bmc and captured_at:
        offset = align_to_utc(events, clock_bmc, captured_at)
        return f"BMC clock {_offset_text(offset)} (sel time get vs the bundle's capture time); SEL times corrected"
    for e in events:
        if e.time_bmc:
            e.time_utc = stamp_in(e.time_bmc, year=None, tz=zone_of(zone))
    why = "no `ipmitool sel time get`" if not clock_bmc else "no bundle capture time"
    return f"{why}: SEL times read as {zone} (a BMC clock is often minutes or hours off)"


#: ``ipmitool -I lanplus -H node7-bmc ...``: a SEL read over the network from another machine's BMC.
_REMOTE_BMC = re.compile(r"\bipmitool\b[^\n]*?\s-H\s+(?P<bmc>[A-Za-z0-9][\w.-]*)")
#: How BMC names usually differ from their node's name: ``node7-bmc``, ``node7-ipmi``, ``node7.ilo``.
_BMC_SUFFIX = re.compile(r"[-_.](?:bmc|ipmi|ilo|idrac|imm|xcc|oob)$", re.IGNORECASE)


def sel_host(file: InputFile) -> str | None:
    """The node a SEL belongs to. A session pasted from an admin host (``[admin@mgmt ~]$ ipmitool -H
    node7-bmc sel elist``) is the BMC's node's log, not the admin host's: with one remote BMC named
    in the file, its name less the BMC suffix; otherwise the file's host."""
    try:
        with open(file.path, encoding="utf-8", errors="replace") as fh:
            bmcs = {m["bmc"] for m in _REMOTE_BMC.finditer(fh.read(1 << 20))}
    except OSError:
        return file.host
    if len(bmcs) != 1:
        return file.host
    return _BMC_SUFFIX.sub("", bmcs.pop())


def _judge(ctx: Context, file: InputFile, losses: list[PowerLoss], window: Window | None, clock_note: str) -> None:
    host = sel_host(file)
    causes, history = [], []
    for loss in losses:
        e = loss.event
        if window is None:  # no failure time: the SEL is the evidence; what is still lost is the fault
            (history if loss.restored else causes).append(loss)
        elif e.time_utc is None or not window.holds(e.time_utc):
            history.append(loss)
        elif not loss.node_power and loss.restored and loss.restored.time_utc and window.last_progress \
                and seconds_between(loss.restored.time_utc, window.last_progress) >= 0:
            history.append(loss)  # a supply lost and back before the job's last step: the job survived it
        else:
            causes.append(loss)
    if causes:
        first = min(causes, key=lambda p: p.event.time_utc or "~")
        e = first.event
        what = "the node lost power" if first.node_power else "a power supply failed"
        when = ("in the incident window (after the job's last progress, before its last failure line)" if window
                else "and is not restored later in the log (no job log gives the failure time)")
        lines = [quote(file, p.event.line, _entry(p.event)) for p in causes[:4]]
        lines.append(quote(file, None, clock_note))
        ctx.add("sel-power", severity="critical", category="power_fault", interruption="hard", hardware=True,
                title=f"BMC event log of {host}: {e.sensor}: {e.event} - {what} {when}", host=host,
                time=e.time_utc, time_approx=True, quotes=lines,
                actions=[f"Check {host or 'the node'}'s power supplies and its rack feed (`ipmitool sdr type "
                         "'Power Supply'`, PDU/UPS logs) and replace the failed supply before relaunching on it",
                         "A GPU that fell off the bus in the same minute was browned out, not broken: fix the feed "
                         "before any RMA",
                         "Review, save and clear the SEL (`ipmitool sel save`, `ipmitool sel clear`) once repaired, "
                         "so the next incident's entries stand out"])
    if history:
        last = max(history, key=lambda p: p.event.time_utc or "")
        regained = sum(1 for p in history if p.restored)
        ctx.add("sel-history", severity="info", category="power_fault", role="context", host=host,
                title=f"BMC event log of {host}: {len(history)} earlier power event(s), not in the incident window"
                      + (f", {regained} restored later in the log" if regained else "")
                      + f" (latest: {last.event.sensor}: {last.event.event}"
                      + (f" at {last.event.time_utc}" if last.event.time_utc else ", time unknown") + ")",
                quotes=[quote(file, p.event.line, _entry(p.event)) for p in history[-3:]]
                + [quote(file, p.restored.line, _entry(p.restored)) for p in history[-3:] if p.restored]
                + [quote(file, None, clock_note)],
                actions=["History, not this interruption: if the supplies flap again, check the feed; clear the "
                         "reviewed entries (`ipmitool sel clear`) so new ones stand out"])


def _entry(e: SelEvent) -> str:
    return f"{e.time_text} | {e.sensor} | {e.event} | {e.direction or ''}".rstrip(" |") + (
        f" (UTC {e.time_utc})" if e.time_utc else "")


def _offset_text(offset: timedelta) -> str:
    seconds = int(offset.total_seconds())
    if seconds == 0:
        return "on UTC"
    mag = abs(seconds)
    text = f"{mag // 3600} h {mag % 3600 // 60} min" if mag >= 3600 else f"{mag // 60} min {mag % 60} s"
    return f"{text} {'ahead of' if seconds > 0 else 'behind'} UTC"


def _shift(stamp: str, seconds: float) -> str:
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
