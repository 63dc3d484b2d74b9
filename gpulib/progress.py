"""Progress of a long step, for the person waiting on it.

On a terminal: a ``tqdm`` bar on stderr (rate, time left, cleared when done). Elsewhere (cron,
systemd, CI, a pipe): a plain line such as ``sampling GPUs: 30/60 s`` at most every ``every_s``
seconds and one line at the end - and nothing at all for a step that ends before the first
line is due, so quick runs keep their logs clean. Steps below ``min_total`` items show nothing.

:class:`StepProgress` is the same idea for a job of named steps that run in parallel (``gpulib
run``'s notebooks): every finished step is a plain line, ``[3/8] 02_gpu_memory_oom  ok  1.4 s``,
also off a terminal (a scheduler's log says which step took the time); on a terminal a bar above
them names the running steps and keeps its clock moving while none finishes.
"""

from __future__ import annotations

import io
import sys
import threading
import time


class Progress:
    """``with Progress(total, "reading evidence", "files") as bar: ... bar.update()``."""

    def __init__(self, total: float | None, desc: str, unit: str = "", *, stream: io.TextIOBase | None = None,
                 every_s: float = 10.0, min_total: float = 0, tty: bool | None = None) -> None:
        self.total, self.desc, self.unit, self.every_s = total, desc, unit, every_s
        self.stream = stream if stream is not None else sys.stderr
        self.done: float = 0
        self.enabled = total is None or total >= min_total
        is_tty = self.stream.isatty() if tty is None and hasattr(self.stream, "isatty") else bool(tty)
        self._bar = None
        if self.enabled and is_tty:
            from tqdm import tqdm  # only where a bar is drawn

            self._bar = tqdm(total=total, desc=desc, unit=f" {unit}" if unit else "it", file=self.stream,
                             leave=False, dynamic_ncols=True)
        self._started = self._last = time.monotonic()
        self._printed = False

    def update(self, n: float = 1) -> None:
        self.set(self.done + n)

    def set(self, done: float) -> None:
        """Progress is ``done`` (of ``total``)."""
        if not self.enabled:
            return
        step, self.done = done - self.done, done
        if self._bar is not None:
            self._bar.update(step)
            return
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self._line()

    def _line(self, final: bool = False) -> None:
        of = f"/{self.total:g}" if self.total is not None else ""
        unit = f" {self.unit}" if self.unit else ""
        took = f" in {time.monotonic() - self._started:.0f} s" if final else ""
        print(f"{self.desc}: {self.done:g}{of}{unit}{' done' if final else ''}{took}", file=self.stream, flush=True)
        self._printed = True

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and self._printed:
            self._line(final=True)
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Ticking:
    """Progress of a step that runs for a known time (a ``seconds``-long measurement): a
    background thread advances the display once a second until the ``with`` block ends."""

    def __init__(self, seconds: float, desc: str, **options) -> None:
        self._bar = Progress(seconds, desc, "s", **options)
        self._seconds = seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpulib-progress", daemon=True)

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(1.0):
            self._bar.set(min(self._seconds, round(time.monotonic() - started)))

    def __enter__(self) -> Ticking:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._bar.close()


#: Seconds between redraws of the bar while no step finishes (the elapsed clock keeps moving).
REFRESH_S = 0.5


def step_line(done: int, total: int, name: str, status: str, seconds: float, note: str = "") -> str:
    width = len(str(total))
    return f"[{done:>{width}}/{total}] {name:<30} {status:<7} {seconds:7.1f} s" + (f"  {note}" if note else "")


class StepProgress:
    """Progress of ``total`` steps. ``bar``: None = a bar only when ``stream`` is a terminal."""

    def __init__(self, total: int, label: str = "", stream: io.TextIOBase | None = None, bar: bool | None = None):
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self._running: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bar = None
        self._ticker = None
        if bar if bar is not None else _isatty(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label or None, unit="step", file=self.stream, leave=False,
                             dynamic_ncols=True, bar_format="{desc} {bar} {n}/{total} steps, {elapsed}{postfix}")
            self._ticker = threading.Thread(target=self._tick, name="gpulib-progress", daemon=True)
            self._ticker.start()

    @property
    def is_bar(self) -> bool:
        return self._bar is not None

    def _tick(self) -> None:
        while not self._stop.wait(REFRESH_S):
            with self._lock:
                if self._bar is not None:
                    self._bar.refresh()

    def _postfix(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(("running: " + ", ".join(self._running)) if self._running else "", refresh=True)

    def started(self, name: str) -> None:
        with self._lock:
            self._running.append(name)
            self._postfix()

    def finished(self, name: str, status: str, seconds: float, note: str = "") -> None:
        with self._lock:
            self.done += 1
            if name in self._running:
                self._running.remove(name)
            line = step_line(self.done, self.total, name, status, seconds, note)
            if self._bar is not None:
                self._bar.write(line, file=self.stream)
                self._bar.update(1)
                self._postfix()
            else:
                print(line, file=self.stream, flush=True)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
