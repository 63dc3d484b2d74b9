"""A job log that stops mid-run, and a later GPU snapshot that shows the job still on its GPUs: a stall.

Never "none": the processes were alive and made no progress. One GPU idle among busy siblings
(the ranks that arrived spin in NCCL at 100 %) is named as the suspect; GPUs all alike name none.
Hosts, bus ids, times and readings are ours.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.parsers import nvsmi_csv
from gpulib.parsers.logtime import stamp_in, zone_of
from tests.diagnose.files import write_tree

LOG = "".join(f"[2026-05-11 03:{m:02d}:10] rank0 epoch 7 iter {i}/9300 loss 4.{i % 89:02d}1 lr 0.0021 img/s 5120.4\n"
              for m, i in ((40, 2600), (42, 2700), (44, 2800)))


def _snapshot(utils: list[int], *, when: str = "Mon May 11 05:58:40 CEST 2026", mib: int = 30311) -> str:
    rows = "".join(f"{i}, 00000000:{0x18 + i:02X}:00.0, {u} %, {mib if u else mib - 1400} MiB, {62 if u else 41}.20 W\n"
                   for i, u in enumerate(utils))
    return ("[ml@a40x4-11 ~]$ date; nvidia-smi --query-gpu=index,pci.bus_id,utilization.gpu,memory.used,power.draw "
            "--format=csv\n" + when + "\nindex, pci.bus_id, utilization.gpu [%], memory.used [MiB], power.draw [W]\n"
            + rows + "[ml@a40x4-11 ~]$ dmesg -T | grep -i xid\n[ml@a40x4-11 ~]$\n")


def test_snapshot_after_the_stop_with_one_idle_gpu_names_it(tmp_path):
    d = diagnose([write_tree(tmp_path, {"train.log": LOG, "smi.txt": _snapshot([100, 100, 0, 100])})])
    assert d.interruption == "unknown"
    stall = next(f for f in d.findings if f.id.startswith("stall"))
    assert (stall.host, stall.gpu_index, stall.gpu_pci) == ("a40x4-11", 2, "0000:1a:00.0")
    assert "GPU 2 (0000:1a:00.0)" in d.summary and "hang" in d.summary
    assert any("py-spy" in step for step in d.next_steps)


def test_all_gpus_alike_name_no_suspect_but_still_a_stall(tmp_path):
    d = diagnose([write_tree(tmp_path, {"train.log": LOG, "smi.txt": _snapshot([100, 100, 100, 100])})])
    assert d.interruption == "unknown"
    stall = next(f for f in d.findings if f.id.startswith("stall"))
    assert stall.gpu_index is None and "suspect" not in d.summary


def test_snapshot_before_the_last_progress_line_says_nothing_about_the_stop(tmp_path):
    early = _snapshot([100, 100, 0, 100], when="Mon May 11 05:41:00 CEST 2026")  # 03:41 UTC: before 03:44
    d = diagnose([write_tree(tmp_path, {"train.log": LOG, "smi.txt": early})])
    assert not any(f.id.startswith("stall") for f in d.findings) and d.interruption == "unknown"


def test_normal_end_and_a_free_snapshot_is_none(tmp_path):
    done = LOG.replace("iter 2800/9300", "iter 9300/9300").replace("epoch 7 ", "")
    d = diagnose([write_tree(tmp_path, {"train.log": done, "smi.txt": _snapshot([0, 0, 0, 0], mib=3)})])
    assert (d.interruption, d.category) == ("none", "none")
    assert not any(f.id.startswith("stall") for f in d.findings)


def test_csv_after_a_date_line_takes_its_moment_and_the_prompts_host():
    states = nvsmi_csv.parse(_snapshot([100, 0])).records
    assert [(g.index, g.host, g.captured_at) for g in states] == [
        (0, "a40x4-11", "2026-05-11T03:58:40Z"), (1, "a40x4-11", "2026-05-11T03:58:40Z")]


def test_date_zone_abbreviations_of_one_offset_only():
    utc = zone_of(None)
    assert stamp_in("Mon May 11 05:58:40 CEST 2026", year=None, tz=utc) == "2026-05-11T03:58:40Z"
    assert stamp_in("Mon May 11 05:58:40 PDT 2026", year=None, tz=utc) == "2026-05-11T12:58:40Z"
    assert stamp_in("Mon May 11 05:58:40 CST 2026", year=None, tz=utc) is None  # China or US Central: not read
