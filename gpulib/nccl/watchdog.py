"""A bounded wait for every step, naming the ranks that did not arrive.

A dead or wedged rank must not hang the test forever (NCCL would wait indefinitely, gloo for its
30-minute default). Before each step every rank publishes ``<seq>|<step name>`` in the job's
key-value store (the one torchrun created); a thread arms a deadline. If the step is not done
in time, the thread reads every rank's last published step: ranks behind are the ones that did
not arrive (a crash, a hang before the call, a stuck host); if all arrived, the collective itself
is stuck inside the fabric. It reports that and ends the process with :data:`EXIT_TIMEOUT`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

EXIT_TIMEOUT = 3
_KEY = "gpulib-nccl/step/{rank}"


class Watchdog:
    def __init__(self, store, rank: int, world_size: int, timeout_s: float,
                 on_timeout: Callable[[str, bool], None] | None = None):
        self.store, self.rank, self.world_size, self.timeout_s = store, rank, world_size, timeout_s
        self.on_timeout = on_timeout
        self._seq = 0
        self._step = "start"
        self._deadline: float | None = None
        self._cond = threading.Condition()
        threading.Thread(target=self._watch, name="gpulib-nccl-watchdog", daemon=True).start()

    def step(self, name: str) -> None:
        """Announce that this rank has arrived at ``name`` and start its clock."""
        self._seq += 1
        self._step = name
        self.store.set(_KEY.format(rank=self.rank), f"{self._seq}|{name}")
        with self._cond:
            self._deadline = time.monotonic() + self.timeout_s
            self._cond.notify()

    def done(self) -> None:
        with self._cond:
            self._deadline = None
            self._cond.notify()

    def _positions(self) -> dict[int, tuple[int, str]]:
        out = {}
        for r in range(self.world_size):
            key = _KEY.format(rank=r)
            try:
                if self.store.check([key]):
                    seq, _, name = self.store.get(key).decode().partition("|")
                    out[r] = (int(seq), name)
            except Exception as exc:  # the store itself may be gone with the failed agent
                log.debug("cannot read %s: %s", key, exc)
        return out

    def diagnose(self) -> tuple[str, bool]:
        """The timeout message, and whether this rank is the lowest one that arrived (it reports)."""
        positions = self._positions()
        behind = [r for r in range(self.world_size) if positions.get(r, (0, ""))[0] < self._seq]
        arrived = [r for r in range(self.world_size) if r not in behind]
        head = f"timeout after {self.timeout_s:g} s in step '{self._step}'"
        if behind:
            where = ", ".join(
                f"rank {r} (last at '{positions[r][1]}')" if r in positions else f"rank {r} (never reached its first measurement)" for r in behind)
            message = f"{head}: {len(behind)} of {self.world_size} ranks did not arrive: {where}"
        else:
            message = (f"{head}: all {self.world_size} ranks arrived but the collective did not complete "
                       "(stuck inside the fabric: a hung GPU, NVLink or network path)")
        return message, bool(arrived) and self.rank == min(arrived)

    def _watch(self) -> None:
        with self._cond:
            while True:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(timeout=left)
                    continue
                break
        message, reporter = self.diagnose()
        print(f"gpulib nccl: rank {self.rank}: {message}", file=sys.stderr, flush=True)
        if self.on_timeout:
            try:
                self.on_timeout(message, reporter)
            except Exception as exc:  # reporting must never keep a hung job alive
                print(f"gpulib nccl: rank {self.rank}: could not write the failure report: {exc}", file=sys.stderr)
        sys.stdout.flush()
        os._exit(EXIT_TIMEOUT)
