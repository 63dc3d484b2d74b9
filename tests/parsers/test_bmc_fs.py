"""SEL (ipmitool elist and FreeIPMI ipmi-sel), BMC clock, chassis status, ipmitool sensor, df -h,
stat -f and ip -o link. Fixtures are written for these tests in the layouts the tools print
(our own hosts, ids and times); the FreeIPMI SEL is the real public-thread capture, read in place."""

from __future__ import annotations

import subprocess

import pytest

from gpulib.parsers import df, ip_link, ipmi_chassis, ipmi_sel, ipmi_sel_time, ipmi_sensor, statfs
from gpulib.parsers.detect import detect_kind

# `ipmitool sel elist last 8` of a node whose second supply lost its feed at 02:11:58 (BMC clock).
SEL_ELIST = """   9 | 03/14/2025 | 22:40:03 | Fan FAN3 | Lower Critical going low  | Asserted
   a | 03/14/2025 | 22:40:09 | Fan FAN3 | Lower Critical going low  | Deasserted
  1a | 03/15/2025 | 02:11:58 | Power Supply PS2 Status | Power Supply AC lost | Asserted
  1b | 03/15/2025 | 02:11:58 | Power Unit PSU Redundancy | Redundancy Lost | Asserted
  1c | 03/15/2025 | 02:12:40 | Power Supply PS2 Status | Power Supply AC lost | Deasserted
  1d | 03/15/2025 | 02:12:41 | Power Unit PSU Redundancy | Fully Redundant | Asserted
  1e | Pre-Init  |0000000011| System Event #0x83 | Timestamp Clock Sync | Asserted
  1f | 03/15/2025 | 02:15:02 | Processor CPU1 Status | Thermal Trip | Asserted
"""
CHASSIS = """System Power         : on
Power Overload       : false
Power Interlock      : inactive
Main Power Fault     : false
Power Control Fault  : false
Power Restore Policy : always-on
Last Power Event     : ac-failed
Chassis Intrusion    : inactive
Front-Panel Lockout  : inactive
Drive Fault          : false
Cooling/Fan Fault    : false
"""
SENSOR = """Inlet Temp       | 41.000     | degrees C  | nc    | na        | na        | na        | 40.000    | 45.000    | na
FAN3             | 840.000    | RPM        | cr    | na        | 1000.000  | 1500.000  | na        | na        | na
PSU2 PIN         | 0.000      | Watts      | ok    | na        | na        | na        | na        | na        | na
PS2 Status       | 0x0        | discrete   | 0x0b00| na        | na        | na        | na        | na        | na
"""
DF_H = """Filesystem                         Size  Used Avail Use% Mounted on
shm                                 64M   64M     0 100% /dev/shm
fsrv-04.example.internal:/export/datasets
                                    30T   21T  9.0T  70% /mnt/datasets
/dev/nvme1n1                       3.5T  3.5T     0 100% /mnt/ckpt dir
"""


def test_sel_elist_power_events_and_directions():
    result = ipmi_sel.parse(SEL_ELIST, "sel-elist.txt")
    assert result.problems == [] and ipmi_sel.looks_like(SEL_ELIST)
    by_id = {e.record_id: e for e in result.records}
    assert by_id["1a"].time_bmc == "2025-03-15T02:11:58" and by_id["1a"].direction == "Asserted"
    assert [e.record_id for e in result.records if e.is_power_loss] == ["1a", "1b"]
    assert by_id["1c"].is_power_event and not by_id["1c"].is_power_loss, "the deassertion is the recovery"
    assert not by_id["9"].is_power_event and not by_id["1f"].is_power_event
    assert by_id["1e"].time_bmc is None and by_id["1e"].time_text.startswith("Pre-Init")


def test_sel_aligned_to_utc_with_the_bmc_clock():
    events = ipmi_sel.parse(SEL_ELIST).records
    clock = ipmi_sel_time.parse("03/15/2025 05:30:10\n", "sel-time.txt").records[0]
    # the capture ran at 04:30:00Z: this BMC keeps local time one hour ahead, plus 10 s drift
    offset = ipmi_sel.align_to_utc(events, clock.time_bmc, "2025-03-15T04:30:00.123456+00:00")
    assert round(offset.total_seconds()) == 3610
    assert next(e for e in events if e.record_id == "1a").time_utc == "2025-03-15T01:11:48Z"


def test_freeipmi_sel_of_the_public_psu_thread(incidents):
    path = incidents.parent / "public-threads" / "hw-16-ipmi-sel-psu-failure" / "input" / "ipmi-sel.txt"
    if not path.exists():
        pytest.skip(f"{path} not found")
    text = path.read_text()
    assert detect_kind(path.name, text) == "ipmitool_sel"
    result = ipmi_sel.parse(text, str(path))
    assert result.problems == [] and len(result.records) == 3
    psu = [e for e in result.records if e.is_power_loss]
    assert [(e.record_id, e.sensor_type, e.time_bmc) for e in psu] == [("3", "Power Supply", "2024-12-09T21:12:29")]
    assert not result.records[0].is_power_event  # chassis intrusion is not a power event


def test_sel_junk_and_empty_are_problems_not_crashes():
    assert ipmi_sel.parse("").problems[0].message.startswith("empty SEL listing")
    junk = ipmi_sel.parse("Could not open device at /dev/ipmi0\n", "x.txt")
    assert junk.records == [] and "not a SEL entry" in junk.problems[0].message and junk.problems[0].line == 1
    assert not ipmi_sel.looks_like("a | b | c\n") and ipmi_sel_time.parse("13/45/2025 99:00:00").problems


def test_chassis_status_last_power_event():
    status = ipmi_chassis.parse(CHASSIS, "chassis.txt").records[0]
    assert status.system_power == "on" and status.last_power_events == ["ac-failed"] and status.power_lost
    healthy = ipmi_chassis.parse(CHASSIS.replace("ac-failed", "").replace("Drive Fault          : false",
                                                                          "Drive Fault          : true"))
    assert healthy.records[0].faults == ["Drive Fault"] and not healthy.records[0].power_lost
    assert ipmi_chassis.looks_like(CHASSIS) and ipmi_chassis.parse("hello\n").problems


def test_ipmitool_sensor_thresholds():
    result = ipmi_sensor.parse(SENSOR, "sensor.txt")
    assert result.problems == [] and ipmi_sensor.looks_like(SENSOR)
    by = {s.name: s for s in result.records}
    assert (by["FAN3"].value, by["FAN3"].lower_critical, by["FAN3"].severity, by["FAN3"].kind) == (840, 1000, "critical", "fan")
    assert by["Inlet Temp"].upper_critical == 45 and by["Inlet Temp"].severity == "warning"
    assert by["PS2 Status"].value is None and by["PS2 Status"].severity == "unknown"
    assert detect_kind("sensor.txt", SENSOR) == "ipmitool_sensor"


def test_df_h_wrapped_device_mount_with_space_and_full_shm():
    result = df.parse(DF_H, "df-h.txt")
    assert result.problems == [] and df.looks_like(DF_H)
    by = {r.mount: r for r in result.records}
    assert by["/dev/shm"].size_bytes == 64 << 20 and by["/dev/shm"].full and by["/dev/shm"].use_pct == 100
    assert by["/mnt/datasets"].filesystem.endswith(":/export/datasets") and by["/mnt/datasets"].avail_bytes == 9 * (1 << 40)
    assert by["/mnt/ckpt dir"].full and by["/mnt/ckpt dir"].approximate
    assert df.parse("Size Used\n1 2\n").problems[0].message.startswith("no df header")


def test_df_and_stat_f_of_this_machine_agree():
    df_out = subprocess.run(["df", "-B1", "/dev/shm"], capture_output=True, text=True).stdout
    stat_out = subprocess.run(["stat", "-f", "/dev/shm"], capture_output=True, text=True).stdout
    d, s = df.parse(df_out, "df").records[0], statfs.parse(stat_out, "stat").records[0]
    assert not d.approximate and d.size_bytes == s.size_bytes and s.path == "/dev/shm" and s.inodes_total
    assert detect_kind("stat-f.txt", stat_out) == "statfs" and detect_kind("df.txt", df_out) == "df"


def test_stat_f_full_shm_and_missing_path():
    text = ('  File: "/dev/shm"\n    ID: 0        Namelen: 255     Type: tmpfs\n'
            "Block size: 4096       Fundamental block size: 4096\n"
            "Blocks: Total: 16384      Free: 0          Available: 0\nInodes: Total: 4116450    Free: 4116449\n")
    rec = statfs.parse(text, "stat-f.txt").records[0]
    assert rec.size_bytes == 64 << 20 and rec.full and rec.use_pct == 100 and rec.fs_type == "tmpfs"
    cut = statfs.parse(text.split("Blocks:")[0], "cut.txt")
    assert cut.records == [] and "incomplete" in cut.problems[0].message


def test_ip_link_of_this_machine_and_a_fixture():
    text = ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000"
            "\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n"
            "3: ens9f0np0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 9000 qdisc mq state DOWN mode DEFAULT\\    link/ether\n"
            "5: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq state UP mode DEFAULT\\    link/infiniband 00\n"
            "9: eth0@if10: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\\    link/ether 02\n")
    recs = {r.name: r for r in ip_link.parse(text, "ip-link.txt").records}
    assert recs["lo"].up and recs["lo"].is_loopback and not recs["ens9f0np0"].up
    assert recs["ib0"].link_type == "infiniband" and recs["eth0"].up
    live = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    parsed = ip_link.parse(live, "live")
    assert parsed.problems == [] and any(r.is_loopback for r in parsed.records)
