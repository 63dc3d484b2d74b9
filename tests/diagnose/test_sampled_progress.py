"""Progress lines of a big log are read in sampled windows (``training_log.progress_ranges``); the
step-time analysis must reach the same answer as reading every line."""

from __future__ import annotations

import random
import re

import pytest

from gpulib.diagnose import diagnose
from gpulib.parsers import training_log as tl

RANKS, SLOW_RANK, ONSET = 8, 6, 5_000


def _write_log(path, steps: int) -> None:
    rng = random.Random(5)
    with open(path, "w") as out:
        for step in range(1, steps + 1):
            for r in range(RANKS):
                fwd = 1200 + rng.random() * 30
                if r == SLOW_RANK and step >= ONSET:
                    fwd *= 2.0  # the GPU of rank 6 starts throttling and never recovers
                out.write(f"[rank{r}]:2026-03-10 01:{step // 60 % 60:02d}:{step % 60:02d},000 INFO trainer.py:412 "
                          f"step={step} loss=2.0 | fwd_bwd_ms={fwd:.1f} data_ms=1.0 | 1.25 s/step\n")


def _straggler(tmp_path, **sizes) -> tuple[int, int]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in sizes.items():
            mp.setattr(tl, name, value)
        d = diagnose([tmp_path])
    (f,) = [f for f in d.findings if f.id.startswith("straggler")]
    m = re.search(r"Rank (\d+) became a straggler at step (\d+)", f.title)
    return int(m[1]), int(m[2])


def test_sampled_windows_find_the_straggler_reading_every_line_finds(tmp_path):
    _write_log(tmp_path / "train.log", steps=12_000)  # ~10 MB: 96,000 progress lines
    size = (tmp_path / "train.log").stat().st_size
    stride_steps = 12_000 // (tl.SAMPLE_WINDOWS + 1)
    rank, step = _straggler(tmp_path)  # the shipped windows
    full_rank, full_step = _straggler(tmp_path, WHOLE_FILE_BYTES=size)  # every line
    assert (full_rank, full_step) == (SLOW_RANK, ONSET)
    assert rank == full_rank
    assert ONSET <= step <= ONSET + stride_steps  # onset dated to within one stride


def test_windows_cover_both_ends_and_sample_between():
    size = 100 * 1024 * 1024
    ranges = tl.progress_ranges(size, 0, size)
    assert ranges[0] == (0, tl.HEAD_BYTES) and ranges[-1] == (size - tl.TAIL_BYTES, size)
    assert len(ranges) == tl.SAMPLE_WINDOWS + 2
    assert sum(hi - lo for lo, hi in ranges) < size / 50  # a bounded read, not the file
    # a chunk sees only the windows inside it, chunk-relative
    assert tl.progress_ranges(size, size - 1024, size) == [(0, 1024)]
    assert tl.progress_ranges(tl.WHOLE_FILE_BYTES, 0, 4096) == [(0, 4096)]
