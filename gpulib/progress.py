"""Progress of a multi-step job on stderr: one plain line per finished step, a live bar on a terminal.

Why: ``gpulib run`` spends seconds to minutes in notebook kernels; a command that prints nothing
for 11 s looks hung to an engineer at 3 a.m., and one that redraws a bar fills a cron mail or a
CI log with carriage returns. So: on a TTY a ``tqdm`` bar (elapsed time ticking, the running
steps named) with each finished step written above it; otherwise only the plain lines::

    [3/8] 02_gpu_memory_oom            ok        1.4 s

Small API, shared by every command that runs steps::

    with StepProgress(total=8, label="incident") as progress:
        progress.started("01_kernel_xid")              # any thread
        progress.finished("01_kernel_xid", "ok", 1.4)  # any thread
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

#: Seconds between redraws of the bar while no step finishes (the elapsed clock keeps moving).
REFRESH_S = 0.5


def step_line(done: int, total: int, name: str, status: str, seconds: float, note: str = "") -> str:
    width = len(str(total))
    return f"[{done:>{width}}/{total}] {name:<30} {status:<7} {seconds:7.1f} s" + (f"  {note}" if note else "")


class StepProgress:
    """Progress of ``total`` steps. ``bar``: None = a bar only when ``stream`` is a terminal."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None, bar: bool | None = None):
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
