"""A previous boot whose journal stops with no shutdown: the node was lost under the job.

Why: a node that loses its power feed, trips its supply on a GPU load spike, or is reset by the
button or a BMC watchdog writes nothing about it. Its journal ends in routine lines (often one cut
mid-write) and the next boot follows. An orderly stop leaves its trace in the last seconds of the
boot (``Reached target ... Shutdown``, ``Journal stopped``, ``reboot: Restarting system``), and a
kernel panic or machine check leaves its own line, a cause of its own.

So when ``journalctl --list-boots`` (:mod:`gpulib.parsers.journal_boots`) is pasted beside the
previous boot's last lines (``journalctl -b -1``: stamped lines up to that boot's ``LAST ENTRY``)
and none of those lines is a shutdown, panic or machine-check line, the node went down hard. With
power evidence on the same node (an undersized supply, a BMC power event) that is a power fault;
without it, an unexplained loss of the node. The newest boot change whose tail is shown decides;
without the tail the list of boots cannot tell a clean reboot from a crash and says nothing. Nor
can a tail the command filtered (one unit, the kernel only, a priority, a grep) unless the filter
asks for shutdown lines: the shutdown's own lines were left out of it.
"""

from __future__ import annotations

import re
from datetime import datetime

from gpulib.diagnose.context import Context, quote
from gpulib.evidence.gather import InputFile
from gpulib.parsers import journal_boots
from gpulib.parsers.base import read_text
from gpulib.parsers.journal_boots import BootRecord
from gpulib.parsers.unwrap import unwrap

#: How long before a boot's ``LAST ENTRY`` a line counts as that boot's tail.
TAIL_S = 300
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: A journal line's stamp: ``short`` (``Aug 20 10:31:56``) or ``short-iso`` (``2026-08-20T10:31:56``),
#: then the host it was written on.
_STAMPED = re.compile(r"^\s*(?:(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)"
                      r"|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d))\S* +(?P<host>[\w.-]+) ")
#: Lines that end a boot in order, or explain its end (a panic or machine check is a cause of its own).
_ENDED = re.compile(r"Reached target .*(?:Shutdown|Reboot|Power[- ]Off|Halt|Final Step)|Journal stopped|systemd-shutdown"
                    r"|reboot: (?:Restarting|Power down)|System is (?:rebooting|powering (?:down|off))|Shutting down"
                    r"|Power key pressed|Kernel panic|Machine check|mce: \[Hardware Error\]|Oops|BUG: |watchdog: "
                    r"|Stopped target|Powering off", re.IGNORECASE)
#: A journal command that keeps only some lines (a unit, the kernel, an identifier, a priority, a grep)...
_FILTERED = re.compile(r"(?:^|\s)(?:-[a-zA-Z]*[ukpt]\b|--(?:unit|dmesg|identifier|priority|grep)\b)|\|\s*e?grep\b")
#: ...and one whose filter asks for the lines a shutdown writes.
_ASKS_SHUTDOWN = re.compile(r"shut|reboot|stop|power|target", re.IGNORECASE)


def run(ctx: Context) -> None:
    seen: set[tuple[str, str]] = set()
    for file in ctx.inputs.of_kind(journal_boots.KIND):
        boots = sorted((r for r in file.records if isinstance(r, BootRecord)), key=lambda r: r.index)
        if len(boots) < 2:
            continue
        bare = unwrap(read_text(file.path)[0])  # read once for every boot change it is searched for
        for prev, nxt in reversed(list(zip(boots, boots[1:], strict=False))):
            tail = _tail(bare, prev)
            if not tail:
                continue
            if not any(_ENDED.search(text) for _n, text, _h in tail) and (str(file.path), prev.boot_id) not in seen:
                seen.add((str(file.path), prev.boot_id))
                _add(ctx, file, prev, nxt, tail)
            break  # the newest boot change whose tail is shown decides


def _tail(bare, boot: BootRecord) -> list[tuple[int, str, str]]:
    """(line, text, host) of the stamped lines of a file (``bare``: its unwrapped text) in the last
    :data:`TAIL_S` seconds of ``boot``."""
    end = datetime.fromisoformat(boot.last_local)
    prompts = [(i + 1, cmd) for i, _host, cmd in bare.commands]
    found = []
    for number, line in enumerate(bare.text.split("\n"), 1):
        m = _STAMPED.match(line)
        if not m:
            continue
        if m["iso"]:
            when = datetime.fromisoformat(m["iso"])
        elif m["mon"] in _MONTHS:
            try:
                when = datetime.fromisoformat(f"{end.year:04d}-{_MONTHS.index(m['mon']) + 1:02d}-"
                                              f"{int(m['day']):02d}T{m['hms']}")
            except ValueError:
                continue
        else:
            continue
        if 0 <= (end - when).total_seconds() <= TAIL_S and not _filtered(prompts, number):
            found.append((number, line.strip(), m["host"]))
    return found


def _filtered(prompts: list[tuple[int, str]], line: int) -> bool:
    """Whether the command whose output holds ``line`` filtered the journal without asking for shutdown lines."""
    command = next((cmd for at, cmd in reversed(prompts) if at < line), "")
    return bool(_FILTERED.search(command)) and not _ASKS_SHUTDOWN.search(command)


def _add(ctx: Context, file: InputFile, prev: BootRecord, nxt: BootRecord, tail: list[tuple[int, str, str]]) -> None:
    host = file.host or tail[-1][2]
    if any(f.id.startswith("unclean-stop") and f.host in (host, None) for f in ctx.findings):
        return  # wtmp already told this stop
    powered = [f for f in ctx.findings if f.category == "power_fault" and f.host in (host, None)]
    category = "power_fault" if powered else "node_lost"
    why = ("a power fault is found on the same node: a power trip" if powered else
           "a loss of power, a hard reset or a hang ended by a watchdog")
    line, text, _h = tail[-1]
    ctx.add("journal-stops", severity="critical", category=category, interruption="hard", hardware=True,
            title=f"{host or 'The node'} went down without a shutdown: boot {prev.index}'s journal stops at "
                  f"{prev.last_local.replace('T', ' ')} with no shutdown, panic or machine-check line, and the next "
                  f"boot began at {nxt.first_local.replace('T', ' ')} ({why})",
            host=host, time=ctx.utc(prev.last_local, file), observed=True,
            quotes=[quote(file, prev.line, prev.text), quote(file, line, text),
                      quote(file, nxt.line, nxt.text)],
            actions=["Read the node's BMC event log (`ipmitool sel elist`) around that time for AC lost, power "
                     "supply failure or a watchdog reset",
                     "Check that the power supplies carry every GPU at full load (the GPUs' power limits plus the "
                     "host); cap the GPUs (`nvidia-smi -pl`) or fit a larger supply if they do not",
                     "Before resuming on the node, run `gpulib run preflight` and a burn-in at full GPU power"])
