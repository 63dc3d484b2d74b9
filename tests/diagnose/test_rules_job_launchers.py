"""Job-side launcher and scheduler messages (Ray's memory monitor, Ray worker deaths): each alone names
its category (never a silent 'none'), and each has a negative control that must not be read as it."""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose

RAYLET_OOM = ("(raylet) [2026-01-02 15:02:00,117 E 88123 88123] (raylet) node_manager.cc:3069: 1 Workers (tasks / "
              "actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 5a1e, "
              "IP: 10.20.3.41) over the last time period.\n")
RAY_OOM_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/opt/app/train.py", line 12, in <module>\n'
    "    ray.get(refs)\n"
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: 10.9.1.4, ID: 77ab) where the task (actor ID: 1f, name=Trainer.__init__, pid=511, "
    "memory used=61.20GB) was running was 120.11GB / 125.80GB (0.954779), which exceeds the memory usage threshold "
    "of 0.95. Ray killed this worker (ID: 77aa) because it was the most recently scheduled task; to see more "
    "information about memory usage on this node, use `ray logs raylet.out -ip 10.9.1.4`.\n")
RAY_WORKER_DIED = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
    "problem, check the logs for the dead worker. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
    "unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The "
    "process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called.\n")


def _answer(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    got = diagnose([tmp_path]).to_dict()
    root = got.get("root_cause") or {}
    return got["verdict"]["interruption"], root.get("category") or got["verdict"]["category"], root.get("host")


def test_raylet_memory_pressure_kill_is_host_oom_on_the_node_it_names(tmp_path):
    assert _answer(tmp_path, "driver.log", RAYLET_OOM) == ("soft", "host_oom", "10.20.3.41")


def test_ray_outofmemoryerror_is_host_ram_not_cuda(tmp_path):
    """The exception is spelled like torch's CUDA OOM; it is Ray's host-memory kill."""
    assert _answer(tmp_path, "train.log", RAY_OOM_ERROR) == ("soft", "host_oom", "10.9.1.4")


def test_cuda_oom_inside_a_ray_worker_stays_cuda_oom(tmp_path):
    """Negative control: a real torch CUDA OOM printed by a Ray worker is GPU memory."""
    text = ("(RayTrainWorker pid=4431, ip=10.2.0.7) [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to "
            "allocate 1.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 200.00 MiB is free.\n")
    assert _answer(tmp_path, "train.log", text)[:2] == ("soft", "cuda_oom")


def test_ray_worker_death_without_a_cause_is_unknown_not_none(tmp_path):
    """Ray's generic death message lists the OOM killer as one *possible* reason: not a host OOM."""
    interruption, category, _ = _answer(tmp_path, "driver.log", RAY_WORKER_DIED)
    assert interruption == "unknown" and category != "host_oom"


def test_ray_oom_docs_hint_in_a_completed_run_is_no_failure(tmp_path):
    """Negative control: Ray's advice about the memory monitor, printed in a run that finished, is no kill."""
    text = ("To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting "
            "Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.\n"
            "Training completed. Total time 01:12:09\n")
    assert _answer(tmp_path, "driver.log", text)[0] == "none"


# ------------------------------------------------------- collectives the job rules could not compare
OLD_WATCHDOG = ("[E ProcessGroupNCCL.cpp:719] [Rank {r}] Watchdog caught collective operation timeout: "
                "WorkNCCL({seq}OpType={op}, Timeout(ms)=1800000) ran for 18006{r}4 milliseconds before timing out.")


def _old_timeouts(tmp_path, ops: dict[int, str], seq: int | None = None):
    text = "\n".join(OLD_WATCHDOG.format(r=r, op=op, seq=f"SeqNum={seq}, " if seq is not None else "")
                     for r, op in ops.items())
    (tmp_path / "train.log").write_text(text + "\n")
    return diagnose([tmp_path]).to_dict()


def test_allgather_and_reduce_at_one_seqnum_are_a_desync(tmp_path):
    """FSDP's all-gathers are collectives every rank makes, not rooted gathers: comparable."""
    doc = _old_timeouts(tmp_path, {0: "REDUCE", 1: "_ALLGATHER_BASE", 2: "_ALLGATHER_BASE", 3: "_ALLGATHER_BASE"},
                        seq=2914407)
    assert (doc["root_cause"]["category"], doc["verdict"]["interruption"]) == ("application_error", "soft")
    assert doc["root_cause"]["rank"] == 0


def test_unnumbered_different_calls_are_a_desync(tmp_path):
    doc = _old_timeouts(tmp_path, {0: "REDUCE", 1: "ALLGATHER", 2: "ALLGATHER", 3: "ALLGATHER"})
    assert (doc["root_cause"]["category"], doc["verdict"]["interruption"]) == ("application_error", "soft")
    assert not any(f["title"].endswith("every rank waited on the same collective") for f in doc["findings"])


def test_unnumbered_same_call_everywhere_is_only_the_cascade(tmp_path):
    """Negative control: every rank in the same all-gather waits for someone else."""
    doc = _old_timeouts(tmp_path, {r: "ALLGATHER" for r in range(4)})
    assert doc["verdict"]["interruption"] == "unknown"
    assert not any(f["id"].startswith("collective-desync") for f in doc["findings"])


def test_pipeline_send_recv_and_rooted_gather_are_not_a_desync(tmp_path):
    """Negative control: pipeline stages wait in send/recv, a rooted gather's ranks may differ."""
    for ops in ({0: "SEND", 1: "RECV", 2: "ALLREDUCE"}, {0: "GATHER", 1: "ALLREDUCE", 2: "ALLREDUCE"}):
        doc = _old_timeouts(tmp_path, ops, seq=40)
        assert not any(f["id"].startswith("collective-desync") for f in doc["findings"]), ops


# ------------------------------------------------------- DataLoader shared-memory limits
def test_dataloader_mmap_enomem_is_the_data_pipeline(tmp_path):
    text = "RuntimeError: unable to mmap 72 bytes from file </torch_60431_2904117761_63412>: Cannot allocate memory (12)\n"
    assert _answer(tmp_path, "train.log", text)[:2] == ("soft", "data_pipeline_stall")


def test_dataloader_too_many_open_files_is_the_data_pipeline(tmp_path):
    text = ("RuntimeError: unable to open shared memory object </torch_1234_2231_7> in read-write mode: "
            "Too many open files (24)\n")
    assert _answer(tmp_path, "train.log", text)[:2] == ("soft", "data_pipeline_stall")


def test_checkpoint_mmap_failure_is_not_the_data_pipeline(tmp_path):
    """Negative control: torch.load(mmap=True) of a checkpoint failing is not DataLoader shared memory."""
    text = "RuntimeError: unable to mmap 4294967296 bytes from file </ckpt/step_9000/model.pt>: Cannot allocate memory (12)\n"
    assert _answer(tmp_path, "train.log", text)[1] != "data_pipeline_stall"


# ------------------------------------------------------- Kubernetes evictions
def test_pod_evicted_for_node_memory_is_host_oom_on_that_node(tmp_path):
    text = ("Name:           trainer-master-0\nNode:           gpu-pool-a-7kd2/10.128.0.41\nStatus:         Failed\n"
            "Reason:         Evicted\nMessage:        The node was low on resource: memory.\n")
    assert _answer(tmp_path, "describe.txt", text) == ("soft", "host_oom", "gpu-pool-a-7kd2")


def test_pod_evicted_for_disk_is_never_a_silent_none(tmp_path):
    text = ("Status:         Failed\nReason:         Evicted\nMessage:        The node was low on resource: "
            "ephemeral-storage. Container trainer was using 212Gi, which exceeds its request of 0.\n")
    interruption, category, _ = _answer(tmp_path, "describe.txt", text)
    assert interruption == "unknown" and category != "host_oom"


def test_evicted_row_in_a_pod_list_is_never_a_silent_none(tmp_path):
    text = ("NAME                        READY   STATUS    RESTARTS   AGE\n"
            "ppo-master-0-9st9r          0/1     Evicted   0          19h\n")
    assert _answer(tmp_path, "pods.txt", text)[0] == "unknown"


def test_healthy_node_conditions_are_no_eviction(tmp_path):
    """Negative control: `kubectl describe node` lists MemoryPressure False on every healthy node."""
    text = ("Conditions:\n  Type             Status  Reason                       Message\n"
            "  MemoryPressure   False   KubeletHasSufficientMemory   kubelet has sufficient memory available\n"
            "  DiskPressure     False   KubeletHasNoDiskPressure     kubelet has no disk pressure\n"
            "  Ready            True    KubeletReady                 kubelet is posting ready status\n")
    assert _answer(tmp_path, "node.txt", text)[0] == "none"


# ------------------------------------------------------- host memory kills by schedulers and user-space killers
def test_current_slurm_oom_kill_line_is_host_oom(tmp_path):
    text = ("slurmstepd: error: Detected 1 oom_kill event in StepId=88123.0. Some of the step tasks have been "
            "OOM Killed.\n")
    assert _answer(tmp_path, "slurm-88123.out", text)[:2] == ("soft", "host_oom")


def test_srun_task_out_of_memory_names_its_node(tmp_path):
    text = ("RuntimeError: DataLoader worker (pid 48812) is killed by signal: Killed.\n"
            "srun: error: gpu-a07: task 3: Out Of Memory\n")
    assert _answer(tmp_path, "slurm-88123.out", text) == ("soft", "host_oom", "gpu-a07")


def test_srun_oom_on_two_nodes_names_neither(tmp_path):
    text = "srun: error: gpu-a07: task 3: Out Of Memory\nsrun: error: gpu-a09: task 5: Out Of Memory\n"
    assert _answer(tmp_path, "slurm-88123.out", text) == ("soft", "host_oom", None)


def test_srun_task_exit_code_is_not_out_of_memory(tmp_path):
    """Negative control: srun's ordinary per-task failure line says nothing about memory."""
    text = "srun: error: gpu-a07: task 3: Exited with exit code 1\n"
    assert _answer(tmp_path, "slurm-88123.out", text)[1] != "host_oom"


@pytest.mark.parametrize("line", [
    "Mar 03 04:11:09 ws-ml01 systemd-oomd[812]: Killed /user.slice/user-1000.slice/session-3.scope due to memory "
    "pressure for /user.slice/user-1000.slice being 83.12% > 50.00% for > 20s with reclaim activity",
    'Mar 03 04:11:09 ws-ml01 earlyoom[901]: sending SIGTERM to process 81234 uid 1000 "python": badness 912, '
    "VmRSS 61203 MiB"])
def test_systemd_oomd_and_earlyoom_kills_are_host_oom(tmp_path, line):
    assert _answer(tmp_path, "journal.txt", line + "\n")[:2] == ("soft", "host_oom")


def test_memory_pressure_stall_report_is_no_kill(tmp_path):
    """Negative control: systemd-oomd reporting pressure, or earlyoom's periodic status, kills nothing."""
    text = ("Mar 03 04:10:01 ws-ml01 earlyoom[901]: mem avail: 21043 of 64201 MiB (32.78%), swap free: 0 of 0 MiB\n"
            "Mar 03 04:10:05 ws-ml01 systemd-oomd[812]: Considering /user.slice/user-1000.slice: memory pressure 12.40%\n")
    assert _answer(tmp_path, "journal.txt", text)[0] == "none"


@pytest.mark.parametrize("line", [
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[8192,32768] "
    "and type float on /job:worker/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"])
def test_framework_gpu_oom_messages_are_cuda_oom(tmp_path, line):
    assert _answer(tmp_path, "train.log", line + "\n")[:2] == ("soft", "cuda_oom")


def test_cpu_allocator_failure_is_host_oom(tmp_path):
    text = ("RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you "
            "tried to allocate 34359738368 bytes.\n")
    assert _answer(tmp_path, "train.log", text)[:2] == ("soft", "host_oom")


def test_other_cuda_errors_stay_application_errors(tmp_path):
    """Negative control: an illegal memory access is a kernel bug, not memory running out."""
    text = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert _answer(tmp_path, "train.log", text)[:2] == ("soft", "application_error")


# ------------------------------------------------------- titles
def test_heartbeat_monitor_kill_title_has_no_unknown_duration(tmp_path):
    """The heartbeat monitor's kill line gives no duration: the title must not say 'for None s'."""
    text = ("[rank3]:[E1203 10:11:12.123456 4411 ProcessGroupNCCL.cpp:1423] [PG ID 0 PG GUID 0(default_pg) Rank 3] "
            "Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=2\n")
    (tmp_path / "train.log").write_text(text)
    doc = diagnose([tmp_path]).to_dict()
    assert doc["verdict"]["interruption"] == "unknown"
    assert not any("None" in f["title"] for f in doc["findings"])


# ------------------------------------------------------- the shell's bare 'Killed'
def test_bare_killed_after_training_output_is_host_oom(tmp_path):
    for i, word in enumerate(("Killed", "已杀死")):
        case = tmp_path / str(i)
        case.mkdir()
        text = f"episode/score 0.1 / train/loss/image 61.08\nWriting metrics: /tmp/run/metrics.jsonl\n{word}\n"
        assert _answer(case, "terminal.txt", text)[:2] == ("soft", "host_oom"), word


def test_killed_inside_a_sentence_is_no_kill(tmp_path):
    """Negative control: the word in a log sentence of a finished run is not the shell's verdict."""
    text = ("Killed 3 stale dataloader workers from the previous epoch\n"
            "Training completed. Total time 01:12:09\n")
    assert _answer(tmp_path, "train.log", text)[0] == "none"


# ------------------------------------------------------- who printed it: coloured Ray worker prefixes
def test_coloured_ray_worker_prefix_names_the_culprit_node(tmp_path):
    text = ("\x1b[36m(RayTrainWorker pid=4431, ip=10.2.0.7)\x1b[0m [rank1]: torch.OutOfMemoryError: CUDA out of "
            "memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 200.00 MiB is free.\n")
    assert _answer(tmp_path, "driver.log", text) == ("soft", "cuda_oom", "10.2.0.7")


def test_an_ip_in_the_message_is_not_who_printed_it(tmp_path):
    """Negative control: only Ray's own prefix names the worker's node, not an address in the text."""
    text = ("[rank1]: torch.OutOfMemoryError: CUDA out of memory while serving (pid=4431, ip=10.2.0.7). Tried to "
            "allocate 1.00 GiB.\n")
    assert _answer(tmp_path, "driver.log", text)[2] != "10.2.0.7"
