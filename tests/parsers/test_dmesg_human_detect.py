"""``dmesg -H`` output (``[Feb17 13:42]`` minute stamps, ``[  +0.000007]`` deltas) is a kernel log by
its content, whatever the file is called; bracketed text that is not a dmesg clock is not."""

from __future__ import annotations

from gpulib.parsers import detect

HUMAN = ("[Mar 4 09:12] pcieport 0000:40:01.1: AER: Uncorrected (Fatal) error received: 0000:40:01.1\n"
         "[  +0.000011] pcieport 0000:40:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer\n"
         "[  +0.000817] nvidia 0000:41:00.0: AER: can't recover (no error_detected callback)\n")


def test_dmesg_human_is_a_kernel_log_under_any_name():
    assert detect.detect_kind("___", HUMAN) == "kernel_log"
    assert detect.detect_kind("notes", HUMAN) == "kernel_log"


def test_control_checklists_and_bracketed_words_are_not_kernel_logs():
    text = "[x] reseat the riser\n[ ] rerun nccl-tests\n[Mar] quarterly review\n"
    assert detect.detect_kind("todo", text) != "kernel_log"
