"""gpulib.progress: a tqdm bar on a terminal, plain lines in logs, silence for quick steps."""

from __future__ import annotations

import io

from gpulib.progress import Progress


def test_quick_step_in_a_log_prints_nothing():
    out = io.StringIO()
    with Progress(3, "reading evidence", "files", stream=out, every_s=60) as bar:
        for _ in range(3):
            bar.update()
    assert out.getvalue() == ""


def test_slow_step_in_a_log_prints_plain_lines_and_a_final_one():
    out = io.StringIO()
    with Progress(60, "sampling GPUs", "s", stream=out, every_s=0) as bar:
        bar.set(30)
        bar.set(60)
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["sampling GPUs: 30/60 s", "sampling GPUs: 60/60 s"]
    assert lines[-1].startswith("sampling GPUs: 60/60 s done in ")
    assert "\r" not in out.getvalue()


def test_terminal_gets_a_tqdm_bar_and_small_steps_nothing():
    out = io.StringIO()
    with Progress(4, "deep-verifying", "checkpoints", stream=out, tty=True) as bar:
        bar.update(2)
    drawn = out.getvalue()
    assert drawn.startswith("\rdeep-verifying:") and "/4 [" in drawn and "checkpoints/s" in drawn
    assert drawn.endswith("\r")  # the bar is cleared when the step ends (leave=False)
    quiet = io.StringIO()
    with Progress(1, "x", stream=quiet, tty=True, min_total=2, every_s=0) as bar:
        bar.update()
    assert quiet.getvalue() == ""


def test_ticking_advances_with_the_clock_while_a_step_runs():
    import time

    from gpulib.progress import Ticking

    out = io.StringIO()
    with Ticking(2, "measuring /data", stream=out, every_s=0):
        time.sleep(2.3)
    lines = out.getvalue().splitlines()
    assert "measuring /data: 1/2 s" in lines and "measuring /data: 2/2 s" in lines
    assert lines[-1].startswith("measuring /data: 2/2 s done in 2 s")
