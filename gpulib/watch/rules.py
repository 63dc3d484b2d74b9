"""The watch's alert rules: silence, error signatures, step time out of band.

* **Silence.** A hung collective prints nothing: no error, no exit, just a quiet log until the NCCL
  timeout fires (10-30 min later) or forever. Every line updates the last-line time of its
  *stream*: the (file, rank) pair, the rank read from the launcher prefix (``[rank3]:``, srun
  ``3: ``, mpirun ``[1,3]<stdout>:``). When no stream has printed for ``silence_s``, the whole
  job is silent (one ``job_silence`` alert). When others still print but one stream that used to
  print progress lines has not for ``silence_s``, that rank is silent (``rank_silence``): a
  straggler or a hung rank. Ranks that never print progress (often every rank but 0) are not
  judged, because their silence is normal. Once the job prints its own end (``Training
  completed``, ``PyTorchJob ... Succeeded``), silence is expected and no longer alerts.
* **Error signatures.** Lines go through the diagnosis's own catalogue
  (:class:`gpulib.parsers.training_log.JobLogScanner`, the same regexes ``gpulib diagnose``
  uses); every event kind except identity/progress bookkeeping
  (:data:`gpulib.parsers.training_log.INFO_KINDS`) is an alert,
  so a signature added to the catalogue is watched without touching this module.
* **Step time.** Each rank's seconds per step (printed ``s/it``/``s/step``, else the time between
  two step lines divided by the steps advanced) is compared with that rank's median of the last
  :data:`STEP_HISTORY` steps: a step slower than ``step_band`` x the median (after
  ``step_warmup`` steps) is an alert; it re-arms once a step is back below half the band.
  Thermal throttling, a failing link or a slow file system show up here minutes before anything
  fails.

Each condition alerts once per episode: a silent stream re-arms when it prints again, a slow
rank when a step is back in band, a signature once per (file, rank, kind).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from statistics import median

from gpulib.identity import to_utc_iso
from gpulib.parsers.training_log import INFO_KINDS, JobEvent, JobLogScanner, strip_prefixes
from gpulib.parsers.training_log import parse as parse_job_log

#: Signatures worth a look that do not stop a job by themselves.
WARNING_KINDS = frozenset({"nccl_warn"})
#: Exceptions that are an operator's or a launcher's doing, not a failure.
IGNORED_EXCEPTIONS = frozenset({"KeyboardInterrupt"})
#: Step times kept per rank for the median.
STEP_HISTORY = 50
#: Polls up to this many lines have every step line parsed; bigger ones are sampled per stream.
EXACT_PROGRESS_LINES = 2000
#: When sampling, a stream's newest lines tried for its step line (ranks print other lines between steps).
PROGRESS_LOOKBACK = 8


def utc_iso(seconds: float) -> str:
    return to_utc_iso(datetime.fromtimestamp(seconds, timezone.utc))


@dataclass
class WatchConfig:
    """Thresholds. ``silence_s``: seconds without a line before a silence alert. ``step_band``: a
    step slower than this many times the rank's median step is an alert. ``step_warmup``: steps
    seen before the band applies (the first steps compile kernels and warm caches)."""

    silence_s: float = 600.0
    step_band: float = 2.0
    step_warmup: int = 5


@dataclass
class Alert:
    """One alert. ``kind``: job_silence | rank_silence | signature | step_time."""

    kind: str
    time_utc: str
    message: str
    severity: str = "error"
    file: str | None = None
    rank: int | None = None
    host: str | None = None
    signature: str | None = None
    line: int | None = None
    text: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def to_text(self) -> str:
        return f"ALERT {self.kind} [{self.severity}] {self.time_utc}: {self.message}"


@dataclass
class Stream:
    """What one rank (or one file, when lines name no rank) has printed."""

    file: str
    rank: int | None
    host: str | None = None
    last_line_time: float | None = None
    lines_total: int = 0
    heartbeat: bool = False  # printed at least one progress line, so its silence means something
    silent: bool = False
    slow: bool = False
    step_seconds: float | None = None
    #: the latest per-phase timings the rank printed (``fwd_bwd_ms=1188.8 data_ms=1.2``), by name
    phase_ms: dict[str, float] = field(default_factory=dict)
    steps: deque = field(default_factory=lambda: deque(maxlen=STEP_HISTORY))
    _last_step: tuple[int, float] | None = None  # (step number, time) of the previous step line

    @property
    def step_median_s(self) -> float | None:
        return median(self.steps) if self.steps else None


class WatchRules:
    """Feed it the lines of each followed file and call :meth:`tick` regularly; both return alerts."""

    def __init__(self, config: WatchConfig, files: list[str], now: float | None = None) -> None:
        self.config = config
        self.started = time.time() if now is None else now
        self.streams: dict[tuple[str, int | None], Stream] = {}
        self.scanners = {f: JobLogScanner(f, fold=False) for f in files}
        self.rank_hosts: dict[int, str] = {}
        self.alerts_total: dict[str, int] = {k: 0 for k in ("job_silence", "rank_silence", "signature", "step_time")}
        self.job_silent = False
        #: the job printed its own end ("Training completed"): its silence is expected, not an alert
        self.completed = False
        #: things the operator should hear that are not alerts (drained by the CLI)
        self.notices: list[str] = []
        self._signatures_seen: set[tuple[str, int | None, str]] = set()
        self._carried: dict[str, JobEvent] = {}

    @property
    def job_hosts(self) -> list[str]:
        """The hosts the logs named (NCCL init lines, launcher prefixes)."""
        return sorted(set(self.rank_hosts.values()) | {s.host for s in self.streams.values() if s.host})

    # ---------------------------------------------------------------- input
    def restart_file(self, file: str) -> None:
        """A rotated or truncated file starts again at line 1 (new scanner, same streams)."""
        self.scanners[file] = JobLogScanner(file, fold=False)
        self._carried.pop(file, None)

    def feed(self, file: str, lines: list[bytes], now: float | None = None) -> list[Alert]:
        """Take the complete lines one poll read from ``file``.

        Every line updates its stream's last-line time. The batch goes through the catalogue
        scanner as one chunk (its C-speed keyword pre-filter picks the error lines, and multi-line
        reports such as torchrun's ChildFailedError keep their context and line numbers). Progress
        lines are the bulk of a log (one per rank per step): a poll of up to
        :data:`EXACT_PROGRESS_LINES` lines (a 1,000-rank job at a step per second) has every step
        line parsed; a bigger one (the watch catching up on a burst) only each stream's newest step
        line, looking back at most :data:`PROGRESS_LOOKBACK` lines: ``s/step`` is the current rate
        anyway and step-number deltas average over the skipped lines.
        """
        now = time.time() if now is None else now
        if not lines:
            return []
        scanner = self.scanners.setdefault(file, JobLogScanner(file, fold=False))
        first_line = scanner.lines_seen
        by_stream: dict[tuple[str, int | None], list[int]] = {}
        for index, raw in enumerate(lines):
            _, hints = strip_prefixes(raw[:512].decode("utf-8", "replace"))
            stream = self._stream(file, _rank_of(hints), hints.get("prefix_host"))
            stream.last_line_time = now
            stream.lines_total += 1
            stream.silent = False
            by_stream.setdefault((stream.file, stream.rank), []).append(index)
        self.job_silent = False
        exact = len(lines) <= EXACT_PROGRESS_LINES
        scanner.feed(b"\n".join(lines) + b"\n", progress=exact)
        # Keep the last event in the scanner: the next line may be the second half of its NCCL error.
        events, scanner.events = scanner.events, scanner.events[-1:]
        carried = self._carried.get(file)
        if events:
            self._carried[file] = events[-1]
        alerts: list[Alert] = []
        for ev in events[1:] if carried is not None and events and events[0] is carried else events:
            if exact or ev.kind != "step":  # sampled progress is read below, once per stream
                alerts += self._event(file, ev, now)
        if exact:
            return self._count(alerts)
        for indices in by_stream.values():
            for index in reversed(indices[-PROGRESS_LOOKBACK:]):
                step = next((e for e in parse_job_log(lines[index].decode("utf-8", "replace"), file,
                                                      year=scanner.year).records if e.kind == "step"), None)
                if step is not None:
                    step.line = first_line + index + 1
                    alerts += self._event(file, step, now)
                    break
        return self._count(alerts)

    def tick(self, now: float | None = None) -> list[Alert]:
        """Silence checks; call about once per second."""
        now = time.time() if now is None else now
        limit = self.config.silence_s
        last_any = max((s.last_line_time for s in self.streams.values() if s.last_line_time), default=None)
        alerts: list[Alert] = []
        quiet_for = now - (last_any if last_any is not None else self.started)
        if self.completed:
            return []
        if quiet_for > limit:
            if not self.job_silent:
                self.job_silent = True
                since = "since the watch started" if last_any is None else f"since {utc_iso(last_any)}"
                alerts.append(Alert("job_silence", utc_iso(now), f"no log line from any rank for {quiet_for:.0f} s "
                                    f"({since}; threshold {limit:g} s): the job hangs or died without a word",
                                    severity="critical"))
            return self._count(alerts)
        for s in self.streams.values():
            if s.heartbeat and not s.silent and s.last_line_time is not None and now - s.last_line_time > limit:
                s.silent = True
                who = f"rank {s.rank}" if s.rank is not None else "this file"
                alerts.append(Alert("rank_silence", utc_iso(now), f"{who} printed nothing for {now - s.last_line_time:.0f} s "
                                    f"while other ranks still print (threshold {limit:g} s): a hung or straggling rank "
                                    f"({s.file})", severity="error", file=s.file, rank=s.rank, host=s.host))
        return self._count(alerts)

    # ---------------------------------------------------------------- rules
    def _event(self, file: str, ev: JobEvent, now: float) -> list[Alert]:
        rank = ev.rank if ev.rank is not None else ev.details.get("task")
        if ev.kind == "nccl_init" and ev.rank is not None and ev.host:
            self.rank_hosts[ev.rank] = ev.host
            for s in self.streams.values():
                if s.rank == ev.rank and s.host is None:
                    s.host = ev.host
        if ev.kind == "step":
            if self.completed:
                self.completed = False
                self.notices.append(f"{file}:{ev.line}: training steps again after the completion line; watching for silence")
            return self._step(self._stream(file, rank, ev.host), ev, now)
        if ev.kind == "completed" and not self.completed:
            self.completed = True
            self.notices.append(f"{file}:{ev.line}: the job reports completion ({ev.text.strip()[:80]}); "
                                "its silence from now on is expected, not an alert")
        if ev.kind in INFO_KINDS or (ev.kind == "exception" and ev.details.get("class") in IGNORED_EXCEPTIONS):
            return []
        key = (file, rank, ev.kind)
        if key in self._signatures_seen:
            return []
        self._signatures_seen.add(key)
        host = ev.host or (self.rank_hosts.get(rank) if rank is not None else None)
        who = f"rank {rank}" if rank is not None else "a process"
        where = f" on {host}" if host else ""
        return [Alert("signature", utc_iso(now), f"{who}{where}: {ev.kind.replace('_', ' ')} at {file}:{ev.line}: "
                      f"{ev.text.strip()[:200]}", severity="warning" if ev.kind in WARNING_KINDS else "error",
                      file=file, rank=rank, host=host, signature=ev.kind, line=ev.line, text=ev.text.strip()[:500])]

    def _step(self, s: Stream, ev: JobEvent, now: float) -> list[Alert]:
        s.heartbeat = True
        s.last_line_time = now  # a step line is a line of this rank, even where no prefix named it
        s.phase_ms.update(ev.details.get("metrics_ms") or {})
        number = ev.details.get("step")
        seconds = ev.details.get("s_per_step")
        moment = _epoch(ev.time_utc) if ev.time_utc and not ev.time_approx else now
        if seconds is None and s._last_step is not None and number is not None and number > s._last_step[0]:
            seconds = (moment - s._last_step[1]) / (number - s._last_step[0])
        if number is not None:
            s._last_step = (number, moment)
        if seconds is None or seconds <= 0:
            return []
        s.step_seconds = seconds
        alerts = []
        base = s.step_median_s
        if len(s.steps) >= self.config.step_warmup and base and seconds > self.config.step_band * base:
            if not s.slow:
                s.slow = True
                who = f"rank {s.rank}" if s.rank is not None else s.file
                alerts.append(Alert("step_time", utc_iso(now), f"{who}: step {number} took {seconds:.3g} s, "
                                    f"{seconds / base:.1f}x its median of {base:.3g} s (band {self.config.step_band:g}x): "
                                    "throttling, a slow link or storage?", severity="warning", file=s.file,
                                    rank=s.rank, host=s.host, line=ev.line, text=ev.text.strip()[:500]))
        elif base and seconds <= base * (1 + (self.config.step_band - 1) / 2):
            s.slow = False  # back well inside the band (hysteresis: no alert per step at the edge)
        s.steps.append(seconds)
        return alerts

    # ---------------------------------------------------------------- helpers
    def _stream(self, file: str, rank: int | None, host: str | None) -> Stream:
        key = (file, rank)
        s = self.streams.get(key)
        if s is None:
            s = self.streams[key] = Stream(file, rank, host or (self.rank_hosts.get(rank) if rank is not None else None))
        elif s.host is None and host:
            s.host = host
        return s

    def _count(self, alerts: list[Alert]) -> list[Alert]:
        for a in alerts:
            self.alerts_total[a.kind] = self.alerts_total.get(a.kind, 0) + 1
        return alerts


def _rank_of(hints: dict) -> int | None:
    """The global rank a launcher prefix names: torch's ``[rankN]:``, mpirun's ``[job,N]``, srun's task."""
    for key in ("rank", "task"):
        if hints.get(key) is not None:
            return int(hints[key])
    return None


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
