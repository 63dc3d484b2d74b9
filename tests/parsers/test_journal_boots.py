"""``journalctl --list-boots`` rows in both layouts systemd prints (ids and times are ours)."""

from __future__ import annotations

from gpulib.parsers import detect, journal_boots

WITH_HEADER = """\
IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY
 -2 0b7e3c91d24a4f6e8a15c0d9e2f7b364 Fri 2026-02-06 08:00:12 CET Mon 2026-02-09 17:40:03 CET
 -1 5d2a0e7c1b9f4a36b8c4e1f0a7d3c925 Mon 2026-02-09 17:41:55 CET Thu 2026-02-12 03:17:48 CET
  0 e91c4b07a3d24f58b6a0c7e2d1f9b483 Thu 2026-02-12 03:21:30 CET Thu 2026-02-12 09:02:11 CET
"""

# systemd before 247: no header, an em dash between the two times
OLD = """\
-1 5d2a0e7c1b9f4a36b8c4e1f0a7d3c925 Mon 2026-02-09 17:41:55 CET—Thu 2026-02-12 03:17:48 CET
 0 e91c4b07a3d24f58b6a0c7e2d1f9b483 Thu 2026-02-12 03:21:30 CET—Thu 2026-02-12 09:02:11 CET
"""


def test_rows_with_header():
    rows = journal_boots.parse(WITH_HEADER).records
    assert [r.index for r in rows] == [-2, -1, 0]
    assert rows[1].boot_id == "5d2a0e7c1b9f4a36b8c4e1f0a7d3c925"
    assert (rows[1].first_local, rows[1].last_local, rows[1].zone) == ("2026-02-09T17:41:55", "2026-02-12T03:17:48", "CET")
    assert rows[1].line == 3


def test_old_layout_with_em_dash():
    rows = journal_boots.parse(OLD).records
    assert [(r.index, r.last_local) for r in rows] == [(-1, "2026-02-12T03:17:48"), (0, "2026-02-12T09:02:11")]


def test_detected_before_the_log_kinds():
    assert detect.detect_kind("boots.txt", WITH_HEADER) == journal_boots.KIND
    assert detect.detect_kind("boots.txt", OLD) == journal_boots.KIND


def test_not_boots_is_a_problem_not_a_record():
    result = journal_boots.parse("Feb 12 03:17:48 n1 kernel: eth0: link up\n", "k.txt")
    assert result.records == [] and result.problems[0].source == "k.txt"
    assert not journal_boots.looks_like("IDX BOOT ID FIRST ENTRY LAST ENTRY\n")
