"""gpulib.progress.StepProgress (gpulib run): plain step lines off a terminal, a tqdm bar with the same lines on one."""

import io
import time

from gpulib.progress import StepProgress, step_line


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    with StepProgress(3, "gpulib run incident", stream=out) as progress:
        assert not progress.is_bar
        progress.started("00_triage")
        progress.finished("00_triage", "ok", 1.42)
        progress.finished("02_gpu_memory_oom", "failed", 12.0, "RuntimeError: boom")
    lines = out.getvalue().splitlines()
    assert lines == [step_line(1, 3, "00_triage", "ok", 1.42), step_line(2, 3, "02_gpu_memory_oom", "failed", 12.0,
                                                                          "RuntimeError: boom")]
    assert lines[0].startswith("[1/3] 00_triage") and lines[0].endswith("1.4 s") and "\r" not in out.getvalue()


def test_a_bar_names_the_running_steps_and_keeps_the_lines():
    out = io.StringIO()
    with StepProgress(2, "gpulib run incident", stream=out, bar=True) as progress:
        progress.started("00_triage")
        progress.started("01_kernel_xid")
        time.sleep(0.7)  # the clock ticks while nothing finishes
        progress.finished("01_kernel_xid", "ok", 0.7)
        progress.finished("00_triage", "ok", 0.8)
    text = out.getvalue()
    assert "running: 00_triage, 01_kernel_xid" in text and "\r" in text
    assert step_line(1, 2, "01_kernel_xid", "ok", 0.7) in text and "2/2 steps" in text
    assert text.count("0/2 steps") >= 3  # redrawn before any step finished
