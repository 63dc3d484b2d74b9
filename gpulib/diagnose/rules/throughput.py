"""A run whose throughput collapsed: it fell to a fraction of its steady level and stayed there.

Why: a run that slows to a third of its speed prints no error. Its progress lines still come, so
without this reading it looks healthy until someone loses patience and presses Ctrl-C. The
throughput column the trainers print (``images/sec``, ``samples/s``, ``tokens/s``, ``it/s``) says
what happened: it held a steady level, then fell below :data:`COLLAPSE_SHARE` of it and never came
back (a single slow step that recovers is a hiccup, a slow warm-up that climbs is a start). What
starved the run comes from the evidence beside the log, taken when it was slow:

* the host waits on I/O (``top``'s ``wa``, ``iostat``'s ``%iowait`` at :data:`IOWAIT_PCT` or more),
  or the network file system answers slowly (``nfsiostat``'s average RTT at :data:`SLOW_RTT_MS` or
  more), or the job reads its data from a path on a network mount (``mount``: ``type nfs4``): the
  input pipeline cannot keep up - ``data_pipeline_stall``, soft: stage the data on local disk;
* a GPU throttled (a ``thermal_throttling`` finding of the GPU rules): the GPUs slowed it;
* nothing: the collapse is shown as what to explain (the verdict stays with the stop itself).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from statistics import median

from gpulib.diagnose.context import Context, quote
from gpulib.diagnose.rules.netfs import network_mounts
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.findings import Quote
from gpulib.parsers import training_log

#: Throughput below this share of its steady level, to the end of the log, is a collapse.
COLLAPSE_SHARE = 0.6
#: Below this share the decline has begun (its first reading is where the slowdown starts).
DECLINE_SHARE = 0.9
#: Readings needed in all, and below the collapse line at the end (one slow last reading is a partial step).
MIN_READINGS = 4
MIN_LOW = 2
#: The steady level is the best median of this many consecutive readings (one fast step is not a level).
LEVEL_WINDOW = 3
#: A host waiting on I/O this share of its CPU time, or NFS reads this slow, starves the input pipeline.
IOWAIT_PCT = 20.0
SLOW_RTT_MS = 50.0
#: Files larger than this are not re-read for tool outputs.
MAX_BYTES = 4 << 20

#: ``top``: ``%Cpu(s):  7.9 us,  1.6 sy,  0.0 ni, 62.4 id, 28.0 wa, ...``.
_TOP_CPU = re.compile(r"%?Cpu\(?s?\)?:.*?(?P<wa>\d+(?:\.\d+)?)[ %]*wa\b")
#: ``iostat``: ``avg-cpu:  %user   %nice %system %iowait  %steal   %idle`` and the values on the next line.
_IOSTAT_CPU = re.compile(r"^\s*avg-cpu:\s+(?P<cols>.*%iowait.*)$")
#: ``nfsiostat``: ``read:  ops/s  kB/s  kB/op  retrans  avg RTT (ms)  avg exe (ms)`` and the values below it.
_NFS_HEADER = re.compile(r"^\s*(?P<op>read|write):\s+(?P<cols>.*avg RTT \(ms\).*)$")
_PERCENT_IN_PARENS = re.compile(r"\(\s*[\d.]+%\)")
_PATH = re.compile(r"(?<![\w.:/])(/[^\s'\"`,;()\[\]]+)")


@dataclass(frozen=True)
class Collapse:
    """One series' collapse: its steady level, where the decline began, the first collapsed and last readings."""

    file: InputFile
    unit: str
    level: float
    began: object
    collapsed: object
    last: object


def run(ctx: Context) -> None:
    for collapse in _collapses(ctx):
        _judge(ctx, collapse)


def _collapses(ctx: Context) -> list[Collapse]:
    series: dict[tuple, list] = defaultdict(list)
    for file, ev in ctx.records(training_log.KIND):
        if getattr(ev, "kind", None) == "step" and ev.details.get("throughput") is not None:
            series[(file.display, ev.rank, ev.host, ev.details["throughput_unit"])].append((file, ev))
    out = []
    for (_display, _rank, _host, unit), read in series.items():
        found = _collapse(read, unit)
        if found is not None:
            out.append(found)
    return out


def _collapse(read: list, unit: str) -> Collapse | None:
    """The collapse of one series, or None: the best sustained level, then readings below
    COLLAPSE_SHARE of it from some point to the end of the log (at least MIN_LOW of them)."""
    values = [ev.details["throughput"] for _f, ev in read]
    if len(values) < MIN_READINGS:
        return None
    windows = [(median(values[k:k + LEVEL_WINDOW]), k) for k in range(len(values) - LEVEL_WINDOW + 1)]
    level, at = max(windows)
    if level <= 0:
        return None
    low = len(values)
    while low > at and values[low - 1] < COLLAPSE_SHARE * level:
        low -= 1
    if len(values) - low < MIN_LOW or low <= at:
        return None
    began = next(k for k in range(at, low + 1) if values[k] < DECLINE_SHARE * level)
    return Collapse(read[0][0], unit, level, read[began][1], read[low][1], read[-1][1])


def _judge(ctx: Context, c: Collapse) -> None:
    last = c.last.details["throughput"]
    fell = (f"Throughput fell from a steady ~{c.level:g} to {last:g} {c.unit} ({100 * last / c.level:.0f}% of it) "
            f"from line {c.began.line} on and stayed there")
    shown = [quote(c.file, ev.line, ev.text) for ev in (c.began, c.collapsed, c.last)
             if ev is c.began or ev.line != c.began.line]
    thermal = [f for f in ctx.findings if f.category == "thermal_throttling" and not f.benign]
    if thermal:
        hot = thermal[0]
        f = ctx.add("throughput-collapse", severity="error", category="thermal_throttling", interruption="soft",
                    role="cause", title=f"{fell}: a GPU throttled meanwhile ({hot.title})", host=hot.host,
                    gpu_index=hot.gpu_index, gpu_pci=hot.gpu_pci, time=c.began.time_utc,
                    quotes=shown + hot.quotes[:2],
                    actions=["Fix the GPU's cooling or power limit (fans, airflow, inlet temperature), then relaunch"])
        f.tier = 3
        return
    starved = _storage_evidence(ctx, c.file)
    if starved:
        f = ctx.add("throughput-collapse", severity="error", category="data_pipeline_stall", interruption="soft",
                    role="cause", title=f"{fell}, while the host waited on its storage: the input pipeline cannot "
                    "keep up and the GPUs idle", time=c.began.time_utc, quotes=shown + starved,
                    actions=["Stage the dataset on local NVMe/SSD of every node (or a faster parallel file system) "
                             "and relaunch from the last checkpoint",
                             "Check the network file system while the job reads (`nfsiostat`, `iostat -x`, the "
                             "server's load): a slow or overloaded server slows every client"])
        f.tier = 3  # it slows the job: a process killed or a fault comes first
        return
    ctx.add("throughput-collapse", severity="warning", category="none", role="context",
            title=f"{fell}; nothing in the evidence says what slowed it", time=c.began.time_utc, quotes=shown,
            actions=["Collect, while the run is slow: `top` (iowait), `iostat -x 5`, `nfsiostat 5` for a network "
                     "data path, `nvidia-smi -q -d PERFORMANCE,TEMPERATURE` (throttle reasons) on each node"])


def _storage_evidence(ctx: Context, log: InputFile) -> list[Quote]:
    """Quotes that say the host was starved by its storage: high iowait, a slow NFS RTT, or the job's
    data path on a network mount."""
    out: list[Quote] = []
    for fl in ctx.inputs.of_kind(kinds.TRAINING_LOG, kinds.TEXT):
        lines = _lines(fl)
        for n, line in enumerate(lines, 1):
            value = _iowait(line, lines[n] if n < len(lines) else "")
            if value is not None and value >= IOWAIT_PCT:
                out.append(quote(fl, n, line if _TOP_CPU.search(line) else f"{line.strip()} / {lines[n].strip()}"))
            rtt = _nfs_rtt(line, lines[n] if n < len(lines) else "")
            if rtt is not None and rtt >= SLOW_RTT_MS:
                out.append(quote(fl, n + 1, f"{line.strip()} / {lines[n].strip()}"))
    paths = set(_PATH.findall("\n".join(_lines(log))))
    for mount in network_mounts(ctx):
        if any(mount.holds(p) for p in paths):
            out.append(Quote(mount.file.display, mount.line, mount.text))
            break
    return out


def _iowait(line: str, following: str) -> float | None:
    """The iowait share a ``top`` CPU line or an ``iostat`` avg-cpu block (header, then values) states."""
    m = _TOP_CPU.search(line) if "wa" in line else None
    if m:
        return float(m["wa"])
    m = _IOSTAT_CPU.match(line) if "avg-cpu" in line else None
    if m:
        cols, values = m["cols"].split(), following.split()
        if len(cols) == len(values):
            try:
                return float(values[cols.index("%iowait")])
            except ValueError:
                return None
    return None


def _nfs_rtt(line: str, following: str) -> float | None:
    """The average RTT (ms) of an ``nfsiostat`` read/write block: the header names the columns, the
    next line holds the values (``retrans`` prints ``0 (0.0%)``: its share in parentheses is dropped)."""
    m = _NFS_HEADER.match(line) if "avg RTT" in line else None
    if not m:
        return None
    cols = re.split(r"\s{2,}", m["cols"].strip())
    values = _PERCENT_IN_PARENS.sub("", following).split()
    at = next((k for k, col in enumerate(cols) if col.startswith("avg RTT")), None)
    if at is None or at >= len(values):
        return None
    try:
        return float(values[at])
    except ValueError:
        return None


def _lines(fl: InputFile) -> list[str]:
    text = fl.text(MAX_BYTES)
    return [] if text is None else text.splitlines()


__all__ = ["Collapse", "run"]
