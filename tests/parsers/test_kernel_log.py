"""Kernel-log parser: every recorded format, the incident signals a human reads, and bad input."""

from __future__ import annotations

from collections import Counter

import pytest

from gpulib.parsers import kernel_log
from gpulib.parsers.kernel_log import INFO_KINDS, looks_like, parse, parse_file


def kernel_files(recorded, incidents):
    files = sorted((recorded / "kernel").glob("*/*")) + sorted((recorded / "azurehpc").glob("*syslog*"))
    for pattern in ("*/input/dmesg*.txt", "*/input/*/dmesg*.txt", "*/input/*/journalctl*.txt"):
        files += sorted(incidents.glob(pattern))
    return files


def by_kind(result, kind):
    return [e for e in result.records if e.kind == kind]


def test_every_recorded_and_incident_kernel_log_parses_cleanly(recorded, incidents):
    files = kernel_files(recorded, incidents)
    assert len(files) == 29
    for path in files:
        streamed = parse_file(path, year=2025)  # same year for both: parse_file would take it from the mtime
        whole = parse(path.read_text(encoding="utf-8", errors="replace"), str(path), year=2025)
        assert streamed.kind == "kernel_log"
        assert streamed.problems == [] and whole.problems == [], (path, streamed.problems, whole.problems)
        assert [e.to_dict() for e in streamed.records] == [e.to_dict() for e in whole.records], path
        for event in streamed.records:
            assert event.line >= 1 and event.kind and event.text


def test_case01_aer_then_xid79_then_hung_task(incidents):
    result = parse_file(incidents / "case-01-xid79-fell-off-bus/input/hgx-h100-018/dmesg_T.txt")
    (xid,) = by_kind(result, "xid")
    assert (xid.xid, xid.pci_bus_id, xid.time_utc, xid.line) == (79, "0000:ab:00.0", "2025-03-11T03:12:07Z", 44)
    assert "assumed UTC" in xid.details["time_assumption"]
    aer = by_kind(result, "aer")
    assert aer[0].time_utc == "2025-03-11T03:12:06Z" and aer[0].line < xid.line
    assert aer[0].pci_bus_id == "0000:a8:02.0" and aer[0].details["severity"] == "fatal"
    assert aer[0].details["surprise_down"] and aer[0].details["errors"] == ["SDES"]
    assert any(a.pci_bus_id == "0000:ab:00.0" and a.details.get("recovery") == "failed" for a in aer)
    (identity,) = by_kind(result, "gpu_identity")
    assert identity.details["uuid"] == "GPU-52f1c09e-3b7a-d4c8-91ee-0a7bd3f26c15"
    assert identity.details["serial"] == "1654323019472"
    fell = by_kind(result, "fell_off_bus")
    assert fell[0].pci_bus_id == "0000:ab:00.0" and fell[0].details["xid_logged"]
    hung = by_kind(result, "hung_task")
    assert [(h.pid, h.process, h.details["blocked_s"]) for h in hung] == [
        (48376, "pt_main_thread", 120), (48376, "pt_main_thread", 241)]
    assert hung[0].details["state"] == "D" and hung[0].details["in_nvidia_driver"]
    assert hung[0].time_utc == "2025-03-11T03:14:09Z"


def test_case01_healthy_peer_node_has_only_benign_lines(incidents):
    result = parse_file(incidents / "case-01-xid79-fell-off-bus/input/hgx-h100-017/dmesg_T.txt")
    assert {e.kind for e in result.records} == {"benign"}


def test_case06_xid48_then_63_then_94(incidents):
    result = parse_file(incidents / "case-06-ecc-dbe-truncated-ckpt/input/dmesg_iso.txt")
    xids = by_kind(result, "xid")
    assert [x.xid for x in xids[:3]] == [48, 63, 94]
    assert {x.pci_bus_id for x in xids} == {"0000:bb:00.0"}
    assert xids[0].time_utc == "2025-08-14T16:20:31Z" and "time_assumption" not in xids[0].details
    assert "double bit error" in xids[0].details["message"]
    assert {x.pid for x in xids[3:]} == {2871445} and xids[3].process == "pt_main_thread"
    assert xids[0].pid is None and xids[0].process is None  # pid='<unknown>', name=<unknown>


def test_case04_host_oom_kill(incidents):
    result = parse_file(incidents / "case-04-host-oom-killer/input/trn-h800-01/journalctl-k_2025-06-11.txt")
    (kill,) = by_kind(result, "oom_kill")
    assert (kill.pid, kill.process, kill.time_utc, kill.host) == (931577, "python", "2025-06-11T21:04:45Z",
                                                                   "trn-h800-01")
    assert kill.details["anon_rss_kib"] == 190233412
    assert kill.details["constraint"] == "CONSTRAINT_NONE" and kill.details["global_oom"] is True
    assert "time_assumption" not in kill.details  # the journal header says its times are UTC
    (invoked,) = by_kind(result, "oom_invoked")
    assert invoked.process == "python" and invoked.pid == 931904
    assert len(by_kind(result, "memory_pressure")) == 2  # "TCP: out of memory" precursors


def test_case05_cable_unplugged_and_lost_carrier(incidents):
    result = parse_file(incidents / "case-05-ib-down-socket-fallback/input/v100-node-08/journalctl_2200-2320.txt")
    down = by_kind(result, "ib_link_down")
    assert [(d.time_utc, d.host) for d in down] == [("2025-07-02T22:41:07Z", "v100-node-08"),
                                                    ("2025-07-02T22:41:08Z", "v100-node-08")]
    assert down[0].details["reason"] == "Cable unplugged" and down[0].pci_bus_id == "0000:5e:00.0"
    assert down[1].details["iface"] == "ib0"


def test_case07_healthy_run_has_no_trouble(incidents):
    for node in ("node-a100-pod3-n11", "node-a100-pod3-n12"):
        result = parse_file(incidents / f"case-07-healthy-run/input/{node}/dmesg-T.txt")
        kinds = Counter(e.kind for e in result.records)
        assert set(kinds) <= INFO_KINDS, kinds
        assert kinds["benign"] >= 10 and kinds["driver_loaded"] == 1


def test_gpud_xid119_gsp_timeout(recorded):
    result = parse_file(recorded / "kernel/gpud/dmesg-with-xid-119.log")
    xids = by_kind(result, "xid")
    assert [x.xid for x in xids] == [119] * 5
    assert (xids[0].pid, xids[0].process, xids[0].pci_bus_id) == (2024380, "nvidia-smi", "0000:9b:00.0")
    assert xids[0].details["xid_name"] == "GSP_RPC_TIMEOUT"
    assert by_kind(result, "gpu_reset_required")[0].pci_bus_id == "0000:9b:00.0"


def test_gb200_xid149_then_154_recovery_action(recorded):
    result = parse_file(recorded / "kernel/extracted/gpud_gb200_xid149_xid154_sequence.txt",
                        boot_time="2025-06-01T00:00:00Z")
    first, second = result.records[:2]
    assert (first.xid, first.pci_bus_id) == (149, "0009:01:00.0")
    assert first.details["nvlink_unit"] == "NETIR_LINK_EVT" and first.details["severity"] == "fatal"
    assert first.details["link"] == 1
    assert second.xid == 154 and second.details["recovery_action"] == "Drain and Reset"
    assert second.details["recovery_action_code"] == 4 and second.details["recovery_action_from"] == "None"
    assert first.time_utc == "2025-06-02T23:32:47Z"  # boot + 171167.62 s
    last = result.records[-1]
    assert last.xid == 154 and last.details["recovery_action"] == "GPU Reset Required"


def test_raw_dmesg_without_boot_time_keeps_uptime(recorded):
    result = parse_file(recorded / "kernel/extracted/gpud_gb200_xid149_xid154_sequence.txt")
    assert result.records[0].time_utc is None
    assert result.records[0].details["uptime_s"] == pytest.approx(171167.620236)
    assert "boot_time" in result.records[0].details["time_assumption"]


def test_azure_six_link_flaps_on_ib6(recorded):
    result = parse_file(recorded / "azurehpc/1dev_6flap_syslog", year=2025)
    down = by_kind(result, "ib_link_down")
    assert len(down) == 6 and {d.details["iface"] for d in down} == {"ib6"}
    assert {d.host for d in down} == {"jplc7eb7-vm-0"}
    assert down[0].time_utc == "2025-08-17T06:18:01Z"
    assert len(by_kind(result, "ib_link_up")) == 6
    assert by_kind(parse_file(recorded / "azurehpc/0flap_syslog"), "ib_link_down") == []


def test_imbue_sxid_and_pcie_limited_by(recorded):
    result = parse_file(recorded / "kernel/extracted/imbue_dmesg_xid_sxid_pcie_doctests.txt")
    (sxid,) = by_kind(result, "sxid")
    assert sxid.pci_bus_id == "0000:85:00.0" and sxid.details["sxid"] == 12028
    assert sxid.details["severity"] == "non_fatal" and sxid.details["link"] == 61 and sxid.xid is None
    degraded = by_kind(result, "pcie_link_degraded")
    assert degraded[0].pci_bus_id == "0000:9c:00.0"
    assert (degraded[0].details["width"], degraded[0].details["capable_width"]) == (8, 16)
    assert degraded[0].details["limited_at"] == "0000:97:01.0"
    xids = {x.xid: x for x in by_kind(result, "xid")}
    assert xids[94].pid == 2503421 and xids[94].process == "python3"
    assert "All reserved rows" in xids[64].details["message"]


def test_fabricmanager_log_nvswitch_errors(recorded):
    (sxid,) = by_kind(parse_file(recorded / "kernel/gpud/fabricmanager.log"), "sxid")
    assert sxid.details["sxid"] == 12028 and sxid.pci_bus_id == "0000:86:00.0" and sxid.details["port"] == 61
    assert sxid.time_utc == "2025-02-27T15:10:02Z"


def test_kmsg_lines_with_boot_time(recorded):
    result = parse_file(recorded / "kernel/gpud/kmsg.2.peermem.log", boot_time="2025-01-01T00:00:00+00:00")
    assert len(result.records) == 7 and {e.kind for e in result.records} == {"benign"}
    assert result.records[0].time_utc == "2025-01-01T00:03:47Z"  # 227996636 us after boot
    assert result.records[0].details["uptime_s"] == pytest.approx(227.996636)


def test_nccl_segfault_and_decode_format(recorded):
    result = parse_file(recorded / "kernel/gpud/dmesg.decode.iso.log")
    seg = by_kind(result, "nccl_segfault")
    assert len(seg) == 2 and seg[0].pid == 2536443 and seg[0].process == "pt_main_thread"
    assert seg[0].details["library"] == "libnccl.so.2" and seg[0].time_utc == "2025-01-21T04:41:44Z"


def test_oom_variants_and_pstore_panic(recorded):
    result = parse_file(recorded / "kernel/gpud/dmesg.decode.iso.log.5795e2")
    assert [(k.pid, k.process) for k in by_kind(result, "oom_kill")] == [(123, "httpd"), (456, "python"),
                                                                         (123, "httpd")]
    assert [x.xid for x in by_kind(result, "xid")].count(43) == 1
    panic = by_kind(parse_file(recorded / "kernel/gpud/7530486857247__dmesg.txt"), "kernel_panic")
    assert panic and "Test panic" in panic[0].details["message"]
    assert by_kind(parse_file(recorded / "kernel/gpud/7530486857247__dmesg.txt"), "driver_loaded")[0] \
        .details["driver_version"] == "550.144.03"


def test_gcm_mixed_formats(recorded):
    result = parse_file(recorded / "kernel/extracted/gcm_dmesg_xid_linkflap_ioerror_fixtures.txt", year=2023)
    assert [e.kind for e in result.records[:2]] == ["eth_link_down", "ib_link_down"]
    assert result.records[0].time_utc == "2023-12-06T19:25:33Z"
    assert [x.pci_bus_id for x in by_kind(result, "xid")] == ["000d:00:00.0"] * 3
    assert {e.details["device"] for e in by_kind(result, "io_error")} == {"nvme2n1", "md127"}


# --- synthetic lines: formats documented in the reference but absent from the corpus --------------

def test_fallen_off_bus_without_xid_over_two_lines():
    text = ("[Mon Jun  2 10:00:01 2025] NVRM: The NVIDIA GPU 0000:0e:00.0 (PCI ID: 10de:2330) installed in this\n"
            "[Mon Jun  2 10:00:01 2025] NVRM: system has fallen off the bus and is not responding to commands.\n")
    (event,) = parse(text).records
    assert event.kind == "fell_off_bus" and event.pci_bus_id == "0000:0e:00.0"
    assert event.details["xid_logged"] is False and event.line == 2


def test_xid45_names_its_root_xid():
    text = ("[  100.000001] NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 00 (0x016415c6)\n"
            "[  100.283000] NVRM: Xid (PCI:0018:01:00): 45, pid=4242, name=python, Ch 00000008, "
            "caused by previous Xid 149\n")
    cascade = parse(text).records[1]
    assert cascade.xid == 45 and cascade.details["caused_by_xid"] == 149 and cascade.pid == 4242


def test_zone_year_and_rollover():
    dmesg_t = ("[Tue Mar 11 03:12:07 2025] NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', name=<unknown>, "
               "GPU has fallen off the bus.\n")
    (event,) = [e for e in parse(dmesg_t, tz="Europe/Berlin").records if e.kind == "xid"]
    assert event.time_utc == "2025-03-11T02:12:07Z" and "time_assumption" not in event.details
    bad = parse(dmesg_t, tz="Mars/Olympus")
    assert "unknown time zone" in bad.problems[0].message and bad.records[0].time_utc == "2025-03-11T03:12:07Z"
    syslog = ("Dec 31 23:59:59 n1 kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=a, x\n"
              "Jan  1 00:00:05 n1 kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=a, y\n")
    times = [e.time_utc for e in parse(syslog, year=2024).records]
    assert times == ["2024-12-31T23:59:59Z", "2025-01-01T00:00:05Z"]
    assumed = parse(syslog).records[0]
    assert "no year" in assumed.details["time_assumption"]


def test_benign_virtual_interfaces_and_real_eth_flap():
    text = ("Jun 11 17:18:31 n1 systemd-networkd[1]: vethab12: Lost carrier\n"
            "Jun 11 17:18:32 n1 kernel: mlx5_core 0000:9d:00.1 enp157s0f1np1: Link down\n"
            "Jun 11 17:18:33 n1 kernel: mlx5_core 0000:5e:00.0: mlx5_ib_event: PORT_ERR\n")
    kinds = [e.kind for e in parse(text, year=2025).records]
    assert kinds == ["benign", "eth_link_down", "ib_link_down"]


@pytest.mark.parametrize("junk", ["", "   \n\n", "\x00\x01\x02binary\x00" * 50])
def test_empty_and_binary_input_are_problems(junk):
    result = parse(junk, "junk.bin")
    assert result.records == [] and result.problems and result.problems[0].source == "junk.bin"


def test_wrong_kind_of_file_is_a_problem_not_an_exception(recorded, incidents, tmp_path):
    xml = recorded / "nvidia-smi/xml/telegraf/tesla-t4.xml"
    result = parse_file(xml)
    assert result.records == [] and "no kernel log lines recognised" in result.problems[0].message
    assert not looks_like(xml.read_text(encoding="utf-8")[:8192])
    assert not looks_like((incidents / "case-01-xid79-fell-off-bus/input/slurm-88231.out").read_text()[:8192])
    binary = tmp_path / "dmesg.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    assert "binary" in parse_file(binary).problems[0].message
    assert "cannot read" in parse_file(tmp_path / "missing.txt").problems[0].message
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert "empty" in parse_file(empty).problems[0].message


def test_a_log_over_the_cap_keeps_its_first_chunk_and_says_so(tmp_path):
    path = tmp_path / "dmesg.txt"
    path.write_text("[ 10.5] NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
                    "[ 11.0] eth0: Link is Down\n")
    result = parse_file(path, cap_bytes=64)
    assert [(e.kind, e.line) for e in result.records] == [("xid", 1), ("eth_link_down", 2)]
    assert [p.message for p in result.problems] == ["larger than 64 bytes: only the first part was read"]


def test_line_chunks_end_on_newlines_and_grow_for_a_long_line(tmp_path):
    from gpulib.parsers.base import line_chunks

    path = tmp_path / "log"
    path.write_bytes(b"ab\ncdefghijklmn\nxy")
    with open(path, "rb", buffering=0) as handle:
        got = [(offset, bytes(buf[:limit])) for offset, buf, limit in line_chunks(handle, 8)]
    assert got == [(0, b"ab\n"), (3, b"cdefghijklmn\n"), (16, b"xy")]


def test_looks_like_every_kernel_format(recorded, incidents):
    for path in kernel_files(recorded, incidents):
        if "fabric" in path.name or path.name == "0flap_syslog":
            continue
        assert looks_like(path.read_text(encoding="utf-8", errors="replace")[:8192]), path


def test_ten_megabyte_line_and_invalid_utf8(tmp_path):
    path = tmp_path / "huge.log"
    path.write_bytes(b"[  1.000000] NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=a, " + b"x" * 10_000_000
                     + b"\n[  2.000000] \xff\xfe ib0: Lost carrier\n")
    result = parse_file(path)
    assert [e.kind for e in result.records] == ["xid", "ib_link_down"]
    assert len(result.records[0].text) <= 4096 and result.records[1].line == 2


def test_streaming_across_chunk_edges_gives_the_same_events(incidents, tmp_path, monkeypatch):
    path = incidents / "case-04-host-oom-killer/input/trn-h800-01/journalctl-k_2025-06-11.txt"
    whole = [e.to_dict() for e in parse_file(path).records]
    monkeypatch.setattr(kernel_log, "_CHUNK_BYTES", 4096)
    chunked = [e.to_dict() for e in parse_file(path).records]
    assert [(e["line"], e["kind"], e["pid"]) for e in chunked] == [(e["line"], e["kind"], e["pid"]) for e in whole]


def test_other_journal_and_syslog_layouts():
    text = ("Tue 2025-03-11 03:12:07 UTC gpu-node-3 kernel: NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', "
            "name=<unknown>, GPU has fallen off the bus.\n"
            "[171167.620236] gpu-node-3 kernel: NVRM: Xid (PCI:0000:ab:00): 45, pid=7, name=python, Ch 00000008\n"
            "Mar 11 03:12:09 gpu-node-3 kernel: [ 4242.123456] pcieport 0000:a8:02.0: AER: Uncorrected (Fatal) "
            "error received: 0000:a8:02.0\n")
    short_full, monotonic, kern_log = parse(text, year=2025, boot_time="2025-03-09T03:12:07Z").records
    assert (short_full.time_utc, short_full.host, short_full.xid) == ("2025-03-11T03:12:07Z", "gpu-node-3", 79)
    assert "time_assumption" not in short_full.details
    assert monotonic.host == "gpu-node-3" and monotonic.xid == 45
    assert kern_log.kind == "aer" and kern_log.pci_bus_id == "0000:a8:02.0"  # inner "[ 4242.1]" clock dropped
    assert kern_log.time_utc == "2025-03-11T03:12:09Z"


def test_journal_header_in_another_zone_is_said():
    text = ("-- Journal begins at Mon 2025-05-26 09:14:02 CEST, ends at Wed 2025-06-11 21:31:07 CEST. --\n"
            "Jun 11 21:04:45 n1 kernel: Out of memory: Killed process 77 (python) anon-rss:100kB\n")
    (kill,) = parse(text).records
    assert kill.time_utc == "2025-06-11T21:04:45Z" and "CEST" in kill.details["time_assumption"]
    assert "no year" not in kill.details["time_assumption"]  # the header gave the year
    (berlin,) = parse(text, tz="Europe/Berlin").records
    assert berlin.time_utc == "2025-06-11T19:04:45Z"


def test_application_logs_are_not_taken_for_kernel_logs():
    python_logging = "\n".join(f"2025-04-22 12:48:{i:02d},123 INFO trainer: step {i} loss 1.0" for i in range(50))
    assert not looks_like(python_logging)
    torchrun = "\n".join(f"[rank{i}]:[W422 12:48:30.123] Watchdog caught collective operation timeout" for i in range(8))
    assert not looks_like(torchrun)


def test_mutated_real_lines_never_raise(recorded, incidents):
    import random

    rng = random.Random(20250311)
    lines = [line for path in kernel_files(recorded, incidents)
             for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
             if any(anchor in line for anchor in ("Xid", "AER", "oom", "carrier", "blocked", "limited by",
                                                  "segfault", "SXid", "Port module"))]
    assert len(lines) > 100
    for _ in range(300):
        line = rng.choice(lines)
        cut = rng.randrange(len(line) + 1)
        mutated = rng.choice([line[:cut], line[cut:], line[:cut] + "\ufffd\x7f" + line[cut:],
                              line.replace(" ", "", rng.randrange(4)), line[:cut] + line[cut:].upper()])
        result = parse(mutated + "\n" + rng.choice(lines), "fuzz", boot_time=rng.choice([None, "junk", "0"]))
        assert all(isinstance(e.details, dict) for e in result.records)
        assert not any("could not read line" in p.message for p in result.problems), (mutated, result.problems)


def test_looks_like_claims_the_kernel_logs_of_the_corpus_and_nothing_else(recorded, incidents):
    from gpulib.parsers.base import read_text

    others = [p for p in sorted(recorded.rglob("*")) + sorted(incidents.rglob("*"))
              if p.is_file() and "kernel" not in p.relative_to(recorded.parent).parts]
    claimed = set()
    for path in others:
        text, _ = read_text(path, cap_bytes=1024 * 1024)
        result = parse(text, str(path))  # survives every foreign file too
        assert all(e.kind for e in result.records)
        if looks_like(text[:8192]):
            claimed.add(path.name)
    assert claimed == {"dmesg_T.txt", "journalctl-k_2025-06-11.txt", "journalctl_2200-2320.txt", "dmesg_iso.txt",
                       "dmesg-T.txt", "0flap_syslog", "1dev_6flap_syslog"}
    assert looks_like("NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")


def test_machine_check_and_edac_reports():
    text = ("[ 1234.500000] mce: [Hardware Error]: Machine check events logged\n"
            "[ 1234.600000] {1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1\n"
            "[ 1234.600001] {1}[Hardware Error]: event severity: fatal\n"
            "[ 1240.000000] EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0\n"
            "[ 1241.000000] MCE: In-kernel MCE decoding enabled.\n")
    events = parse(text).records
    assert [(e.kind, e.line, e.details["severity"]) for e in events] == [("mce", 1, "fatal"), ("mce", 4, "corrected")]
    assert events[1].details["memory_controller"] == 0


def test_aer_corrected_and_non_fatal_reports():
    text = ("[  10.1] pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0\n"
            "[  10.1] pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
            "[  10.1] pcieport 0000:00:01.0:   device [8086:2030] error status/mask=00000001/00002000\n"
            "[  10.1] pcieport 0000:00:01.0:    [ 0] RxErr                  (First)\n"
            "[  11.2] pcieport 0000:16:02.0: AER: Multiple Uncorrected (Non-Fatal) error received: 0000:17:00.0\n"
            "[  11.2] nvidia 0000:17:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, "
            "(Requester ID)\n"
            "[  11.2] nvidia 0000:17:00.0:    [14] CmpltTO                (First)\n")
    corrected, non_fatal, detail = parse(text).records
    assert corrected.details["severity"] == "corrected" and corrected.details["errors"] == ["RxErr"]
    assert corrected.details["source_device"] == "0000:01:00.0" and corrected.line == 1
    assert non_fatal.details["severity"] == "non_fatal" and non_fatal.details["source_device"] == "0000:17:00.0"
    assert detail.pci_bus_id == "0000:17:00.0" and detail.details["severity"] == "non_fatal"
    assert not any(e.details["surprise_down"] for e in (corrected, non_fatal, detail))


def test_nvrm_lines_without_clock_and_driver_mismatch():
    text = ("NVRM: API mismatch: the client has the version 535.104.05, but\n"
            "NVRM: this kernel module has the version 550.54.15.  Please\n"
            "NVRM: GPU 0000:9a:00.0: RmInitAdapter failed! (0x22:0x40:894)\n"
            "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 40 LTSSM Fault Up\n"
            "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Severity 1 Engine instance 40 Sub-engine instance 00\n")
    assert looks_like(text)
    mismatch, init_failed, sxid = parse(text).records
    assert mismatch.kind == "driver_mismatch" and mismatch.details["client_version"] == "535.104.05"
    assert mismatch.details["module_version"] == "550.54.15"
    assert init_failed.kind == "gpu_init_failed" and init_failed.pci_bus_id == "0000:9a:00.0"
    assert sxid.details == {"sxid": 20034, "severity": "fatal", "message": "Link 40 LTSSM Fault Up",
                            "nvswitch": 3, "link": 40}


def test_syslog_year_comes_from_the_file_modification_time(tmp_path):
    import os
    from datetime import datetime, timezone

    path = tmp_path / "kern.log"
    path.write_text("Dec 31 23:59:59 n1 kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=a, x\n"
                    "Jan  1 00:00:05 n1 kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=a, y\n")
    written = datetime(2024, 1, 2, tzinfo=timezone.utc).timestamp()
    os.utime(path, (written, written))
    first, second = parse_file(path).records
    assert (first.time_utc, second.time_utc) == ("2023-12-31T23:59:59Z", "2024-01-01T00:00:05Z")
    assert "year 2023 assumed from file modification time" in first.details["time_assumption"]


def test_windows_line_endings_read_the_same(incidents):
    text = (incidents / "case-01-xid79-fell-off-bus/input/hgx-h100-018/dmesg_T.txt").read_text()
    unix = [e.to_dict() for e in parse(text).records]
    dos = [e.to_dict() for e in parse(text.replace("\n", "\r\n")).records]
    for event in unix + dos:
        event.pop("text")
    assert dos == unix


def test_a_fanout_host_stands_before_a_kernel_clock_only():
    """``node07: [Tue Mar 11 ...]`` is pdsh's host prefix; ``pkg.module.SomeError: [702] ...`` is a
    Python exception line whose message starts with a bracketed number."""
    from gpulib.parsers.kernel_prefix import split_prefix

    pdsh = split_prefix("node07: [Tue Mar 11 03:12:07 2025] NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off")
    assert (pdsh.host, pdsh.clock) == ("node07", "local")
    assert pdsh.message == "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off"
    error = split_prefix("numba.cuda.cudadrv.driver.CudaAPIError: [702] Call to cuMemcpyDtoH results in LAUNCH_TIMEOUT")
    assert (error.host, error.clock) == (None, "none")
    assert error.message.startswith("numba.cuda.cudadrv.driver.CudaAPIError: [702]")
