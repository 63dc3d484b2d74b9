"""``last -x`` read by the diagnosis: an unclean stop in the job's window is a loss of power.

Each fixture is a folder as an engineer hands it over: the job's console log and a pasted shell
session with ``last -x`` (util-linux layout). Hosts, users, kernels and times are ours.
"""

from __future__ import annotations

import json

from gpulib.diagnose import diagnose
from gpulib.diagnose.rules import wtmp as wtmp_rules
from gpulib.evidence.bundle import BundleWriter
from gpulib.parsers import wtmp
from gpulib.parsers.wtmp import WtmpRecord

# the job ran on fx-n14 from 22:00 to 22:40 on Wed 2026-03-04, then its log stops
JOB = "".join(f"2026-03-04 22:{m:02d}:00,120 trainer.py:212 INFO step {1000 + m} | loss 1.9 | 1.1 s/step\n"
              for m in range(0, 41, 10))

# the node came back at 23:05 after a stop that wrote no shutdown record
CRASHED = """\
[ops@fx-n14 ~]$ last -x | head -n 7
ops      pts/3        10.30.1.4        Wed Mar  4 23:19   still logged in
runlevel (to lvl 3)   5.14.0-503.11.1. Wed Mar  4 23:06   still running
reboot   system boot  5.14.0-503.11.1. Wed Mar  4 23:05   still running
trainer  pts/0        10.30.1.9        Wed Mar  4 21:58 - crash  (01:07)
runlevel (to lvl 3)   5.14.0-503.11.1. Tue Feb 17 08:12 - 23:05 (15+14:53)
reboot   system boot  5.14.0-503.11.1. Tue Feb 17 08:11 - 23:05 (15+14:54)
"""

# the same node after a planned reboot: shutdown and run level 6 before the boot
CLEAN = """\
[ops@fx-n14 ~]$ last -x | head -n 7
ops      pts/3        10.30.1.4        Wed Mar  4 23:19   still logged in
runlevel (to lvl 3)   5.14.0-503.11.1. Wed Mar  4 23:06   still running
reboot   system boot  5.14.0-503.11.1. Wed Mar  4 23:05   still running
shutdown system down  5.14.0-503.11.1. Wed Mar  4 23:03 - 23:05  (00:02)
runlevel (to lvl 6)   5.14.0-503.11.1. Wed Mar  4 23:02 - 23:03  (00:01)
trainer  pts/0        10.30.1.9        Wed Mar  4 21:58 - down   (01:05)
reboot   system boot  5.14.0-503.11.1. Tue Feb 17 08:11 - 23:03 (15+14:52)
"""


def _case(tmp_path, session: str, job: str | None = JOB):
    if job is not None:
        (tmp_path / "train.log").write_text(job)
    (tmp_path / "fx-n14-session.txt").write_text(session)
    return diagnose([tmp_path])


def _rows(text: str) -> list[WtmpRecord]:
    return [r for r in wtmp.parse(text, "s").records if isinstance(r, WtmpRecord)]


def test_crash_in_the_job_window_is_a_power_fault(tmp_path):
    d = _case(tmp_path, CRASHED)
    root = d.root_cause
    assert (d.interruption, root.category, root.host) == ("hard", "power_fault", "fx-n14")
    assert root.time == "2026-03-04T23:05:00Z" and root.observed  # back up then; it went down before
    assert "between 2026-03-04T22:40:00Z (last sign of life) and 2026-03-04T23:05:00Z" in root.title
    assert root.quotes[0].text.startswith("trainer  pts/0") and root.quotes[0].line == 5


def test_clean_reboot_is_no_finding(tmp_path):
    d = _case(tmp_path, CLEAN)
    assert not any(f.id.startswith("unclean-stop") for f in d.findings)
    assert d.category != "power_fault"


def test_crash_weeks_before_the_job_is_history(tmp_path):
    earlier = JOB.replace("2026-03-04", "2026-03-25")  # the job ran three weeks after the crash
    d = _case(tmp_path, CRASHED, earlier)
    assert not any(f.id.startswith("unclean-stop") for f in d.findings)


def test_crash_after_the_job_ended_is_not_its_cause(tmp_path):
    later = CRASHED.replace("Wed Mar  4 21:58 - crash  (01:07)", "Wed Mar  4 22:51 - crash  (00:14)")
    d = _case(tmp_path, later)  # a login at 22:51, after the job's last line at 22:40: the node was up then
    assert not any(f.id.startswith("unclean-stop") for f in d.findings)


def test_without_a_job_log_the_latest_stop_counts(tmp_path):
    d = _case(tmp_path, CRASHED, job=None)
    assert d.root_cause is not None and d.root_cause.category == "power_fault"
    assert d.root_cause.time is None  # no year anywhere: wtmp's year-less times are not guessed
    older = CLEAN.replace("reboot   system boot  5.14.0-503.11.1. Tue Feb 17 08:11 - 23:03 (15+14:52)\n",
                          "reboot   system boot  5.14.0-503.11.1. Tue Feb 17 08:11 - 23:03 (15+14:52)\n"
                          "reboot   system boot  5.14.0-503.11.1. Mon Feb  2 09:40 - 23:03 (29+13:23)\n")
    assert not any(f.id.startswith("unclean-stop") for f in diagnose([_write(tmp_path / "b", older)]).findings)


def _write(folder, text):
    folder.mkdir()
    (folder / "last.txt").write_text(text)
    return folder


def test_boot_sequence_without_sessions():
    # -x listing: two boots with nothing between them but a run level 3 is an unclean stop
    rows = _rows("reboot   system boot  6.1.0-31-amd64   Fri Jan  9 06:40   still running\n"
                 "runlevel (to lvl 3)   6.1.0-31-amd64   Thu Jan  8 19:02 - 06:40  (11:38)\n"
                 "reboot   system boot  6.1.0-31-amd64   Thu Jan  8 19:01 - 06:40  (11:39)\n")
    [crash] = wtmp_rules.crashes(rows)
    assert crash.cut == [] and crash.boot.line == 1 and crash.alive.line == 2 and crash.latest


def test_boots_alone_cannot_tell():
    # `last reboot`: no shutdown rows are shown at all, so two boots in a row say nothing
    rows = _rows("reboot   system boot  6.1.0-31-amd64   Fri Jan  9 06:40   still running\n"
                 "reboot   system boot  6.1.0-31-amd64   Thu Jan  8 19:01 - 06:40  (11:39)\n")
    assert wtmp_rules.crashes(rows) == []


def test_user_filtered_listing_keeps_lasts_own_crash():
    rows = _rows("trainer  pts/0        10.30.1.9        Wed Mar  4 21:58 - crash  (01:07)\n")
    [crash] = wtmp_rules.crashes(rows)
    assert crash.boot is None and crash.cut == rows


def test_bundle_boot_history_in_the_nodes_zone(tmp_path):
    """``gpulib collect`` records ``last -x -F`` (full dates, the node's local time): the stop is put
    on UTC with the bundle's zone (Berlin, UTC+1 in March)."""
    writer = BundleWriter(tmp_path / "evidence" / "fx-n14", host="fx-n14")
    writer.write_text("system/last-x.txt", (
        "reboot   system boot  5.14.0-503.11.1. Thu Mar  5 00:05:31 2026   still running\n"
        "trainer  pts/0        10.30.1.9        Wed Mar  4 21:55:10 2026 - crash                    (02:10)\n"
        "reboot   system boot  5.14.0-503.11.1. Tue Feb 17 08:11:02 2026 - Thu Mar  5 00:05:31 2026 (15+15:54)\n"
        "\nwtmp begins Sun Feb  1 00:03:11 2026\n"))
    bundle = writer.finish()
    manifest = bundle / "manifest.json"
    manifest.write_text(json.dumps(json.loads(manifest.read_text()) | {"timezone": "Europe/Berlin"}))
    (tmp_path / "evidence" / "train.log").write_text(
        "".join(f"2026-03-04T21:{m:02d}:00Z trainer INFO step {1000 + m} | loss 1.9 | 1.1 s/step\n" for m in range(0, 41, 10)))
    root = diagnose([tmp_path / "evidence"]).root_cause
    assert (root.category, root.host, root.time) == ("power_fault", "fx-n14", "2026-03-04T23:05:31Z")
    assert "between 2026-03-04T21:40:00Z" in root.title  # the job's last line: later than the login (Berlin 21:55)
