"""A bounded wait for every step, naming the ranks that did not arrive.

A dead or wedged rank must not hang the test forever (NCCL would wait indefinitely, gloo for its
30-minute default). Before each step every rank publishes ``<seq>|<step name>`` in the job's
key-value store (the one torchrun created); a thread arms a deadline. If the step is not done
in time, the thread reads every rank's last published step: ranks behind are the ones that did
not arrive (a hang before the call, a stuck host); if all arrived, the collective itself is stuck
inside the fabric. The same thread bumps a per-rank heartbeat counter every second, so a rank
whose counter no longer moves is told apart as dead (process killed, host down) from one that is
alive but stuck. It reports that and ends the process with :data:`EXIT_TIMEOUT`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from gpulib.logs import get_logger

log = get_logger(__name__)

EXIT_TIMEOUT = 3
HEARTBEAT_S = 1.0
_KEY = "gpulib-nccl/step/{rank}"
_ALIVE = "gpulib-nccl/alive/{rank}"


class Watchdog:
    def __init__(self, store, rank: int, world_size: int, timeout_s: float,
                 on_timeout: Callable[[str, bool], None] | None = None):
        self.store, self.rank, self.world_size, self.timeout_s = store, rank, world_size, timeout_s
        self.on_timeout = on_timeout
        self._seq = 0
        self._step = "start"
        self._deadline: float | None = None
        self._closed = False
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

    def close(self) -> None:
        """Stop the thread (end of the run, before the store goes away)."""
        with self._cond:
            self._closed = True
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

    def _heartbeats(self) -> dict[int, int]:
        out = {}
        for r in range(self.world_size):
            try:
                out[r] = int(self.store.add(_ALIVE.format(rank=r), 0))
            except Exception as exc:
                log.debug("cannot read heartbeat of rank %d: %s", r, exc)
        return out

    def _dead_ranks(self) -> set[int]:
        """Ranks whose heartbeat did not move over 2.5 beats."""
        before = self._heartbeats()
        time.sleep(2.5 * HEARTBEAT_S)
        after = self._heartbeats()
        return {r for r in range(self.world_size) if r != self.rank and after.get(r, 0) == before.get(r, 0)}

    def diagnose(self) -> tuple[str, bool]:
        """The timeout message, and whether this rank is the lowest one that arrived (it reports)."""
        positions = self._positions()
        dead = self._dead_ranks()
        behind = [r for r in range(self.world_size) if positions.get(r, (0, ""))[0] < self._seq]
        arrived = [r for r in range(self.world_size) if r not in behind]
        head = f"timeout after {self.timeout_s:g} s in step '{self._step}'"

        def state(r: int) -> str:
            last = f"last at '{positions[r][1]}'" if r in positions else "never reached its first measurement"
            alive = "no heartbeat: process dead or host unreachable" if r in dead else "process alive but stuck"
            return f"rank {r} ({last}; {alive})"

        if behind:
            message = f"{head}: {len(behind)} of {self.world_size} ranks did not arrive: " + ", ".join(map(state, behind))
        elif dead & set(arrived):
            message = (f"{head}: all ranks arrived, then these stopped responding inside the collective: "
                       + ", ".join(map(state, sorted(dead))))
        else:
            message = (f"{head}: all {self.world_size} ranks arrived but the collective did not complete "
                       "(stuck inside the fabric: a hung GPU, NVLink or network path)")
        live_arrived = [r for r in arrived if r not in dead]
        return message, bool(live_arrived) and self.rank == min(live_arrived)

    def _beat(self) -> None:
        try:
            self.store.add(_ALIVE.format(rank=self.rank), 1)
        except Exception as exc:  # the store lives with torchrun's agent; losing it is reported elsewhere
            log.debug("heartbeat failed: %s", exc)

    def _watch(self) -> None:
        while True:
            self._beat()
            with self._cond:
                if self._closed:
                    return
                if self._deadline is None:
                    self._cond.wait(timeout=HEARTBEAT_S)
                    continue
                left = self._deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(timeout=min(left, HEARTBEAT_S))
        message, reporter = self.diagnose()
        print(f"gpulib nccl: rank {self.rank}: {message}", file=sys.stderr, flush=True)
        if self.on_timeout:
            try:
                self.on_timeout(message, reporter)
            except Exception as exc:  # reporting must never keep a hung job alive
                print(f"gpulib nccl: rank {self.rank}: could not write the failure report: {exc}", file=sys.stderr)
        sys.stdout.flush()
        os._exit(EXIT_TIMEOUT)
