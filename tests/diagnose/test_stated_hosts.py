"""Where a log states its node (stated_hosts), how a rank's node and GPU follow from srun's task lines
(the identity map), and the joins that give a root cause its missing rank or GPU from another record
(fault_gpu, verdict.adopt_job_rank). Each shape as the tool prints it, with words in the same places
that are not hosts. Own hosts, job ids, pids and bus ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulib.diagnose import diagnose
from gpulib.diagnose.context import Context
from gpulib.diagnose.fault_gpu import adopt_hardware_gpu
from gpulib.diagnose.joins import IdentityMap
from gpulib.diagnose.stated_hosts import is_host, session_host, srun_host_of_rank, stated_host
from gpulib.evidence.gather import gather
from gpulib.findings import Finding

GHA = "2026-05-11T08:02:13.4410027Z "


@pytest.mark.parametrize("text, host", [
    ("== job 50412 started on cx-node-041 at Mon May 11 08:02:13 UTC 2026\n", "cx-node-041"),
    (GHA + "=== job 7781 on cx-node-041 (partition a100, 1 node, 4 GPUs) ===\n", "cx-node-041"),
    ("Job 3318 is running on node cx-node-041\n", "cx-node-041"),
    ("    exec_host = cx-node-041/0+cx-node-041/1+cx-node-041/2\n", "cx-node-041"),
    ("+ hostname\ncx-node-041\n+ python train.py\n", "cx-node-041"),
    ("SLURMD_NODENAME=cx-node-041\n", "cx-node-041"),
    (GHA + "[cx-node-041:88123] PMIX ERROR: PMIX_ERR_NOT_FOUND in file server.c at line 3054\n", "cx-node-041"),
    ("[cx-node-041:88123] *** Process received signal ***\n[cx-node-041:88123] Signal: Segmentation fault (11)\n",
     "cx-node-041"),
    ("2m   Normal   Scheduled   pod/trainer-0   Successfully assigned ml-team/trainer-0 to gke-pool-b-77aa01-zq9c\n",
     "gke-pool-b-77aa01-zq9c"),
    ("$ kubectl describe node gke-pool-b-77aa01-zq9c | grep -A 6 Allocatable:\nAllocatable:\n", "gke-pool-b-77aa01-zq9c"),
    ("$ scontrol show node cx-node-041\nNodeName=cx-node-041 Arch=x86_64 CoresPerSocket=32\n", "cx-node-041"),
    ("[rank3] local_rank=3 ib_dev=mlx5_3 host=cx-node-041\n", "cx-node-041"),
    ("[ops@bastion-2 ~]$ nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-aaaa-bbbb-cccc-000000000001)\n",
     "bastion-2"),
])
def test_each_way_a_log_states_its_node(text, host):
    assert stated_host(text) == host


@pytest.mark.parametrize("text", [
    "Running on cpu\n",
    "Running on: localhost\n",
    "job 5 on node 2 of 4\n",
    "Job 12 running on the GPU\n",
    "2026-05-11 08:02:13,551 INFO [trainer.py:1018] Device: cuda:0\n",
    "[launch.py:145:main] WORLD INFO DICT: {'localhost': [0, 1]}\n",
    "[localhost:29500] PMIX ERROR: PMIX_ERR_UNREACH in file ptl_tcp.c at line 790\n",
    "job 9 state: RUNNING\n",
    "$ kubectl describe nodes | grep -c nvidia.com/gpu\n",
    "MASTER_ADDR=10.0.0.5 host=127.0.0.1 node=0\n",
    "rank=0 host=cx-node-041\nrank=8 host=cx-node-052\n",
    "[cx-node-041:881] PMIX ERROR: x\n[cx-node-052:902] PMIX ERROR: x\n",  # two nodes: neither
    "srun: error: cx-node-041: tasks 0-3: Killed\nsrun: error: cx-node-052: tasks 4-7: Killed\n",
])
def test_words_in_a_hosts_place_that_name_no_node(text):
    assert stated_host(text) is None


def test_is_host_refuses_source_files_and_generic_words():
    assert is_host("gpu-a17") and not is_host("gpu") and not is_host("trainer.py") and not is_host("2")


def test_ssh_command_names_the_node_its_output_came_from():
    text = ("[ops@login-3 run]$ ssh cx-node-041 nvidia-smi -L\nGPU 0: NVIDIA A100\n"
            "[ops@login-3 run]$ ssh -o BatchMode=yes cx-node-052 nvidia-smi -L\nGPU 0: NVIDIA A100\nGPU 1: NVIDIA A100\n"
            "[ops@login-3 run]$ srun -w cx-node-063 nvidia-smi -L\nGPU 0: NVIDIA A100\n"
            "[ops@login-3 run]$ uptime\n 08:10:01 up 3 days\n")
    assert session_host(text, 2) == ("cx-node-041", 1)
    assert session_host(text, 5) == ("cx-node-052", 3)
    assert session_host(text, 7) is None  # srun ran it on another node than the prompt's
    assert session_host(text, 9) == ("login-3", 8)
    assert stated_host(text) is None  # three nodes in one file: none for the whole file


SRUN = ("srun: error: cx-node-052: task 11: Exited with exit code 1\n"
        "srun: error: cx-node-041: tasks 0-7: Killed\nsrun: error: cx-node-052: tasks 8-10,12-15: Killed\n")


def test_srun_lines_that_count_ranks_name_the_ranks_node():
    assert srun_host_of_rank(SRUN, 11) == "cx-node-052"
    assert srun_host_of_rank(SRUN, 3) == "cx-node-041"
    assert srun_host_of_rank(SRUN, 40) is None


def test_srun_lines_of_one_task_a_node_count_nodes_not_ranks():
    per_node = "srun: error: cx-node-052: task 1: Exited with exit code 1\nsrun: error: cx-node-041: task 0: Killed\n"
    assert srun_host_of_rank(per_node, 1) is None


def _rc(folder: Path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return diagnose([folder]).to_dict()["root_cause"] or {}


ECC_TRACE = ("[rank{r}]: Traceback (most recent call last):\n[rank{r}]:   File \"fit.py\", line 40, in <module>\n"
             "[rank{r}]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n")


def test_host_from_the_job_banner_of_the_failing_job(tmp_path):
    rc = _rc(tmp_path, {"fit.o50412": "== job 50412 started on cx-node-041 at Mon May 11 08:02:13 UTC 2026\n"
                                      + ECC_TRACE.format(r=0).replace("[rank0]: ", "")})
    assert rc["category"] == "gpu_memory_error" and rc["host"] == "cx-node-041"
    assert rc["identified_by"]["host"].startswith("fit.o50412")


def test_host_from_pmix_prefixes_of_a_ci_log(tmp_path):
    log = (GHA + "[cx-node-041:88123] PMIX ERROR: PMIX_ERR_NO_PERMISSIONS in file dstore_base.c at line 237\n"
           + GHA + "Accelerator Fatal Error: call to cuCtxCreate returned error 214 (CUDA_ERROR_ECC_UNCORRECTABLE): "
                   "uncorrectable ECC error encountered\n" + GHA + "##[error]Process completed with exit code 1.\n")
    rc = _rc(tmp_path, {"ci.txt": log})
    assert rc["category"] == "gpu_memory_error" and rc["host"] == "cx-node-041"


def test_host_from_the_pods_scheduled_event(tmp_path):
    events = ("LAST SEEN   TYPE      REASON      OBJECT           MESSAGE\n"
              "40m         Normal    Scheduled   pod/trainer-0    Successfully assigned ml-team/trainer-0 to "
              "gke-pool-b-77aa01-zq9c\n"
              "3m          Warning   Evicted     pod/trainer-0    The node was low on resource: memory. Container "
              "main was using 30212344Ki, which exceeds its request of 4Gi.\n")
    rc = _rc(tmp_path, {"events.txt": events})
    assert rc["category"] == "host_oom" and rc["host"] == "gke-pool-b-77aa01-zq9c"


def _smi_q(bad: dict[int, int], buses=("18", "3B", "86", "AF")) -> str:
    """``nvidia-smi -q`` sections (as an nvidia-bug-report excerpt holds them), one GPU each."""
    out = ["==============NVSMI LOG==============", "", "Driver Version                            : 550.54.15",
           "", f"Attached GPUs                             : {len(buses)}"]
    for i, bus in enumerate(buses):
        n = bad.get(i, 0)
        out += [f"GPU 00000000:{bus}:00.0", "    Product Name                          : NVIDIA H100 80GB HBM3",
                f"    Minor Number                          : {i}", "    ECC Errors", "        Volatile",
                "            SRAM Correctable              : 0", "            SRAM Uncorrectable            : 0",
                "            DRAM Correctable              : 0", f"            DRAM Uncorrectable            : {n}",
                "        Aggregate", "            SRAM Correctable              : 0",
                "            SRAM Uncorrectable            : 0", "            DRAM Correctable              : 0",
                f"            DRAM Uncorrectable            : {n}", ""]
    return "\n".join(out) + "\n"


SRUN_8 = ("srun: error: cx-node-052: task 6: Exited with exit code 1\n"
          "srun: error: cx-node-041: tasks 0-3: Killed\nsrun: error: cx-node-052: tasks 4-5,7: Killed\n")


def test_rank_node_and_gpu_joined_from_srun_lines_and_the_ecc_section(tmp_path):
    rc = _rc(tmp_path, {"job-771.out": ECC_TRACE.format(r=6) + SRUN_8, "cx-node-052/nvsmi-q.txt": _smi_q({2: 4})})
    assert (rc["host"], rc["rank"], rc["gpu_index"], rc["gpu_pci"]) == ("cx-node-052", 6, 2, "0000:86:00.0")


def test_ecc_on_another_gpu_than_the_ranks_names_no_rank(tmp_path):
    rc = _rc(tmp_path, {"job-771.out": ECC_TRACE.format(r=6) + SRUN_8, "cx-node-052/nvsmi-q.txt": _smi_q({0: 4})})
    assert rc["category"] == "gpu_memory_error" and rc.get("rank") != 6


def test_gpu_of_a_ranks_error_from_the_one_gpu_of_its_node_that_shows_it(tmp_path):
    job = "== job 50412 started on cx-node-052 at Mon May 11 08:02:13 UTC 2026\n" + ECC_TRACE.format(r=1)
    rc = _rc(tmp_path, {"fit.o50412": job, "cx-node-052/nvsmi-q.txt": _smi_q({3: 2})})
    assert (rc["host"], rc["gpu_index"], rc["gpu_pci"]) == ("cx-node-052", 3, "0000:af:00.0")


def _joined(tmp_path: Path, bad_gpus: list[tuple[str, int, str]]) -> Finding:
    inputs = gather([tmp_path])
    ctx = Context(inputs, IdentityMap(inputs))
    root = ctx.add("cuda-error", severity="critical", category="gpu_memory_error", title="Rank 1: CUDA error",
                   host="cx-node-052", rank=1)
    for host, index, pci in bad_gpus:
        ctx.add("ecc", severity="critical", category="gpu_memory_error", title="DBE", host=host, gpu_index=index,
                gpu_pci=pci, hardware=True)
    ctx.add("ecc", severity="critical", category="nvlink_error", title="link down", host="cx-node-052",
            gpu_index=0, gpu_pci="0000:18:00.0", hardware=True)  # another fault's GPU is no candidate
    adopt_hardware_gpu(ctx, root)
    return root


def test_the_one_gpu_of_the_node_showing_the_fault_is_taken(tmp_path):
    root = _joined(tmp_path, [("cx-node-052", 3, "0000:af:00.0"), ("cx-node-041", 1, "0000:3b:00.0")])
    assert (root.gpu_index, root.gpu_pci) == (3, "0000:af:00.0")
    assert "cx-node-052" in root.extra["identified_by"]["gpu_pci"]


def test_two_gpus_of_the_node_showing_it_name_neither(tmp_path):
    root = _joined(tmp_path, [("cx-node-052", 3, "0000:af:00.0"), ("cx-node-052", 1, "0000:3b:00.0")])
    assert (root.gpu_index, root.gpu_pci) == (None, None)


def test_a_fault_on_another_node_names_no_gpu(tmp_path):
    root = _joined(tmp_path, [("cx-node-041", 3, "0000:af:00.0")])
    assert (root.gpu_index, root.gpu_pci) == (None, None)


def test_rank_from_the_spawned_process_that_raised(tmp_path):
    log = ("Traceback (most recent call last):\n  File \"fit.py\", line 90, in <module>\n"
           "    mp.spawn(run, nprocs=4, join=True)\n"
           "torch.multiprocessing.spawn.ProcessRaisedException: \n\n-- Process 2 terminated with the following error:\n"
           "Traceback (most recent call last):\n  File \"fit.py\", line 61, in run\n    loss.backward()\n"
           "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 2; 23.69 GiB total "
           "capacity; 21.10 GiB already allocated; 1.02 GiB free; 21.90 GiB reserved in total by PyTorch)\n")
    rc = _rc(tmp_path, {"fit.log": log})
    assert rc["category"] == "cuda_oom" and rc["rank"] == 2


LOST = ("ops@cx-node-041:~$ nvidia-smi\nUnable to determine the device handle for GPU 0000:86:00.0: Unknown Error\n")
QUERY = ("ops@cx-node-041:~$ nvidia-smi --query-gpu=index,pci.bus_id --format=csv\nindex, pci.bus_id\n"
         "0, 00000000:18:00.0\n1, 00000000:3B:00.0\n2, 00000000:86:00.0\n3, 00000000:AF:00.0\n")


def _raised(rank: int) -> str:
    return (f"[rank{rank}]: Traceback (most recent call last):\n[rank{rank}]:   File \"fit.py\", line 40, in <module>\n"
            f"[rank{rank}]: RuntimeError: CUDA error: unknown error\n")


def test_lost_gpu_by_bus_id_takes_the_rank_that_drives_it(tmp_path):
    rc = _rc(tmp_path, {"after.txt": LOST, "before.txt": QUERY, "fit.log": _raised(2)})
    assert (rc["host"], rc["gpu_index"], rc["rank"]) == ("cx-node-041", 2, 2)
    assert "this GPU" in rc["identified_by"]["rank"]


def test_lost_gpu_does_not_take_a_rank_on_another_gpu(tmp_path):
    rc = _rc(tmp_path, {"after.txt": LOST, "before.txt": QUERY, "fit.log": _raised(0)})
    assert rc["gpu_index"] == 2 and rc["rank"] is None
