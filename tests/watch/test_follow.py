"""tail -F semantics of :class:`gpulib.watch.follow.Follower` on real files: new lines, partial
lines, rotation by rename (logrotate's default), copytruncate, a file that appears late or goes
missing, junk without newlines."""

from __future__ import annotations

import json
import os

from gpulib.watch import follow
from gpulib.watch.follow import Follower


def _events(f: Follower) -> list[str]:
    out = [n.event for n in f.notes]
    f.notes.clear()
    return out


def test_existing_content_is_skipped_unless_from_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("old 1\nold 2\n")
    assert Follower(log).poll() == []
    assert Follower(log, from_start=True).poll() == [b"old 1", b"old 2"]


def test_new_lines_arrive_and_a_partial_line_waits_for_its_newline(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    f = Follower(log)
    assert f.poll() == [] and f.last_line_time is None
    with log.open("a") as h:
        h.write("[rank0]: step 1\r\n[rank1]: step 1\n[rank0]: ste")
    assert f.poll() == [b"[rank0]: step 1", b"[rank1]: step 1"]
    assert f.last_line_time is not None and f.lines_total == 2
    with log.open("a") as h:
        h.write("p 2\n")
    assert f.poll() == [b"[rank0]: step 2"]


def test_a_file_that_appears_later_is_read_from_its_start(tmp_path):
    log = tmp_path / "later.log"
    f = Follower(log)
    assert f.poll() == []
    log.write_text("first\nsecond\n")
    assert f.poll() == [b"first", b"second"]
    assert _events(f) == ["opened"]


def test_rename_rotation_keeps_the_old_files_last_lines_then_follows_the_new_file(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    f = Follower(log)
    f.poll()
    writer = log.open("a")
    writer.write("a1\n")
    writer.flush()
    assert f.poll() == [b"a1"]
    os.rename(log, tmp_path / "train.log.1")
    writer.write("a2 written after the rename\n")  # the job still holds the old file open
    writer.flush()
    log.write_text("b1\n")
    assert f.poll() == [b"a2 written after the rename", b"b1"]
    assert _events(f) == ["opened", "rotated", "opened"]
    with log.open("a") as h:
        h.write("b2\n")
    assert f.poll() == [b"b2"]
    writer.close()


def test_copytruncate_starts_again_at_zero(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    f = Follower(log)
    f.poll()
    log.write_text("x" * 50 + "\n" + "y" * 50 + "\n")
    assert len(f.poll()) == 2
    with log.open("r+") as h:  # what logrotate's copytruncate does after copying
        h.truncate(0)
    with log.open("a") as h:
        h.write("after truncate\n")
    assert f.poll() == [b"after truncate"]
    assert "truncated" in _events(f)


def test_a_removed_file_is_waited_for(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    f = Follower(log)
    f.poll()
    with log.open("a") as h:
        h.write("last line without newline")
    log.unlink()
    assert f.poll() == [b"last line without newline"]
    assert _events(f)[-1] == "missing"
    assert f.poll() == []
    log.write_text("back\n")
    assert f.poll() == [b"back"]


def test_binary_junk_without_newlines_is_cut_not_accumulated(tmp_path, monkeypatch):
    monkeypatch.setattr(follow, "MAX_LINE_BYTES", 1000)
    log = tmp_path / "junk.log"
    log.write_text("")
    f = Follower(log)
    f.poll()
    log.write_bytes(b"\x00\xff" * 2000)
    lines = f.poll()
    assert len(lines) == 1 and len(lines[0]) == 1000
    assert _events(f)[-1] == "line_cut"


def test_an_unreadable_file_is_reported_not_raised(tmp_path, run_without_root_read):
    log = tmp_path / "secret.log"
    log.write_text("x\n")
    log.chmod(0)
    code = ("import json; from gpulib.watch.follow import Follower\n"
            f"f = Follower({str(log)!r})\n"
            "print(json.dumps([f.poll(), f.poll(), [[n.event, n.detail] for n in f.notes]]))")
    try:
        done = run_without_root_read(code)
    finally:
        log.chmod(0o644)
    assert done.returncode == 0, done.stderr
    first, second, notes = json.loads(done.stdout)
    assert first == [] and second == []
    [(event, detail)] = notes  # reported once, not at every poll
    assert event == "unreadable" and "Permission denied" in detail


def test_a_truncation_rewritten_past_the_old_size_before_the_next_poll_is_detected(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    f = Follower(log)
    f.poll()
    log.write_text("[rank5]: short line\n")
    assert f.poll() == [b"[rank5]: short line"]
    with log.open("r+") as h:
        h.truncate(0)
    with log.open("a") as h:
        h.write("[rank6]: a longer line written right after the truncation, past the old size\n")
    assert f.poll() == [b"[rank6]: a longer line written right after the truncation, past the old size"]
    assert "truncated" in _events(f)
    with log.open("a") as h:
        h.write("next\n")
    assert f.poll() == [b"next"] and "truncated" not in _events(f)


def test_a_fifo_is_refused_instead_of_blocking_the_watch(tmp_path):
    fifo = tmp_path / "console.fifo"
    os.mkfifo(fifo)
    f = Follower(fifo)
    assert f.poll() == [] and f.poll() == []
    (note,) = f.notes
    assert note.event == "unreadable" and "not a regular file" in note.detail
