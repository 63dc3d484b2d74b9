"""The culprit fields and the first event of a root cause, as real threads show them: the host of a
zsh session, the node sacct ran a job's ``slurm-<jobid>.out`` on, the interruption of a driver/library
mismatch, and lines quoted as the tool printed them. Each fix has its negative control.

Lines are in the tools' layouts; hosts, job ids, PCI ids, times and values are invented.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.parsers.line_identity import LineReader

SACCT = """JobID             JobName      State ExitCode   NodeList
------------ ------------ ---------- -------- ----------
5520011          sweep_a  COMPLETED      0:0    tq-n07
5520014          sweep_a     FAILED      1:0    tq-n22
5520015          sweep_b     FAILED      1:0 tq-n[22-23]
"""
ECC_JOB = ("2025-07-14 09:02:11,004 [INFO] starting training\n"
           "RuntimeError: CUDA error: uncorrectable ECC error encountered\n")


def _run(tmp_path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return diagnose([tmp_path]).to_dict()


def test_a_zsh_prompt_names_the_host_of_the_pasted_session():
    reader = LineReader(tz=None)
    assert reader.read("mkovac@lab-gpu4 ~ % nvidia-smi").command and reader.session_host == "lab-gpu4"


def test_a_line_with_an_address_and_a_percentage_is_not_a_prompt():
    reader = LineReader(tz=None)
    for line in ("ops@mail.example 50 % done", "rank0@w1 12.5 % of steps", "100 % of jobs by ops@w1 done"):
        assert not reader.read(line).command, line
    assert reader.session_host is None


def test_a_slurm_output_file_takes_the_node_sacct_ran_its_job_on(tmp_path):
    out = _run(tmp_path, {"sacct.txt": SACCT, "slurm-5520014.out": ECC_JOB})
    assert (out["root_cause"]["category"], out["root_cause"]["host"]) == ("gpu_memory_error", "tq-n22")


def test_a_job_on_two_nodes_or_not_in_sacct_names_no_host(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    two = _run(tmp_path / "a", {"sacct.txt": SACCT, "slurm-5520015.out": ECC_JOB})
    unlisted = _run(tmp_path / "b", {"sacct.txt": SACCT, "slurm-5529999.out": ECC_JOB})
    assert two["root_cause"]["category"] == unlisted["root_cause"]["category"] == "gpu_memory_error"
    assert two["root_cause"]["host"] is None and unlisted["root_cause"]["host"] is None


def test_a_driver_library_mismatch_is_soft_the_gpus_are_fine(tmp_path):
    out = _run(tmp_path, {"session.txt": "root@tq-n07:~# nvidia-smi\n"
                                         "Failed to initialize NVML: Driver/library version mismatch\n"})
    assert (out["verdict"]["interruption"], out["root_cause"]["category"]) == ("soft", "driver_mismatch")


def test_a_gpu_off_the_bus_beside_a_mismatch_stays_hard(tmp_path):
    out = _run(tmp_path, {"dmesg.txt": "[ 812.004411] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n",
                          "session.txt": "Failed to initialize NVML: Driver/library version mismatch\n"})
    assert (out["verdict"]["interruption"], out["root_cause"]["category"]) == ("hard", "gpu_fell_off_bus")


def test_root_cause_quotes_the_lines_as_printed(tmp_path):
    raw = "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error"
    out = _run(tmp_path, {"nvidia-smi.txt": raw + "\n"})
    assert out["root_cause"]["evidence"][0] == {"file": "nvidia-smi.txt", "line": 1, "text": raw}


def test_a_down_ib_port_is_quoted_by_its_state_line_and_an_active_one_is_no_cause(tmp_path):
    block = ("CA '{ca}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: {state}\n"
             "\t\tPhysical state: {phys}\n\t\tRate: 400\n\t\tLink layer: InfiniBand\n")
    text = block.format(ca="mlx5_0", state="Active", phys="LinkUp") + block.format(ca="mlx5_1", state="Down",
                                                                                    phys="Disabled")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    out = _run(tmp_path / "a", {"ibstat.txt": text})
    assert out["root_cause"]["evidence"][0] == {"file": "ibstat.txt", "line": 13, "text": "State: Down"}
    healthy = _run(tmp_path / "b", {"ibstat.txt": block.format(ca="mlx5_0", state="Active", phys="LinkUp")})
    assert healthy["root_cause"] is None


PORT_ERROR = "ib-c3:7112:7190 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error\n"
TIMEOUTS = "".join(
    f"[E ProcessGroupNCCL.cpp:828] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4410, "
    f"OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800412 milliseconds before timing out.\n" for r in (0, 3))


def test_a_port_error_is_the_cause_when_the_missing_ranks_cannot_be_placed(tmp_path):
    out = _run(tmp_path, {"job.log": PORT_ERROR + TIMEOUTS})
    assert (out["verdict"]["interruption"], out["root_cause"]["category"], out["root_cause"]["host"]) == (
        "hard", "network_fabric", "ib-c3")


def test_a_port_error_on_another_node_than_the_missing_ranks_is_not_the_cause(tmp_path):
    inits = "".join(f"ib-c5:{900 + r}:{950 + r} [{r - 1}] NCCL INFO comm 0x{r} rank {r} nranks 4 cudaDev {r - 1} "
                    f"busId {r}b000 - Init COMPLETE\n" for r in (1, 2))
    out = _run(tmp_path, {"job.log": inits + PORT_ERROR + TIMEOUTS})
    assert out["root_cause"] is None or out["root_cause"]["host"] != "ib-c3"


def _hang_after(xids: list[tuple[str, str]]) -> str:
    lines = [f"[Mon Mar  2 04:{clock} 2026] NVRM: Xid (PCI:{pci}): 45, pid=22817, name=solver, Ch 00000008"
             for clock, pci in xids]
    return "\n".join(lines + ["[Mon Mar  2 04:40:19 2026] INFO: task nv_queue:1187 blocked for more than 120 seconds.",
                              "[Mon Mar  2 04:40:19 2026]       Tainted: P           OE     6.5.0-41-generic"]) + "\n"


def test_a_kernel_hang_minutes_after_an_xid_hangs_on_that_gpu_and_starts_there(tmp_path):
    out = _run(tmp_path, {"dmesg.txt": _hang_after([("37:02", "0000:4e:00")])})
    rc = out["root_cause"]
    assert (rc["category"], rc["gpu_pci"]) == ("gpu_firmware_error", "0000:4e:00.0")
    assert "Xid (PCI:0000:4e:00): 45" in rc["evidence"][0]["text"]


def test_a_hang_long_after_an_xid_or_after_xids_on_two_gpus_names_no_gpu(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    stale = _run(tmp_path / "a", {"dmesg.txt": _hang_after([("02:02", "0000:4e:00")])})
    two = _run(tmp_path / "b", {"dmesg.txt": _hang_after([("37:02", "0000:4e:00"), ("37:05", "0000:4f:00")])})
    for out in (stale, two):
        assert out["root_cause"]["gpu_pci"] is None
        assert "blocked for more than" in out["root_cause"]["evidence"][0]["text"]


def test_a_wrapped_fallen_off_the_bus_message_starts_at_the_line_naming_the_gpu(tmp_path):
    text = ("[  912.204118] NVRM: The NVIDIA GPU 0000:c1:00.0\n"
            "               NVRM: (PCI ID: 10de:2330) installed in this system has\n"
            "               NVRM: fallen off the bus and is not responding to commands.\n")
    rc = _run(tmp_path, {"dmesg.txt": text})["root_cause"]
    assert (rc["gpu_pci"], rc["evidence"][0]["line"]) == ("0000:c1:00.0", 1)


def test_a_one_line_fallen_off_the_bus_keeps_its_line_after_a_message_naming_the_gpu(tmp_path):
    text = ("[  912.204101] NVRM: GPU at PCI:0000:c1:00: GPU-1f0e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b\n"
            "[  912.204118] NVRM: GPU 0000:c1:00.0: GPU has fallen off the bus.\n")
    rc = _run(tmp_path, {"dmesg.txt": text})["root_cause"]
    assert (rc["gpu_pci"], rc["evidence"][0]["line"]) == ("0000:c1:00.0", 2)


WORKER = "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
KILLED = ("Traceback (most recent call last):\n"
          '  File "/opt/app/train.py", line 88, in <module>\n'
          "RuntimeError: DataLoader worker (pid 4411) is killed by signal: Bus error. It is possible that "
          "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.\n")


def test_a_bus_error_starts_at_the_workers_own_report(tmp_path):
    rc = _run(tmp_path, {"train.log": "epoch 0 step 10\n" + WORKER + KILLED})["root_cause"]
    assert rc["category"] == "data_pipeline_stall"
    assert (rc["evidence"][0]["line"], rc["evidence"][0]["text"]) == (2, WORKER.strip())


def test_a_worker_report_after_the_error_or_from_another_node_does_not_lead(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    after = _run(tmp_path / "a", {"train.log": KILLED + WORKER})["root_cause"]
    other = _run(tmp_path / "b", {"train.log": "root@dl-n1:~# python train.py\n" + KILLED,
                                  "peer.log": "root@dl-n2:~# python train.py\n" + WORKER})["root_cause"]
    for rc in (after, other):
        assert rc["category"] == "data_pipeline_stall" and "killed by signal: Bus error" in rc["evidence"][0]["text"]


def _oom_report(clock: str, pid: int) -> list[str]:
    return [f"[Thu Jun  4 02:{clock} 2026] python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0",
            f"[Thu Jun  4 02:{clock} 2026] Mem-Info:",
            f"[Thu Jun  4 02:{clock} 2026] active_anon:61244212 inactive_anon:1224 isolated_anon:0",
            f"[Thu Jun  4 02:{clock} 2026] Out of memory: Killed process {pid} (python3) total-vm:251880312kB"]


def test_a_kernel_oom_starts_at_its_own_invoked_oom_killer_line(tmp_path):
    lines = _oom_report("11:07", 5120) + _oom_report("19:44", 5188)
    rc = _run(tmp_path, {"dmesg.txt": "\n".join(lines) + "\n"})["root_cause"]
    assert rc["category"] == "host_oom"
    kill = next(n for n, e in enumerate(rc["evidence"]) if "Killed process" in e["text"])
    assert kill == 1 and rc["evidence"][0]["line"] == rc["evidence"][1]["line"] - 3
    assert "invoked oom-killer" in rc["evidence"][0]["text"]


def test_a_kill_without_its_report_is_its_own_first_line(tmp_path):
    rc = _run(tmp_path, {"dmesg.txt": _oom_report("11:07", 5120)[-1] + "\n"})["root_cause"]
    assert rc["category"] == "host_oom" and "Killed process" in rc["evidence"][0]["text"]


ASSERTS = "".join(f"/opt/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
                  f"block: [0,0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed.\n" for t in (3, 4, 5))
RAISED = ("Traceback (most recent call last):\n  File \"/opt/app/train.py\", line 140, in <module>\n"
          "RuntimeError: CUDA error: device-side assert triggered\n")


def test_a_device_side_assert_starts_at_the_first_thread_that_asserted(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    rc = _run(tmp_path / "a", {"train.log": "step 1 loss 2.3\n" + ASSERTS + RAISED})["root_cause"]
    assert rc["category"] == "application_error" and rc["evidence"][0]["line"] == 2
    bare = _run(tmp_path / "b", {"train.log": "step 1 loss 2.3\n" + RAISED})["root_cause"]
    assert bare["category"] == "application_error" and "device-side assert" in bare["evidence"][0]["text"]


def test_a_cpp_exception_starts_at_terminate_called_and_a_lone_what_line_at_itself(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    what = "  what():  CUDA error: unknown error\n"
    rc = _run(tmp_path / "a", {"rank1.log": "terminate called after throwing an instance of 'c10::Error'\n" + what})
    lone = _run(tmp_path / "b", {"rank1.log": "step 90 loss 1.1\n" + what})
    assert rc["root_cause"]["evidence"][0]["line"] == 1
    assert lone["root_cause"]["evidence"][0]["line"] == 2
