"""The rules are general: change names, hosts, GPUs, layout or clocks of a case and the answer follows.

Each test copies a corpus case to a temp folder (never into the repo), rewrites it, and checks
that the diagnosis moves with the change - host names come from content/folders, not from
the case, and GPU/rank come from the identity join, not from fixed values.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulib.diagnose import diagnose


def copy_case(incidents: Path, case: str, dest: Path, *, replace: dict[str, str] | None = None,
              rename: dict[str, str] | None = None, drop: tuple[str, ...] = (), drop_lines: str | None = None) -> Path:
    """Copy ``case/input`` to ``dest``: text replaced in every text file (applied simultaneously),
    path parts renamed, files whose relative path is in ``drop`` left out, and lines still containing
    ``drop_lines`` after the replacement removed."""
    replace, rename = replace or {}, rename or {}
    src = incidents / case / "input"
    for path in src.rglob("*"):
        rel = path.relative_to(src)
        if path.is_dir() or str(rel) in drop:
            continue
        target = dest.joinpath(*(rename.get(part, part) for part in rel.parts))
        target.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        if replace and b"\x00" not in data[:4096] and not path.suffix == ".pt":
            text = data.decode("utf-8")
            marks = {old: f"\x00{i}\x00" for i, old in enumerate(replace)}
            for old, mark in marks.items():
                text = text.replace(old, mark)
            for old, mark in marks.items():
                text = text.replace(mark, replace[old])
            data = text.encode("utf-8")
        if drop_lines and b"\x00" not in data[:4096] and not path.suffix == ".pt":
            data = b"".join(x for x in data.splitlines(keepends=True) if drop_lines.encode() not in x)
        target.write_bytes(data)
    return dest


def where(d) -> tuple:
    rc = d.root_cause
    return (d.interruption, d.category, rc.host, rc.gpu_index, rc.gpu_pci, rc.rank, rc.time)


def test_renamed_host_and_files_follow(incidents, tmp_path):
    new = "a100-rack3-n07"
    root = copy_case(incidents, "case-01-xid79-fell-off-bus", tmp_path / "x",
                     replace={"hgx-h100-018": new},
                     rename={"hgx-h100-018": new, "dmesg_T.txt": "kern.log", "slurm-88231.out": "job_console.txt",
                             "nvidia-smi-q.prolog-88231.txt": "prolog_gpu_query.txt"})
    d = diagnose([root])
    assert where(d) == ("hard", "gpu_fell_off_bus", new, 5, "0000:ab:00.0", 13, "2025-03-11T03:12:07Z")
    kinds = {i["path"]: i["kind"] for i in d.to_dict()["inputs"]}
    assert kinds[f"{new}/kern.log"] == "kernel_log"
    assert kinds["job_console.txt"] == "training_log"
    assert kinds[f"{new}/prolog_gpu_query.txt"] == "nvidia_smi_q"


def test_other_gpu_bus_id_follows_the_nccl_map(incidents, tmp_path):
    swap = {"AB:00": "BA:00", "BA:00": "AB:00", "ab:00": "ba:00", "ba:00": "ab:00", "ab000": "ba000", "ba000": "ab000"}
    root = copy_case(incidents, "case-01-xid79-fell-off-bus", tmp_path / "x", replace=swap)
    d = diagnose([root])
    # the failing GPU is now 0000:ba:00.0; it is still nvidia-smi index 5 and NCCL rank 13 (cudaDev 5)
    assert where(d)[2:6] == ("hgx-h100-018", 5, "0000:ba:00.0", 13)


def test_swapped_node_names_move_the_culprit(incidents, tmp_path):
    swap = {"trn-h800-01": "trn-h800-02", "trn-h800-02": "trn-h800-01"}
    root = copy_case(incidents, "case-04-host-oom-killer", tmp_path / "x", replace=swap, rename=swap)
    d = diagnose([root])
    assert where(d) == ("soft", "host_oom", "trn-h800-02", 6, "0000:c6:00.0", 6, "2025-06-11T21:04:45Z")


def test_thermal_without_telemetry_falls_back_to_the_snapshot(incidents, tmp_path):
    root = copy_case(incidents, "case-02-a100-thermal-throttle", tmp_path / "x",
                     drop=("monitoring/gpu_stats_dgx-a100-09_20250422.csv",))
    d = diagnose([root])
    assert where(d)[:6] == ("soft", "thermal_throttling", "dgx-a100-09", 3, "0000:4e:00.0", 3)
    assert d.root_cause.time > "2025-04-22T12:48:30Z"  # the snapshot is later than the first throttled sample


def test_ib_loss_found_from_ibstat_alone(incidents, tmp_path):
    root = copy_case(incidents, "case-05-ib-down-socket-fallback", tmp_path / "x",
                     drop=("v100-node-08/journalctl_2200-2320.txt",))
    d = diagnose([root])
    assert (d.interruption, d.category, d.root_cause.host) == ("soft", "network_fabric", "v100-node-08")
    assert d.root_cause.rank is None and d.root_cause.gpu_index is None


def test_nested_layout_same_answer(incidents, tmp_path):
    root = copy_case(incidents, "case-03-cuda-oom-rank2", tmp_path / "x",
                     rename={"slurm-41877.out": "logs/slurm/out.txt", "nvidia-smi_0918.txt": "ws-a100-04/smi.txt"})
    d = diagnose([root])
    assert where(d) == ("soft", "cuda_oom", "ws-a100-04", 2, "0000:b1:00.0", 2, "2025-05-06T09:14:33Z")


def test_zone_of_naive_clocks_shifts_every_time(incidents, tmp_path):
    """``--tz``: dmesg -T and the job's naive stamps were local time (CET in March = UTC+1)."""
    d = diagnose([incidents / "case-01-xid79-fell-off-bus" / "input"], tz="Europe/Berlin")
    assert where(d)[:6] == ("hard", "gpu_fell_off_bus", "hgx-h100-018", 5, "0000:ab:00.0", 13)
    assert d.root_cause.time == "2025-03-11T02:12:07Z"


@pytest.mark.parametrize("case", ["case-01-xid79-fell-off-bus", "case-04-host-oom-killer"])
def test_two_paths_given_separately(incidents, tmp_path, case):
    """Nodes handed over as separate paths (one per host folder) give the same diagnosis."""
    src = incidents / case / "input"
    d_all = diagnose([src])
    d_split = diagnose(sorted(src.iterdir()))
    assert where(d_split)[:6] == where(d_all)[:6]


def test_without_nccl_debug_the_launcher_and_nvidia_smi_still_place_the_oom(incidents, tmp_path):
    """NCCL_DEBUG unset: no init lines. Rank 2 -> cuda:2 from the launcher line, host from srun,
    PCI from the nvidia-smi table."""
    root = copy_case(incidents, "case-03-cuda-oom-rank2", tmp_path / "x", drop_lines="NCCL INFO")
    d = diagnose([root])
    assert where(d) == ("soft", "cuda_oom", "ws-a100-04", 2, "0000:b1:00.0", 2, "2025-05-06T09:14:33Z")


def test_without_nccl_debug_the_oom_kill_pid_is_found_through_torchrun(incidents, tmp_path):
    root = copy_case(incidents, "case-04-host-oom-killer", tmp_path / "x", drop_lines="NCCL INFO")
    d = diagnose([root])
    assert where(d)[:4] == ("soft", "host_oom", "trn-h800-01", 6) and d.root_cause.rank == 6


def test_healthy_run_that_printed_a_caught_exception_is_still_healthy(incidents, tmp_path):
    root = copy_case(incidents, "case-07-healthy-run", tmp_path / "x")
    log = root / "pod-logs" / "llama-ft-master-0.log"
    log.write_text(log.read_text().replace(
        "Training starts at step 1.\n",
        "Training starts at step 1.\n[rank0]: ValueError: could not parse optional metadata field, using default\n", 1))
    d = diagnose([root])
    assert (d.interruption, d.category) == ("none", "none")


def test_an_old_transient_xid_before_the_job_is_not_its_cause(incidents, tmp_path):
    """A soft Xid 13 on the culprit GPU hours before the job started belongs to an earlier job."""
    root = copy_case(incidents, "case-03-cuda-oom-rank2", tmp_path / "x")
    (root / "ws-a100-04").mkdir()
    (root / "ws-a100-04" / "dmesg.txt").write_text(
        "[Tue May  6 03:01:02 2025] NVRM: Xid (PCI:0000:b1:00): 13, pid=1111, name=python, Graphics Exception: "
        "ESR 0x405840=0x3000\n")
    d = diagnose([root])
    assert (d.category, d.root_cause.rank) == ("cuda_oom", 2)
    assert any(f.id.startswith("xid13") and f.caused_by is None for f in d.findings)


def test_syslog_without_year_takes_the_year_of_the_job_logs(incidents, tmp_path):
    """``Jun 11 21:04:45 host kernel:`` lines carry no year; without the journal header line the year
    comes from the other evidence, not from today's date."""
    root = copy_case(incidents, "case-04-host-oom-killer", tmp_path / "x", drop_lines="-- Journal begins")
    d = diagnose([root])
    assert where(d) == ("soft", "host_oom", "trn-h800-01", 6, "0000:c6:00.0", 6, "2025-06-11T21:04:45Z")


def test_oom_kill_of_a_dataloader_worker_names_its_rank(incidents, tmp_path):
    """The killed pid is a DataLoader worker, not a rank: the rank whose worker died is the culprit."""
    root = copy_case(incidents, "case-04-host-oom-killer", tmp_path / "x",
                     replace={"pid=931577": "pid=944120", "Killed process 931577": "Killed process 944120",
                              "reaped process 931577": "reaped process 944120"},
                     drop_lines="931577")
    log = root / "logs" / "trn-h800-01.torchrun.log"
    log.write_text(log.read_text() + "[rank6]: RuntimeError: DataLoader worker (pid 944120) is killed by signal: "
                                     "Killed.\n")
    d = diagnose([root])
    assert (d.interruption, d.category, d.root_cause.host, d.root_cause.rank) == ("soft", "host_oom", "trn-h800-01", 6)


def test_thermal_from_dmon_without_reason_bits(incidents, tmp_path):
    """The monitoring CSV rewritten as ``nvidia-smi dmon -o DT`` (no throttle-reason column): the
    GPU that is much hotter and slower than its peers is still found, at the same first sample."""
    root = copy_case(incidents, "case-02-a100-thermal-throttle", tmp_path / "x",
                     drop=("monitoring/gpu_stats_dgx-a100-09_20250422.csv",))
    src = incidents / "case-02-a100-thermal-throttle" / "input" / "monitoring" / "gpu_stats_dgx-a100-09_20250422.csv"
    out = ["#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk",
           "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %    MHz    MHz"]
    for row in src.read_text().splitlines()[1:]:
        c = [x.strip() for x in row.split(",")]
        date, clock = c[0].split()
        out.append(f" {date.replace('/', '')}   {clock[:8]}  {c[1]:>5} {c[7].split()[0]:>6} {c[3]:>6} {c[4]:>6} "
                   f"{c[8].split()[0]:>6}      0      0      0   1593 {c[5].split()[0]:>6}")
    (root / "monitoring").mkdir(exist_ok=True)
    (root / "monitoring" / "dmon_dgx-a100-09.txt").write_text("\n".join(out) + "\n")
    d = diagnose([root])
    kinds = {i["path"]: i["kind"] for i in d.to_dict()["inputs"]}
    assert kinds["monitoring/dmon_dgx-a100-09.txt"] == "nvidia_smi_dmon"
    assert where(d) == ("soft", "thermal_throttling", "dgx-a100-09", 3, "0000:4e:00.0", 3, "2025-04-22T12:48:30Z")


def test_a_crash_beats_an_earlier_slowdown_on_the_same_rank(incidents, tmp_path):
    """Rank 3 was throttled since 12:48, but what stopped the job is its OOM at 13:49."""
    line = "2025-04-22 13:48:59,284 [rank3] INFO evaluator: val batch 500/750\n"
    oom = ("[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
           "capacity of 79.15 GiB of which 1.20 GiB is free.\n")
    root = copy_case(incidents, "case-02-a100-thermal-throttle", tmp_path / "x", replace={line: line + oom})
    d = diagnose([root])
    assert where(d)[:6] == ("soft", "cuda_oom", "dgx-a100-09", 3, "0000:4e:00.0", 3)
    assert any(f.category == "thermal_throttling" for f in d.findings)  # still reported
