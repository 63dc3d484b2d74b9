"""The collector framework: every source runs in its own thread with its own deadline.

Why threads with deadlines: a node that needs evidence is by definition a broken node. NVML
calls can block on a GPU that fell off the bus, ``stat`` can block on a dead NFS mount, and
nothing of that may stop the other collectors or the bundle from being written. Commands
enforce their own timeout (and kill their process group, see :mod:`runner`); in-process work
(NVML, file listings) that overruns is abandoned: its thread keeps nothing it writes later,
because its :class:`Sink` is closed the moment the deadline passes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpulib.collect.runner import CommandResult, run_command
from gpulib.evidence.bundle import BundleWriter, CollectorRecord
from gpulib.logs import get_logger

log = get_logger(__name__)

#: Seconds a collector thread gets beyond its own timeout before it is abandoned (commands
#: need a moment to be killed and drained).
GRACE_S = 3.0


@dataclass
class Outcome:
    """What a collector function returns: bundle status and reason (the files are the ones it
    wrote through its :class:`Sink`)."""

    status: str
    reason: str | None = None


class Sink:
    """A collector's only way into the bundle. Closed once the collector is abandoned, so a
    late write can never slip in after ``manifest.json`` was hashed."""

    def __init__(self, writer: BundleWriter, commands: list[dict], name: str):
        self._writer = writer
        self._commands = commands
        self._name = name
        self._lock = threading.Lock()
        self._closed = False
        self.files: list[str] = []

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def write_bytes(self, relpath: str, data: bytes) -> str:
        with self._lock:
            if self._closed:
                raise TimeoutError(f"collector {self._name} was abandoned; {relpath} not written")
            self._writer.write_bytes(relpath, data)
            self.files.append(relpath)
        return relpath

    def write_text(self, relpath: str, text: str) -> str:
        return self.write_bytes(relpath, text.encode("utf-8"))

    def write_json(self, relpath: str, obj: object) -> str:
        return self.write_text(relpath, json.dumps(obj, indent=2, sort_keys=True) + "\n")

    def append(self, relpath: str, text: str) -> None:
        """Append to a file as it grows (time series), so a capture cut short keeps its rows."""
        with self._lock:
            if self._closed:
                raise TimeoutError(f"collector {self._name} was abandoned; {relpath} not extended")
            with open(self._writer.path(relpath), "a", encoding="utf-8") as handle:
                handle.write(text)
            if relpath not in self.files:
                self.files.append(relpath)

    def target(self, relpath: str):
        """A path inside the bundle for collectors that stream (CSV sampling, log copies)."""
        with self._lock:
            if self._closed:
                raise TimeoutError(f"collector {self._name} was abandoned; {relpath} not written")
            self.files.append(relpath)
            return self._writer.path(relpath)

    def run(self, argv: list[str], timeout_s: float, relpath: str | None = None,
            merge_stderr: bool = False) -> CommandResult:
        """Run a command, save its stdout under ``relpath`` (unless it failed silently) and a
        non-empty stderr beside it as ``relpath.stderr``; note the argument list in ``commands.json``."""
        result = run_command(argv, timeout_s, merge_stderr=merge_stderr)
        entry = {"collector": self._name, **result.provenance()}
        if relpath and (result.status == "ok" or result.stdout):
            entry["stdout_file"] = self.write_bytes(relpath, result.stdout)
        if relpath and result.stderr:
            entry["stderr_file"] = self.write_bytes(relpath + ".stderr", result.stderr)
        self._commands.append(entry)
        return result


@dataclass
class Collector:
    """One evidence source. ``fn(sink, timeout_s)`` returns an :class:`Outcome`."""

    name: str
    timeout_s: float
    fn: Callable[[Sink, float], Outcome]


def from_command(result: CommandResult) -> Outcome:
    return Outcome(result.status, result.reason)


def run_collectors(writer: BundleWriter, collectors: list[Collector], timeout_scale: float = 1.0) -> list[dict]:
    """Run every collector concurrently, record one :class:`CollectorRecord` each (in the
    order given) and return the command provenance list for ``commands.json``."""
    commands: list[dict] = []
    jobs = []
    for collector in collectors:
        timeout_s = collector.timeout_s * timeout_scale
        sink = Sink(writer, commands, collector.name)
        box: dict = {}
        thread = threading.Thread(
            target=_invoke, args=(collector, sink, timeout_s, box), name=f"gpulib-collect-{collector.name}", daemon=True
        )
        jobs.append((collector, sink, timeout_s, box, thread, time.monotonic()))
        thread.start()
    for collector, sink, timeout_s, box, thread, started in jobs:
        thread.join(max(0.0, started + timeout_s + GRACE_S - time.monotonic()))
        if thread.is_alive():
            sink.close()
            outcome = Outcome("timeout", f"still running after {timeout_s:g} s; abandoned")
            seconds = time.monotonic() - started
        else:
            outcome = box["outcome"]
            seconds = box["seconds"]
        record = CollectorRecord(collector.name, outcome.status, outcome.reason, round(seconds, 3), list(sink.files))
        log.info("collector %s: %s%s", record.name, record.status, f" ({record.reason})" if record.reason else "")
        writer.record(record)
    return commands


def _invoke(collector: Collector, sink: Sink, timeout_s: float, box: dict) -> None:
    started = time.monotonic()
    try:
        outcome = collector.fn(sink, timeout_s)
    except TimeoutError as exc:
        outcome = Outcome("timeout", str(exc))
    except Exception as exc:  # a collector bug must cost one record, never the bundle
        log.debug("collector %s crashed", collector.name, exc_info=True)
        outcome = Outcome("failed", f"{type(exc).__name__}: {exc}")
    box["outcome"] = outcome
    box["seconds"] = time.monotonic() - started
