"""Test injections: make one rank slow, wrong or hung on purpose, to prove the tester catches it.

They are environment variables (so torchrun passes them to every rank unchanged) with names that
say what they are; an active injection is announced in the output header and the JSON, so a
deliberately broken run can never pass for a real measurement.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DELAY_RANK = "GPULIB_NCCL_TEST_INJECT_DELAY_RANK"  # this rank sleeps before each collective call
DELAY_MS = "GPULIB_NCCL_TEST_INJECT_DELAY_MS"  # how long (default 20 ms)
WRONG_RANK = "GPULIB_NCCL_TEST_INJECT_WRONG_RANK"  # this rank adds 1 to its first input element in checks
HANG_RANK = "GPULIB_NCCL_TEST_INJECT_HANG_RANK"  # this rank never arrives at its first measurement
RAISE_RANK = "GPULIB_NCCL_TEST_INJECT_RAISE_RANK"  # this rank raises at its first measurement, as a failed call does


def _int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value.lstrip("-").isdigit() else None


@dataclass(frozen=True)
class Injections:
    delay_rank: int | None = None
    delay_ms: float = 20.0
    wrong_rank: int | None = None
    hang_rank: int | None = None
    raise_rank: int | None = None

    @classmethod
    def from_env(cls) -> Injections:
        delay_ms = os.environ.get(DELAY_MS, "").strip()
        return cls(_int(DELAY_RANK), float(delay_ms) if delay_ms else 20.0, _int(WRONG_RANK), _int(HANG_RANK),
                   _int(RAISE_RANK))

    def active(self) -> dict[str, str]:
        out = {}
        if self.delay_rank is not None:
            out[DELAY_RANK] = f"{self.delay_rank} ({self.delay_ms:g} ms)"
        if self.wrong_rank is not None:
            out[WRONG_RANK] = str(self.wrong_rank)
        if self.hang_rank is not None:
            out[HANG_RANK] = str(self.hang_rank)
        if self.raise_rank is not None:
            out[RAISE_RANK] = str(self.raise_rank)
        return out
