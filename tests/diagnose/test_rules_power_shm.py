"""Issue 17's diagnosis rules: BMC SEL power events placed on the incident window, and a full
/dev/shm joined to the DataLoader errors it caused.

Fixtures are written in the layouts the tools print (``ipmitool sel elist``, ``sel time get``,
``df -h``, ``stat -f``, PyTorch's DataLoader messages), as evidence bundles where the rule needs
the capture time; hosts, times, ids and sizes are our own.
"""

from __future__ import annotations

import json

import pytest

from gpulib.diagnose import diagnose
from gpulib.diagnose.rules import sel, shm
from gpulib.evidence.bundle import BundleWriter
from gpulib.parsers import ipmi_sel
from tests.diagnose.test_rules import job_log, timeouts

# The job: ranks 0-3 on pw-a, 4-7 on pw-b; progress every minute 10:01..10:05 UTC on 2026-05-04,
# then the survivors' watchdog timeouts at 10:30 (a 10-minute collective timeout after a hang).
LAST_STEP = "2026-05-04T10:05:00Z"


def job(tmp_path, extra: str = "", stamps: bool = True) -> None:
    text = job_log("pw-a", 0, 8, 4100) + job_log("pw-b", 4, 8, 4200) + extra
    if stamps:
        text += timeouts(range(4))
    (tmp_path / "evidence").mkdir(exist_ok=True)
    (tmp_path / "evidence" / "job.log").write_text(text)


def bundle(tmp_path, host: str, files: dict[str, str], captured_at: str = "2026-05-04T11:00:00Z") -> None:
    writer = BundleWriter(tmp_path / "evidence" / host, host=host)
    for rel, text in files.items():
        writer.write_text(rel, text)
    writer.captured_at = captured_at
    writer.finish()
    manifest = tmp_path / "evidence" / host / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["timezone"] = "UTC"
    manifest.write_text(json.dumps(doc))


# pw-b's BMC keeps local time two hours ahead of UTC and has drifted 42 s: its clock read 13:00:42
# when the bundle was captured at 11:00:00Z. So 12:06:12 on the BMC is 10:05:30Z: after the job's
# last step (10:05:00Z), before the survivors' timeouts.
BMC_NOW = "05/04/2026 13:00:42\n"
SEL_HISTORY = """   41 | 11/20/2025 | 08:14:03 | Power Supply PS1 Status | Power Supply AC lost | Asserted
   42 | 11/20/2025 | 08:14:04 | Power Unit PSU Redundancy | Redundancy Lost | Asserted
   43 | 11/20/2025 | 08:52:37 | Power Supply PS1 Status | Power Supply AC lost | Deasserted
   44 | 11/20/2025 | 08:52:38 | Power Unit PSU Redundancy | Fully Redundant | Asserted
   45 | 03/02/2026 | 17:20:51 | Fan FAN4 | Lower Critical going low  | Asserted
   46 | 03/02/2026 | 17:20:58 | Fan FAN4 | Lower Critical going low  | Deasserted
"""
SEL_INCIDENT = """   47 | 05/04/2026 | 12:06:12 | Power Supply PS2 Status | Power Supply AC lost | Asserted
   48 | 05/04/2026 | 12:06:12 | Power Unit PSU Redundancy | Redundancy Lost | Asserted
   49 | 05/04/2026 | 12:06:13 | Power Unit Pwr Unit Status | Power off/down | Asserted
   4a | Pre-Init  |0000000004| System Event #0x83 | Timestamp Clock Sync | Asserted
   4b | 05/04/2026 | 12:21:40 | Power Unit Pwr Unit Status | Power off/down | Deasserted
"""


def test_sel_power_loss_in_the_incident_window_is_a_power_fault_on_that_node(tmp_path):
    job(tmp_path)
    bundle(tmp_path, "pw-a", {"ipmi/sel-elist.txt": SEL_HISTORY.replace("PS1", "PS2"), "ipmi/sel-time.txt": BMC_NOW})
    bundle(tmp_path, "pw-b", {"ipmi/sel-elist.txt": SEL_HISTORY + SEL_INCIDENT, "ipmi/sel-time.txt": BMC_NOW})
    d = diagnose([tmp_path / "evidence"])
    rc = d.root_cause
    assert (d.interruption, d.category, rc.host) == ("hard", "power_fault", "pw-b")
    assert rc.time == "2026-05-04T10:05:30Z", "the SEL time corrected by the BMC clock's offset"
    assert "Power Supply AC lost" in rc.title and "incident window" in rc.title
    assert any("2 h 0 min ahead of UTC" in e.text for e in rc.quotes)
    assert [e.line for e in rc.quotes if e.line] == [7, 8, 9]
    # the November entries on both nodes are history, not a second fault; the BMC lines are read once
    history = sorted((f.host, f.role, f.caused_by is None) for f in d.findings if f.id.startswith("sel-history"))
    assert [h[:2] for h in history] == [("pw-a", "context"), ("pw-b", "context")]
    assert not [f for f in d.findings if f.id.startswith("sig-power")]
    assert sum(f.category == "power_fault" and f.role == "cause" for f in d.findings) == 1


def test_without_the_bmc_clock_the_same_entries_miss_the_window_and_say_why(tmp_path):
    """Read as UTC, the BMC's local 12:06 is two hours after the job died: not this interruption."""
    job(tmp_path)
    bundle(tmp_path, "pw-b", {"ipmi/sel-elist.txt": SEL_HISTORY + SEL_INCIDENT})
    d = diagnose([tmp_path / "evidence"])
    assert d.category != "power_fault"
    ctx = next(f for f in d.findings if f.id.startswith("sel-history"))
    assert ctx.role == "context" and any("no `ipmitool sel time get`" in e.text for e in ctx.quotes)


def test_sel_power_event_long_before_the_job_is_history_and_the_job_error_stands(tmp_path):
    oom = ("[rank6]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 2 has a total "
           "capacity of 79.19 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 78.05 GiB "
           "memory in use.\n")
    job(tmp_path, extra="2026-05-04 10:06:10,000 " + oom)
    unresolved = SEL_HISTORY.replace("   43 |", "   43 |").splitlines()[:2]  # lost in November, never logged back
    bundle(tmp_path, "pw-b", {"ipmi/sel-elist.txt": "\n".join(unresolved) + "\n", "ipmi/sel-time.txt": BMC_NOW})
    d = diagnose([tmp_path / "evidence"])
    assert (d.interruption, d.category, d.root_cause.rank) == ("soft", "cuda_oom", 6)
    hist = next(f for f in d.findings if f.id.startswith("sel-history"))
    assert hist.role == "context" and hist.host == "pw-b" and "2 earlier power event(s)" in hist.title


def test_supply_lost_and_regained_before_the_last_step_is_history(tmp_path):
    """Redundancy lost at 10:03Z and regained at 10:04Z: the job took its 10:05 step on the other
    supply, so this blip did not stop it (the job fails with no cause found: unknown, not power)."""
    job(tmp_path)
    blip = ("   50 | 05/04/2026 | 12:03:42 | Power Unit PSU Redundancy | Redundancy Lost | Asserted\n"
            "   51 | 05/04/2026 | 12:04:42 | Power Unit PSU Redundancy | Fully Redundant | Asserted\n")
    bundle(tmp_path, "pw-b", {"ipmi/sel-elist.txt": blip, "ipmi/sel-time.txt": BMC_NOW})
    d = diagnose([tmp_path / "evidence"])
    assert d.category != "power_fault" and d.interruption == "unknown"
    hist = next(f for f in d.findings if f.id.startswith("sel-history"))
    assert "1 restored later in the log" in hist.title
    # the same blip *not* regained before the last step is the fault
    job(tmp_path)
    open_blip = blip.splitlines()[0] + "\n"
    (tmp_path / "evidence" / "pw-b" / "ipmi" / "sel-elist.txt").write_text(open_blip)
    d = diagnose([tmp_path / "evidence"])
    assert (d.interruption, d.category, d.root_cause.host) == ("hard", "power_fault", "pw-b")


def test_sel_alone_an_unrestored_supply_failure_is_the_fault_a_restored_one_is_not(tmp_path):
    folder = tmp_path / "node-q4"
    folder.mkdir()
    (folder / "sel.txt").write_text(
        "   3 | 01/12/2026 | 06:40:19 | Power Supply PS1 Status | Failure detected | Asserted\n"
        "   4 | 01/12/2026 | 06:40:20 | Power Unit PSU Redundancy | Redundancy Lost | Asserted\n")
    d = diagnose([folder])
    assert (d.interruption, d.category, d.root_cause.host) == ("hard", "power_fault", "node-q4")
    assert "not restored" in d.root_cause.title
    (folder / "sel.txt").write_text(
        "   3 | 01/12/2026 | 06:40:19 | Power Supply PS1 Status | Failure detected | Asserted\n"
        "   4 | 01/12/2026 | 06:40:20 | Power Unit PSU Redundancy | Redundancy Lost | Asserted\n"
        "   5 | 01/12/2026 | 07:02:51 | Power Supply PS1 Status | Failure detected | Deasserted\n"
        "   6 | 01/12/2026 | 07:02:52 | Power Unit PSU Redundancy | Fully Redundant | Asserted\n")
    d = diagnose([folder])
    assert d.interruption == "none"


def test_power_losses_pair_each_entry_with_its_recovery():
    events = ipmi_sel.parse(SEL_HISTORY + SEL_INCIDENT).records
    losses = {p.event.record_id: p for p in sel.power_losses(events)}
    assert sorted(losses) == ["41", "42", "47", "48", "49"]
    assert losses["41"].restored.record_id == "43" and losses["42"].restored.record_id == "44"
    assert losses["49"].node_power and losses["49"].restored.record_id == "4b"
    assert not losses["47"].node_power and losses["47"].restored is None


# A node in a container with Docker's default /dev/shm: df -h and stat -f as gpulib collect records them.
DF_FULL = """Filesystem      Size  Used Avail Use% Mounted on
shm              64M   64M     0 100% /dev/shm
/dev/nvme0n1p2  1.8T  1.1T  650G  63% /data
"""
STAT_FULL = """  File: "/dev/shm"
    ID: 0        Namelen: 255     Type: tmpfs
Block size: 4096       Fundamental block size: 4096
Blocks: Total: 16384      Free: 0          Available: 0
Inodes: Total: 4116450    Free: 4116391
  File: "/data"
    ID: 1a2b3c4d5e6f7081 Namelen: 255     Type: ext2/ext3
Block size: 4096       Fundamental block size: 4096
Blocks: Total: 483183820  Free: 170397811  Available: 170397811
Inodes: Total: 120799232  Free: 118620571
"""
BUS_ERROR = ("2026-05-04 10:06:02,118 [rank5]: ERROR: Unexpected bus error encountered in worker. This might be caused "
             "by insufficient shared memory (shm).\n"
             "2026-05-04 10:06:02,530 [rank5]: RuntimeError: DataLoader worker (pid 61877) is killed by signal: Bus "
             "error. It is possible that dataloader's workers are out of shared memory. Please try to raise your "
             "shared memory limit.\n")


def test_full_dev_shm_and_a_dataloader_bus_error_is_a_data_pipeline_stall_with_the_size(tmp_path):
    job(tmp_path, extra=BUS_ERROR)
    bundle(tmp_path, "pw-b", {"filesystems/df-h.txt": DF_FULL, "filesystems/stat-f.txt": STAT_FULL})
    d = diagnose([tmp_path / "evidence"])
    rc = d.root_cause
    assert (d.interruption, d.category, rc.host, rc.rank) == ("soft", "data_pipeline_stall", "pw-b", 5)
    assert rc.id.startswith("shm-full") and "64 MiB" in rc.title and "Docker's default" in rc.title
    assert "--shm-size=8g" in rc.actions[0] and "4 rank(s)" in rc.actions[0]
    assert {e.file for e in rc.quotes} == {"job.log", "pw-b/filesystems/stat-f.txt"}, "stat -f's exact bytes"
    # the job rules' DataLoader finding on the same line is the symptom, not a second cause
    assert [f.id for f in d.findings if f.role == "cause" and f.category == "data_pipeline_stall"] == [rc.id]


def test_shm_rule_needs_both_the_full_tmpfs_and_the_error(tmp_path):
    job(tmp_path, extra=BUS_ERROR)
    bundle(tmp_path, "pw-b", {"filesystems/df-h.txt": DF_FULL.replace("64M   64M     0 100%", "32G  1.2G   31G   4%")})
    d = diagnose([tmp_path / "evidence"])
    assert d.category == "data_pipeline_stall" and not d.root_cause.id.startswith("shm-full")  # the generic rule
    # full, but the job's "No space left" is its checkpoint disk: not the shm rule
    ckpt = ("2026-05-04 10:06:02,118 [rank0]: OSError: [Errno 28] No space left on device: "
            "'/mnt/ckpt/run7/step_500/model.pt'\n")
    job(tmp_path, extra=ckpt)
    (tmp_path / "evidence" / "pw-b" / "filesystems" / "df-h.txt").write_text(DF_FULL)
    d = diagnose([tmp_path / "evidence"])
    assert not any(f.id.startswith("shm-full") for f in d.findings)


def test_no_space_left_in_a_worker_with_shm_full_on_the_only_node(tmp_path):
    folder = tmp_path / "dl-7"
    folder.mkdir()
    (folder / "df.txt").write_text(DF_FULL.replace("64M   64M", "2.0G  2.0G"))
    (folder / "train.log").write_text(
        "2026-05-04 09:12:40,001 INFO step 200 | loss 3.1\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.11/site-packages/torch/multiprocessing/reductions.py", line 607, in '
        "reduce_storage\n"
        "RuntimeError: unable to write to file </torch_2291_3862101745_0>: No space left on device (28)\n")
    d = diagnose([folder])
    rc = d.root_cause
    assert (d.interruption, d.category, rc.host) == ("soft", "data_pipeline_stall", "dl-7")
    assert "from 2 GiB to at least 8 GiB" in rc.actions[0] and "Docker" not in rc.title


@pytest.mark.parametrize(("size", "ranks", "gib"), [(64 << 20, 1, 8), (64 << 20, 8, 16), (12 << 30, 8, 24),
                                                    ((5 << 30) + 1, 1, 11)])
def test_shm_advice_is_twice_what_filled_at_least_per_rank_rounded_to_gib(size, ranks, gib):
    assert shm.shm_advice_bytes(size, ranks) == gib << 30
