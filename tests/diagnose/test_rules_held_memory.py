"""NCCL 'unhandled cuda error' at start-up joined to GPU memory that other processes held.

Fixtures are pasted sessions as engineers hand them over: an nccl-tests run that fails at init,
then nvidia-smi (``--query-gpu`` CSV, or the default table with its process list). Hosts, PIDs,
bus ids and readings are ours.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

TEST = """\
[svc@inf-c12 ~]$ mpirun -np 1 ./all_reduce_perf -b 8 -e 2G -f 2 -g 4
# nThread 1 nGpus 4 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid  77031 on    inf-c12 device  0 [0x19] NVIDIA L40S
#  Rank  1 Group  0 Pid  77031 on    inf-c12 device  1 [0x3b] NVIDIA L40S
#  Rank  2 Group  0 Pid  77031 on    inf-c12 device  2 [0x86] NVIDIA L40S
#  Rank  3 Group  0 Pid  77031 on    inf-c12 device  3 [0xaf] NVIDIA L40S
inf-c12: Test NCCL failure common.cu:1005 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '
 .. inf-c12 pid 77031: Test failure common.cu:891
"""


def _csv(used_mib: int) -> str:
    rows = "".join(f"{i}, {used_mib} MiB, 46068 MiB\n" for i in range(4))
    return ("[svc@inf-c12 ~]$ nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv\n"
            "index, memory.used [MiB], memory.total [MiB]\n" + rows)


def _table(pid: int, used_mib: int) -> str:
    gpus = "".join(
        f"|   {i}  NVIDIA L40S                    On  |   00000000:{bus}:00.0 Off |                    0 |\n"
        f"| N/A   44C    P0             92W /  350W |   {used_mib + 3:5d}MiB /  46068MiB |      0%      Default |\n"
        "|                                         |                        |                  N/A |\n"
        "+-----------------------------------------+------------------------+----------------------+\n"
        for i, bus in enumerate(("19", "3B", "86", "AF")))
    procs = "".join(f"|    {i}   N/A  N/A      {pid:6d}      C   /opt/serve/bin/python3                 {used_mib:6d}MiB |\n"
                    for i in range(4))
    return ("[svc@inf-c12 ~]$ nvidia-smi\n"
            "Thu Apr  9 11:20:41 2026\n"
            "+-----------------------------------------------------------------------------------------+\n"
            "| NVIDIA-SMI 570.133.20             Driver Version: 570.133.20     CUDA Version: 12.8     |\n"
            "|-----------------------------------------+------------------------+----------------------+\n"
            "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
            "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n"
            "|                                         |                        |               MIG M. |\n"
            "|=========================================+========================+======================|\n"
            + gpus +
            "                                                                                           \n"
            "+-----------------------------------------------------------------------------------------+\n"
            "| Processes:                                                                              |\n"
            "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |\n"
            "|        ID   ID                                                               Usage      |\n"
            "|=========================================================================================|\n"
            + procs +
            "+-----------------------------------------------------------------------------------------+\n")


def _run(tmp_path, text: str):
    (tmp_path / "session.txt").write_text(text)
    return diagnose([tmp_path])


def test_memory_seen_after_the_failed_test_exited_is_held_by_others(tmp_path):
    d = _run(tmp_path, TEST + _csv(44810))
    root = d.root_cause
    assert (d.interruption, root.category, root.host) == ("soft", "cuda_oom", "inf-c12")
    assert root.quotes[0].line == 9 and "unhandled cuda error" in root.quotes[0].text
    assert [e.line for e in root.quotes[1:]] == [13, 14, 15, 16]
    symptom = next(f for f in d.findings if f.id.startswith("sig-nccl-cuda-error"))
    assert symptom.caused_by == root.id  # the NCCL error is how the full GPUs looked from inside


def test_room_to_spare_leaves_the_error_unexplained_not_none(tmp_path):
    d = _run(tmp_path, TEST + _csv(1210))
    assert not any(f.id.startswith("memory-held") for f in d.findings)
    assert d.interruption == "unknown"  # an NCCL error without a cause: never a silent "none"


def test_a_service_in_the_process_table_holds_the_memory(tmp_path):
    d = _run(tmp_path, _table(pid=51220, used_mib=44700) + TEST)  # nvidia-smi before the test, a service's PID
    root = d.root_cause
    assert root.category == "cuda_oom" and root.extra["pids"] == [51220] and "51220" in root.title


def test_memory_of_the_jobs_own_pid_is_no_finding(tmp_path):
    d = _run(tmp_path, TEST + _table(pid=77031, used_mib=44700))  # the test's own PID (as if seen while it ran)
    assert not any(f.id.startswith("memory-held") for f in d.findings)
    assert d.interruption == "unknown"
