"""``last`` / ``last -x`` listings: row kinds and endings, the three time formats, years, bad input.

Layouts as util-linux ``last`` prints them (``%-8s %-12s %-16s`` columns, ``- crash`` / ``- down``
/ ``still running`` endings, the ``wtmp begins`` footer); users, hosts, kernels and times are ours.
"""

from __future__ import annotations

import pytest

from gpulib.parsers import wtmp
from gpulib.parsers.wtmp import WtmpBegins, WtmpRecord

# newest first: a node that booted on Thu Mar 5 after a crash, and a clean reboot on Mar 2
LAST_X = """\
ops      pts/2        10.20.0.7        Thu Mar  5 08:41   still logged in
runlevel (to lvl 3)   5.14.0-427.13.1. Thu Mar  5 08:37   still running
reboot   system boot  5.14.0-427.13.1. Thu Mar  5 08:36   still running
trainer  pts/0        10.20.0.9        Wed Mar  4 21:05 - crash (11:31)
runlevel (to lvl 3)   5.14.0-427.13.1. Mon Mar  2 07:02 - 08:36 (3+01:34)
reboot   system boot  5.14.0-427.13.1. Mon Mar  2 07:01 - 08:36 (3+01:35)
ops      pts/1        10.20.0.7        Mon Mar  2 06:50 - down   (00:09)
shutdown system down  5.14.0-427.13.1. Mon Mar  2 06:59 - 07:01  (00:02)
runlevel (to lvl 6)   5.14.0-427.13.1. Mon Mar  2 06:58 - 06:59  (00:01)
ops      tty1                          Sun Mar  1 23:10 - 23:12  (00:02)

wtmp begins Sun Feb  1 00:03:11 2026
"""


def _rows(text: str, **opts) -> list[WtmpRecord]:
    return [r for r in wtmp.parse(text, "last-x.txt", **opts).records if isinstance(r, WtmpRecord)]


def test_row_kinds_endings_and_durations():
    result = wtmp.parse(LAST_X, "last-x.txt")
    assert result.problems == [] and wtmp.looks_like(LAST_X)
    rows = _rows(LAST_X)
    assert [r.kind for r in rows] == ["session", "runlevel", "boot", "session", "runlevel", "boot", "session",
                                      "shutdown", "runlevel", "session"]
    assert [r.ended for r in rows] == ["logged_in", "running", "running", "crash", "logout", "logout", "down",
                                       "logout", "logout", "logout"]
    crashed = rows[3]
    assert (crashed.user, crashed.tty, crashed.host, crashed.duration_min) == ("trainer", "pts/0", "10.20.0.9", 691)
    assert rows[5].duration_min == 3 * 1440 + 95 and rows[5].host == "5.14.0-427.13.1."
    assert rows[1].runlevel == "3" and rows[8].runlevel == "6" and rows[8].clean_stop and rows[7].clean_stop
    assert not rows[1].clean_stop and not rows[2].clean_stop
    assert rows[9].host is None  # a console login has no host
    footer = result.records[-1]
    assert isinstance(footer, WtmpBegins) and footer.begins_local == "2026-02-01T00:03:11"


def test_footer_gives_the_year_of_default_format_rows():
    rows = _rows(LAST_X)
    assert rows[3].login_local == "2026-03-04T21:05:00" and rows[0].login_local == "2026-03-05T08:41:00"


def test_year_from_the_weekday_when_the_footer_is_cut():
    head = "\n".join(LAST_X.splitlines()[:4]) + "\n"  # `last -x | head -n 4`
    assert _rows(head)[3].login_local is None  # no year printed, no hint: not guessed
    assert _rows(head, year=2027)[3].login_local == "2026-03-04T21:05:00"  # Wed Mar 4 is a 2026 date
    assert wtmp.local_time("Wed Mar  4 21:05", 2023) == "2020-03-04T21:05:00"  # never years after the hint
    assert wtmp.local_time("Fri Feb 30 10:00", 2026) is None  # no such date


def test_full_and_iso_time_formats():
    full = ("reboot   system boot  6.8.0-51-generic Tue Jan 13 04:10:22 2026   still running\n"
            "ml       pts/4        192.168.7.31     Mon Jan 12 22:40:05 2026 - crash                    (05:30)\n")
    rows = _rows(full)
    assert [r.login_local for r in rows] == ["2026-01-13T04:10:22", "2026-01-12T22:40:05"]
    assert rows[1].ended == "crash" and rows[1].duration_min == 330
    iso = ("reboot   system boot  6.8.0-51-generic 2026-01-13T04:10:22+01:00   still running\n"
           "ml       pts/4        192.168.7.31     2026-01-12T22:40:05+01:00 - 2026-01-12T23:01:44+01:00  (00:21)\n")
    rows = _rows(iso)
    assert rows[0].login_local == "2026-01-13T04:10:22+01:00" and rows[1].ended == "logout"


def test_host_last_and_gone_rows():
    text = ("ml       pts/4        Mon Jan 12 22:40 - crash  (05:30)     192.168.7.31\n"
            "ml       pts/5        Mon Jan 12 22:45    gone - no logout\n")
    rows = _rows(text)
    assert rows[0].host == "192.168.7.31" and rows[0].ended == "crash" and rows[1].ended == "gone"


@pytest.mark.parametrize("text, why", [
    ("", "no `last` rows"),
    ("2026-03-04 21:05:11,812 train.py:88 INFO step 1200 loss 2.31\n", "no `last` rows"),
    ("reboot   system boot  5.14.0-427.13.1. Thu Ma", "no `last` rows"),  # cut inside the first row
    ("reboot\x00\x00\x07system boot\x00", "binary data"),
])
def test_bad_input_is_a_problem_not_a_crash(text, why):
    result = wtmp.parse(text, "last.txt")
    assert result.records == [] and why in result.problems[0].message
    assert not wtmp.looks_like(text)


def test_truncated_listing_keeps_its_whole_rows():
    cut = LAST_X[:LAST_X.index("Wed Mar  4") + 6]  # the copy stopped inside the crash row
    rows = _rows(cut)
    assert [r.kind for r in rows] == ["session", "runlevel", "boot"]


def test_a_job_log_is_not_a_last_listing():
    log = ("[2026-03-04 21:05:11] rank 0 system boot time 12s\n"
           "reboot requested by the operator at step 1200\n")
    assert not wtmp.looks_like(log)
