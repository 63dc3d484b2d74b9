"""Five mechanisms the first look at unseen evidence missed, each with its negative control.

* NCCL ``INFO`` lines are what NCCL tried and chose, never a failure; exit code 0 with nothing
  contradicting it is a normal end.
* A process killed by SIGKILL (``mp.spawn``'s ``terminated with signal SIGKILL``) is the host OOM
  killer, soft; a rank's unstamped watchdog line does not put the OOM kill "after" the failure.
* CUDA error 802 (the NVSwitch fabric not brought up) with the fabric manager shown not installed,
  not running or of another version is the driver stack's set-up, soft ``driver_mismatch``; with
  nothing said about the fabric manager, or a fabric manager error, the node stays out (hard).
* NCCL bootstrapping over a node-local interface (docker0, lo) on several nodes that never finish
  their communicators is a network set-up fault, soft.
* A PSU failure in the SEL read from an admin host (``ipmitool -H node-bmc``) before the scheduler
  declared the node lost is the node's power fault.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulib.diagnose import diagnose


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder


def _verdict(path: Path) -> tuple[str, str, dict]:
    d = diagnose([path]).to_dict()
    root = d.get("root_cause") or {}
    return d["verdict"]["interruption"], root.get("category") or d["verdict"]["category"], root


# ---------------------------------------------------------------- NCCL INFO and exit code 0
_PLUGIN_RUN = """\
2026-03-02 07:11:04,210 - INFO - world_size=2, backend=nccl
lq-box:5120:5120 [0] NCCL INFO Bootstrap : Using eth0:127.0.3.5<0>
lq-box:5120:5120 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such\
 file or directory No plugin found (libnccl-net.so), using internal implementation
lq-box:5120:5180 [0] NCCL INFO Failed to open libibverbs.so[.1]
lq-box:5120:5180 [0] NCCL INFO Using network Socket
2026-03-02 07:11:09,007 - INFO - epoch 1/2 step 50/400 loss 0.8123
2026-03-02 07:19:41,552 - INFO - epoch 2/2 step 400/400 loss 0.3017
2026-03-02 07:19:44,100 - INFO - wrote out/model.pt
"""


def test_nccl_info_lines_and_exit_zero_are_a_normal_end(tmp_path):
    _write(tmp_path, "train.log", _PLUGIN_RUN)
    _write(tmp_path, "launcher.txt", "$ torchrun --nproc_per_node 2 fit.py > train.log 2>&1; echo \"exit=$?\"\nexit=0\n")
    assert _verdict(tmp_path)[:2] == ("none", "none")


def test_exit_zero_does_not_outweigh_a_non_zero_exit(tmp_path):
    _write(tmp_path, "train.log", _PLUGIN_RUN)
    _write(tmp_path, "launcher.txt", "worker 0: exit code 0\nworker 1: exit code 3\n")
    assert _verdict(tmp_path)[0] != "none"


def test_without_exit_zero_the_nccl_info_run_is_not_called_failed_for_its_info_lines(tmp_path):
    _write(tmp_path, "train.log", _PLUGIN_RUN)
    d = diagnose([tmp_path]).to_dict()
    quoted = " ".join(f.get("title", "") for f in d["findings"])
    assert "libibverbs" not in quoted  # an INFO line is never the quoted failure


# ---------------------------------------------------------------- SIGKILL: the host OOM killer
_SPAWN = """\
[03/02/2026 08:00:01 lq INFO] Training in distributed mode with 4 GPUs
[03/02/2026 08:20:14 lq INFO] [E 2 | it 900] loss 1.204
Traceback (most recent call last):
  File "/opt/lq/train.py", line 311, in <module>
    torch.multiprocessing.spawn(main, nprocs=4)
  File "/opt/lq/env/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 140, in join
    raise ProcessExitedException(
torch.multiprocessing.spawn.ProcessExitedException: process {rank} terminated with {how}
"""


def test_spawn_sigkill_is_host_oom_soft_on_that_process(tmp_path):
    _write(tmp_path, "train.log", _SPAWN.format(rank=2, how="signal SIGKILL"))
    interruption, category, root = _verdict(tmp_path)
    assert (interruption, category, root.get("rank")) == ("soft", "host_oom", 2)


def test_spawn_exit_code_is_not_host_oom(tmp_path):
    _write(tmp_path, "train.log", _SPAWN.format(rank=2, how="exit code 1"))
    assert _verdict(tmp_path)[1] != "host_oom"


_SRUN_OOM = """\
0: [2026-03-04 11:02:00] iter 5000/90000 | loss 2.01 | rss_gb 61.0
0: [2026-03-04 11:40:10] iter 5800/90000 | loss 1.98 | rss_gb 93.5
slurmstepd: error: Detected 1 oom_kill event in StepId=4410.0. Some of the step tasks have been OOM Killed.
srun: error: lq-gpu-05: task 6: Out Of Memory
6: [E ProcessGroupNCCL.cpp:475] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=80211,\
 OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600170 milliseconds before timing out.
"""
_DMESG_OOM = """\
[Wed Mar  4 11:42:31 2026] python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0
[Wed Mar  4 11:42:31 2026] Memory cgroup out of memory: Killed process 77120 (python) total-vm:120904880kB,\
 anon-rss:98183412kB, file-rss:612080kB, shmem-rss:0kB, UID:1201 pgtables:99812kB oom_score_adj:0
"""


def test_oom_kill_after_an_unstamped_watchdog_line_is_still_the_cause(tmp_path):
    _write(tmp_path, "slurm-4410.out", _SRUN_OOM)
    _write(tmp_path / "lq-gpu-05", "dmesg.txt", _DMESG_OOM)
    interruption, category, root = _verdict(tmp_path)
    assert (interruption, category, root.get("host")) == ("soft", "host_oom", "lq-gpu-05")


# ---------------------------------------------------------------- CUDA 802: the fabric's set-up
_802 = """\
[rank0]: RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before\
 calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized
"""


def test_cuda_802_alone_keeps_the_node_out(tmp_path):
    _write(tmp_path, "train.log", _802)  # nothing says why the fabric is not up: drain, then look
    assert _verdict(tmp_path)[:2] == ("hard", "nvlink_error")


@pytest.mark.parametrize("said", ["Unit nvidia-fabricmanager.service could not be found.",
                                  "nvidia-fabricmanager is not running",
                                  "Fabric Manager version 550.90.07 does not match the driver version 550.127.05"])
def test_cuda_802_with_the_fabric_manager_missing_or_down_is_the_driver_stack(tmp_path, said):
    _write(tmp_path, "train.log", _802)
    _write(tmp_path, "session.txt", f"root@lq-hgx-2:~# systemctl status nvidia-fabricmanager\n{said}\n")
    assert _verdict(tmp_path)[:2] == ("soft", "driver_mismatch")


def test_a_fabric_manager_error_stays_hard(tmp_path):
    _write(tmp_path, "fabricmanager.log", "[Mar 04 2026 09:12:44] [ERROR] [tid 3310] fabric manager detected "
                                          "NVSwitch fatal error on switch 3 port 17\n")
    assert _verdict(tmp_path)[:2] == ("hard", "nvlink_error")


# ---------------------------------------------------------------- NCCL on a node-local interface
def _node(folder: Path, host: str, rank: int, done: bool) -> None:
    lines = [f"{host}:31{rank:02d}:31{rank:02d} [0] NCCL INFO Bootstrap : Using docker0:127.0.9.1<0>",
             f"{host}:31{rank:02d}:32{rank:02d} [0] NCCL INFO NET/Socket : Using [0]docker0:127.0.9.1<0>",
             f"{host}:31{rank:02d}:32{rank:02d} [0] NCCL INFO Using network Socket"]
    if done:
        lines += [f"{host}:31{rank:02d}:32{rank:02d} [0] NCCL INFO comm 0x5581c0 rank {rank} nranks 2 cudaDev 0 "
                  "nvmlDev 0 busId 1b000 commId 0x77aa - Init COMPLETE",
                  "2026-03-05 10:00:41,001 - INFO - step 100/100 loss 0.12",
                  "2026-03-05 10:00:42,220 - INFO - Training completed"]
    _write(folder / host, f"rank{rank}.log", "\n".join(lines) + "\n")


def test_two_nodes_bootstrapping_over_docker0_that_hang_is_soft_network_setup(tmp_path):
    _node(tmp_path, "lq-trn-1", 0, done=False)
    _node(tmp_path, "lq-trn-2", 1, done=False)
    d = diagnose([tmp_path]).to_dict()
    assert (d["verdict"]["interruption"], d["root_cause"]["category"]) == ("soft", "network_fabric")
    assert "NCCL_SOCKET_IFNAME" in " ".join(d["root_cause"].get("actions") or []) + str(d)


def test_one_node_on_docker0_is_fine(tmp_path):
    _node(tmp_path, "lq-trn-1", 0, done=False)
    assert _verdict(tmp_path)[1] != "network_fabric" or diagnose([tmp_path]).to_dict()["root_cause"] is None


def test_nodes_that_came_up_over_docker0_are_not_blamed_on_it(tmp_path):
    _node(tmp_path, "lq-trn-1", 0, done=True)
    _node(tmp_path, "lq-trn-2", 1, done=True)
    assert _verdict(tmp_path)[:2] == ("none", "none")


# ---------------------------------------------------------------- power loss under a lost node
_JOB = """\
[2026-03-06 04:20:02] lq-corr: block 811/9000 written
[2026-03-06 04:20:12] lq-corr: block 812/9000 written
srun: error: Node failure on lq-gpu-07
slurmstepd: error: *** JOB 9120 ON lq-gpu-06 CANCELLED AT 2026-03-06T04:26:40 DUE TO NODE FAILURE, \
SEE SLURMCTLD LOG FOR DETAILS ***
"""


def _sel(day: str, hm: str) -> str:
    return ("[ops@lq-adm ~]$ ipmitool -I lanplus -H lq-gpu-07-bmc -U ops -P '****' sel elist | tail -n 4\n"
            f"  41 | {day} | {hm}:48 | Power Supply #0x51 | Failure detected () | Asserted\n"
            f"  42 | {day} | {hm}:48 | Power Unit #0x50 | Redundancy Lost | Asserted\n"
            f"  43 | {day} | {hm}:59 | Power Supply #0x52 | Power Supply AC lost | Asserted\n"
            f"  44 | {day} | {hm}:59 | Power Unit #0x50 | Non-Redundant: Insufficient Resources | Asserted\n"
            "[ops@lq-adm ~]$ ipmitool -I lanplus -H lq-gpu-07-bmc -U ops -P '****' sdr type \"Power Supply\"\n"
            "PS1 Status       | 51h | ok  | 10.1 | Presence detected, Failure detected\n"
            "PS2 Status       | 52h | ok  | 10.2 | Presence detected\n")


def test_psu_failure_before_the_scheduler_noticed_the_node_is_its_power_fault(tmp_path):
    _write(tmp_path, "slurm-9120.out", _JOB)
    _write(tmp_path, "sel.txt", _sel("03/06/2026", "04:20"))
    interruption, category, root = _verdict(tmp_path)
    assert (interruption, category, root.get("host")) == ("hard", "power_fault", "lq-gpu-07")


def test_an_old_psu_event_leaves_the_node_lost(tmp_path):
    _write(tmp_path, "slurm-9120.out", _JOB)
    _write(tmp_path, "sel.txt", _sel("02/11/2026", "13:05"))
    assert _verdict(tmp_path)[:2] == ("hard", "node_lost")
