"""``dmesg -H`` (``--human``, ``-e``): a minute header when the minute changes, then the seconds since
the line before. A line's time is its minute plus every delta printed since, quiet lines included.

Lines are in the layout util-linux prints; hosts, PCI ids, times and values are invented.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

from gpulib.diagnose import diagnose
from gpulib.parsers import kernel_log
from gpulib.parsers.kernel_log import looks_like, parse, parse_file
from gpulib.parsers.kernel_prefix import split_prefix

BURST = (
    "[Sep03 21:58] nvidia-modeset: WARNING: GPU:0: Lost display notification (0:0x00000000); continuing.\n"
    "[ +12.500000] usb 1-4: new full-speed USB device number 9 using xhci_hcd\n"
    "[  +2.250000] pcieport 0000:40:01.1: AER: Uncorrected (Fatal) error received: 0000:40:01.1\n"
    "[  +0.000004] pcieport 0000:40:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
    "(Requester ID)\n"
    "[  +0.000003] pcieport 0000:40:01.1:   device [1022:1483] error status/mask=00004000/04400000\n"
    "[  +0.000002] pcieport 0000:40:01.1:    [14] CmpltTO                (First)\n"
    "[  +0.000311] nvidia 0000:41:00.0: AER: can't recover (no error_detected callback)\n"
    "[ +44.000000] systemd-journald[812]: Under memory pressure, flushing caches.\n"
    "[Sep03 21:59] NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    "[  +0.000021] NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.\n"
)


def _write(tmp_path, text, name="dmesg-H.txt", year=2026):
    path = tmp_path / name
    path.write_text(text)
    written = datetime(year, 12, 1, tzinfo=timezone.utc).timestamp()
    os.utime(path, (written, written))
    return path


def test_prefixes_split_into_the_minute_and_the_delta():
    minute = split_prefix("[Feb17 13:42] pcieport 0000:00:02.0: AER: Multiple Corrected error received: 0000:00:02.0")
    delta = split_prefix("[  +0.000844] pcieport 0000:00:02.0:    [12] Timeout")
    wide = split_prefix("[+123.000001] NVRM: Xid (PCI:0000:04:00): 79, GPU has fallen off the bus.")
    assert (minute.clock, minute.month, minute.day, minute.hms) == ("human", 2, 17, (13, 42, 0))
    assert minute.message.startswith("pcieport 0000:00:02.0: AER")
    assert (delta.clock, delta.delta_s, delta.message) == ("delta", 0.000844, "pcieport 0000:00:02.0:    [12] Timeout")
    assert (wide.clock, wide.delta_s) == ("delta", 123.000001)
    assert split_prefix("[  +x.5] not a stamp").clock == "none"


def test_each_line_is_its_minute_plus_every_delta_since_quiet_lines_included(tmp_path):
    events = parse_file(_write(tmp_path, BURST)).records
    times = {(e.kind, e.line): e.time_utc for e in events}
    # 21:58:00 + 12.5 (a USB line no pattern reads) + 2.25 = 21:58:14.75, printed to the second
    assert times[("aer", 3)] == "2026-09-03T21:58:14Z"
    assert times[("aer", 7)] == "2026-09-03T21:58:14Z"
    assert times[("xid", 9)] == "2026-09-03T21:59:00Z"  # a new minute header restarts the sum
    assert times[("fell_off_bus", 10)] == "2026-09-03T21:59:00Z"
    assert [e.time_utc for e in events] == sorted(e.time_utc for e in events)
    note = events[0].details["time_assumption"]
    assert "minute only" in note and "year 2026" in note and "assumed UTC" in note


def test_deltas_add_up_past_a_second(tmp_path):
    text = "".join(["[Jan09 04:10] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, Graphics Exception\n"]
                   + ["[  +0.400000] eth0: some driver chatter\n"] * 5
                   + ["[  +0.400000] NVRM: Xid (PCI:0000:3b:00): 43, pid=1, name=a, Ch 00000008\n"])
    first, second = parse_file(_write(tmp_path, text)).records
    assert (first.time_utc, second.time_utc) == ("2026-01-09T04:10:00Z", "2026-01-09T04:10:02Z")


def test_the_zone_given_applies_to_the_minute(tmp_path):
    path = _write(tmp_path, BURST)
    xid = next(e for e in parse_file(path, tz="Europe/Berlin").records if e.kind == "xid")
    assert xid.time_utc == "2026-09-03T19:59:00Z" and "time_assumption" in xid.details  # the year is still assumed


def test_a_delta_before_any_minute_header_has_no_time_and_says_why():
    text = "[  +0.000100] NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    (xid,) = parse(text, year=2026).records
    assert xid.time_utc is None and "no [MonDD HH:MM]" in xid.details["time_assumption"]


def test_quoted_paste_keeps_the_sum(tmp_path):
    quoted = "".join("> " + line + "\n" for line in BURST.splitlines())
    events = parse_file(_write(tmp_path, quoted, "issue-comment.md")).records
    assert next(e for e in events if e.kind == "aer").time_utc == "2026-09-03T21:58:14Z"


def test_chunk_edges_and_quiet_chunks_keep_the_sum(tmp_path, monkeypatch):
    quiet = "[  +0.050000] random: crng reseeded on system resumption\n" * 300  # 15 s, no anchor
    text = BURST.replace("[ +44.000000] systemd", quiet + "[ +29.000000] systemd")
    text = text.replace("[Sep03 21:59] NVRM", "[  +0.000001] NVRM")  # no new header: the sum carries on
    path = _write(tmp_path, text)
    whole = [(e.line, e.kind, e.time_utc) for e in parse_file(path).records]
    monkeypatch.setattr(kernel_log, "_CHUNK_BYTES", 4096)
    assert [(e.line, e.kind, e.time_utc) for e in parse_file(path).records] == whole
    assert whole[-1][2] == "2026-09-03T21:58:58Z"  # 14.75 + 15 (the quiet lines) + 29 s


def test_looks_like_a_kernel_log():
    assert looks_like(BURST)
    assert not looks_like("epoch 1 [  +0.5] loss 0.3\nepoch 2 loss 0.2\n")


def _as_dmesg_T(text: str) -> str:
    """The same lines as ``dmesg -T`` prints them (absolute seconds), from the sums by hand."""
    out, minute, offset_s = [], None, 0.0
    for line in text.splitlines():
        stamp, message = line[1:].split("] ", 1)
        if stamp.lstrip().startswith("+"):
            offset_s += float(stamp.strip().lstrip("+"))
        else:
            minute, offset_s = datetime.strptime(f"2026 {stamp}", "%Y %b%d %H:%M"), 0.0
        out.append(f"[{(minute + timedelta(seconds=offset_s)).strftime('%a %b %d %H:%M:%S %Y')}] {message}")
    return "\n".join(out) + "\n"


def test_diagnosis_groups_and_orders_the_burst_as_for_dmesg_T(tmp_path):
    human, ctime = tmp_path / "h" / "node-a", tmp_path / "t" / "node-a"
    human.mkdir(parents=True)
    ctime.mkdir(parents=True)
    _write(human, BURST)
    _write(ctime, _as_dmesg_T(BURST), "dmesg-T.txt")
    got = [diagnose([folder]).to_dict() for folder in (human, ctime)]
    views = [([(f["category"], f["time"], f["gpu_pci"], f["caused_by"] is None) for f in out["findings"]],
              {k: out["root_cause"][k] for k in ("category", "gpu_pci", "time")}) for out in got]
    assert views[0] == views[1]
    assert views[0][1] == {"category": "gpu_fell_off_bus", "gpu_pci": "0000:41:00.0", "time": "2026-09-03T21:59:00Z"}


def test_pdsh_interleaved_nodes_keep_their_own_sums(tmp_path):
    text = ("gx-a: [Jan09 04:10] eth0: some driver chatter\n"
            "gx-b: [Jan09 04:12] eth0: some driver chatter\n"
            "gx-a: [  +5.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
            "gx-b: [  +1.000000] NVRM: Xid (PCI:0000:5e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    a, b = parse_file(_write(tmp_path, text, "pdsh-dmesg-H.txt")).records
    assert (a.host, a.time_utc) == ("gx-a", "2026-01-09T04:10:05Z")
    assert (b.host, b.time_utc) == ("gx-b", "2026-01-09T04:12:01Z")
