"""Job-log parser: watchdog lines of several torch generations, NCCL init mapping, launcher
prefixes, OOM wordings, ChildFailedError reports and borrowed timestamps.

Fixture lines are written here with invented hosts, pids and values in the real layouts.
"""

from __future__ import annotations

from gpulib.parsers import training_log as tl


def events(text: str, kind: str | None = None, **opts):
    result = tl.parse(text, "fixture.log", **opts)
    assert not result.problems
    return [e for e in result.records if kind is None or e.kind == kind]


# ---------------------------------------------------------------- watchdog timeouts across versions
def test_watchdog_torch25_with_pg_guid_prefix():
    line = ("[rank6]:[E1109 07:41:02.118273645 ProcessGroupNCCL.cpp:616] [Rank 6] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=4417, OpType=ALLGATHER, NumelIn=1048576, NumelOut=8388608, "
            "Timeout(ms)=1800000) ran for 1800213 milliseconds before timing out.\n"
            "2024-11-09 07:40:00,001 unrelated line with a full date\n")
    (ev,) = events(line, "watchdog_timeout", year=2024)
    assert (ev.rank, ev.details["seq"], ev.details["op"]) == (6, 4417, "ALLGATHER")
    assert (ev.details["numel_in"], ev.details["timeout_ms"], ev.details["elapsed_ms"]) == (1048576, 1800000, 1800213)
    assert ev.time_utc == "2024-11-09T07:41:02Z"


def test_watchdog_torch22_without_timestamp_and_torch19_without_seqnum():
    text = ("[rank3]:[E ProcessGroupNCCL.cpp:523] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=88, OpType=BROADCAST, NumelIn=12, NumelOut=12, Timeout(ms)=600000) ran for 600342 "
            "milliseconds before timing out.\n"
            "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806631 milliseconds before timing out.\n")
    a, b = events(text, "watchdog_timeout")
    assert (a.rank, a.details["seq"], a.details["op"]) == (3, 88, "BROADCAST")
    assert (b.rank, b.details.get("seq"), b.details["op"], b.details["elapsed_ms"]) == (1, None, "ALLREDUCE", 1806631)


def test_last_enqueued_and_completed_work_all_wordings():
    text = ("[rank2]:[E612 01:02:03.000000001 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 2] Exception "
            "(either an error or timeout) detected by watchdog at work: 771, last enqueued NCCL work: 772, last "
            "completed NCCL work: 770.\n"
            "[rank5]:[E612 01:02:04.000000001 ProcessGroupNCCL.cpp:1709] [PG 3 Rank 1] Timeout at NCCL work: 90, "
            "last enqueued NCCL work: 90, last completed NCCL work: 89.\n"
            "[PG ID 0 PG GUID 0(default_pg) Rank 7] failure detected by watchdog at work sequence id: 12 PG status: "
            "last enqueued work: 13, last completed work: 11\n")
    a, b, c = events(text, "watchdog_progress", year=2025)
    assert (a.rank, a.details["seq"], a.details["last_enqueued"], a.details["last_completed"]) == (2, 771, 772, 770)
    assert (b.rank, b.details["pg"], b.details["pg_rank"], b.details["last_completed"]) == (5, 3, 1, 89)
    assert (c.rank, c.details["seq"], c.details["last_completed"]) == (7, 12, 11)


def test_heartbeat_monitor_kill():
    text = ("[rank11]:[E1202 10:00:00.1 ProcessGroupNCCL.cpp:1375] [PG ID 0 PG GUID 0(default_pg) Rank 11] "
            "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
            "collectives.\n")
    (ev,) = events(text, "watchdog_stuck", year=2025)
    assert (ev.rank, ev.details["seconds"], ev.time_utc) == (11, 480, "2025-12-02T10:00:00Z")


# ---------------------------------------------------------------- NCCL INFO: identity and transport
def test_nccl_init_lines_of_three_nccl_generations():
    text = ("gpu-a-3:7001:7100 [2] NCCL INFO comm 0x55aa rank 10 nranks 32 cudaDev 2 busId 41000 - Init COMPLETE\n"
            "gpu-a-3:7002:7101 [3] NCCL INFO comm 0x55ab rank 11 nranks 32 cudaDev 3 nvmlDev 3 busId 45000 "
            "commId 0x1234 - Init START\n"
            "gpu-a-3:7003:7102 [4] NCCL INFO ncclCommInitRank comm 0x55ac rank 12 nranks 32 cudaDev 4 nvmlDev 4 "
            "busId c1000 commId 0x99 - Init COMPLETE\n")
    a, b, c = events(text, "nccl_init")
    assert (a.host, a.pid, a.rank, a.details["cuda_dev"], a.details["nvml_dev"], a.details["pci_bus_id"]) == \
        ("gpu-a-3", 7001, 10, 2, None, "0000:41:00.0")
    assert (b.rank, b.details["nvml_dev"], b.details["pci_bus_id"]) == (11, 3, "0000:45:00.0")
    assert (c.rank, c.details["nranks"], c.details["pci_bus_id"]) == (12, 32, "0000:c1:00.0")


def test_transport_and_addresses():
    text = ("node-7:11:12 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.7<0>\n"
            "node-7:11:13 [0] NCCL INFO NET/IB : No device found.\n"
            "node-7:11:13 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.7<0>\n"
            "node-7:11:13 [0] NCCL INFO Using network Socket\n"
            "node-7:11:11 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n")
    kinds = [(e.kind, e.details) for e in events(text)]
    assert ("nccl_address", {"iface": "eth0", "addr": "10.1.2.7"}) in kinds
    assert ("nccl_no_ib", {}) in kinds
    assert ("nccl_transport", {"network": "Socket"}) in kinds
    assert ("nccl_version", {"version": "2.19.3"}) in kinds


def test_a_host_fact_every_rank_prints_is_one_record_per_host():
    ranks = [f"{host}:{pid}:{pid + 100} [{dev}] NCCL INFO {msg}\n" for host in ("node-1", "node-2")
             for dev, pid in enumerate(range(40, 48)) for msg in ("Bootstrap : Using bond0:10.1.0.1<0>",
                                                                  "Using network IB")]
    text = "".join(ranks) + "node-2:60:61 [0] NCCL INFO Using network Socket\n"
    facts = [(e.kind, e.host, e.details) for e in events(text)]
    assert facts == [("nccl_address", "node-1", {"iface": "bond0", "addr": "10.1.0.1"}),
                     ("nccl_transport", "node-1", {"network": "IB"}),
                     ("nccl_address", "node-2", {"iface": "bond0", "addr": "10.1.0.1"}),
                     ("nccl_transport", "node-2", {"network": "IB"}),
                     ("nccl_transport", "node-2", {"network": "Socket"})]  # a new fact is recorded


def test_ib_completion_error_and_socket_reset():
    text = ("\nnode-9:501:600 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
            "10.4.4.21<41000> with error 12, opcode 0, len 0, vendor err 129 (Recv)\n"
            "\n[2025-02-01 10:11:12] node-9:502:601 [4] misc/socket.cc:49 (socketProgressOpt) NCCL WARN "
            "socketProgressOpt: Call to recv from 10.4.4.22<5000> failed : Connection reset by peer\n")
    ib, sock = events(text)
    assert (ib.kind, ib.details["peer"], ib.details["ib_status"], ib.details["vendor_err"]) == \
        ("ib_completion_error", "10.4.4.21", 12, 129)
    assert (sock.kind, sock.details["peer"], sock.time_utc) == ("socket_error", "10.4.4.22", "2025-02-01T10:11:12Z")


def test_nccl_error_classes_with_last_error():
    text = ("[rank4]: torch.distributed.DistBackendError: NCCL error in: ../ProcessGroupNCCL.cpp:1970, remote "
            "process exited or there was a network error, NCCL version 2.21.5\n"
            "[rank4]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
            "prematurely.\n"
            "[rank4]: Last error:\n"
            "[rank4]: NET/IB : Got completion from peer 10.9.9.9<1> with error 5, opcode 0, len 0, vendor err 244\n")
    (ev,) = events(text, "nccl_error")
    assert (ev.rank, ev.details["code"], ev.details["nccl_version"], ev.details["peer"]) == \
        (4, "ncclRemoteError", "2.21.5", "10.9.9.9")


# ---------------------------------------------------------------- OOM, CUDA errors
def test_cuda_oom_new_and_old_wordings():
    new = ("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.25 GiB. GPU 1 has a total "
           "capacity of 39.39 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has "
           "38.36 GiB memory in use. Of the allocated memory 31.20 GiB is allocated by PyTorch, and 6.71 GiB is "
           "reserved by PyTorch but unallocated.\n")
    old = ("RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 15.78 GiB total capacity; "
           "14.21 GiB already allocated; 301.19 MiB free; 14.60 GiB reserved in total by PyTorch)\n")
    (a,) = events(new, "cuda_oom")
    (b,) = events(old, "cuda_oom")
    assert (a.rank, a.details["req"], a.details["gpu"], a.details["free"], a.details["reserved_unallocated"]) == \
        (1, "2.25 GiB", 1, "1.02 GiB", "6.71 GiB")
    assert (b.details["req"], b.details["gpu"], b.details["total"], b.details["reserved"]) == \
        ("512.00 MiB", 0, "15.78 GiB", "14.60 GiB")


def test_cuda_error_seen_by_the_watchdog_and_device_assert():
    text = ("[rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 0] Process group watchdog thread terminated with "
            "exception: CUDA error: an illegal memory access was encountered\n"
            "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [3,0,0], thread: [7,0,0] "
            "Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\n")
    a, b = events(text)
    assert (a.kind, a.rank, a.details["error"], a.details["seen_by"]) == \
        ("cuda_error", 0, "an illegal memory access was encountered", "watchdog")
    assert b.kind == "device_assert" and "index out of bounds" in b.details["cond"]


# ---------------------------------------------------------------- torchrun / slurm
CFE = """\
E0101 12:00:05.000000 1400 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 3 (pid: 5123) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-01-01_12:00:05
  host      : blade-12
  rank      : 4 (local_rank: 0)
  exitcode  : -15 (pid: 5120)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 5120
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-01-01_12:00:04
  host      : blade-12
  rank      : 7 (local_rank: 3)
  exitcode  : -9 (pid: 5123)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 5123
============================================================
"""


def test_child_failed_error_report():
    evs = events(CFE, year=2026)
    failed = next(e for e in evs if e.kind == "process_failed")
    assert (failed.pid, failed.details["exitcode"], failed.details["signal"], failed.details["local_rank"]) == \
        (5123, -9, "SIGKILL", 3)
    (cfe,) = [e for e in evs if e.kind == "child_failed"]
    assert (cfe.rank, cfe.host, cfe.pid, cfe.time_utc) == (7, "blade-12", 5123, "2026-01-01T12:00:04Z")
    other = next(f for f in cfe.details["failures"] if f["section"] == "failure")
    assert (other["rank"], other["signal"]) == (4, "SIGTERM")


def test_srun_and_slurmstepd_lines():
    text = ("srun: error: blade-3: tasks 0-2,5: Exited with exit code 1\n"
            "slurmstepd: error: *** JOB 77 ON blade-3 CANCELLED AT 2026-02-03T04:05:06 DUE TO NODE FAILURE ***\n")
    a, b = events(text)
    assert (a.kind, a.host, a.details["tasks"]) == ("srun_task_exit", "blade-3", [0, 1, 2, 5])
    assert (b.kind, b.host, b.time_utc) == ("node_failure", "blade-3", "2026-02-03T04:05:06Z")


# ---------------------------------------------------------------- prefixes and borrowed times
def test_launcher_prefixes_are_stripped():
    text = ("[1,6]<stderr>:[rank6]: RuntimeError: CUDA error: unspecified launch failure\n"
            "  3: 10.0.0.5: gpu-b-2:900:901 [1] NCCL INFO comm 0x1 rank 3 nranks 4 cudaDev 1 busId 1b000 - Init START\n"
            "(RayTrainWorker pid=4242, ip=10.0.0.9) [rank2]: ValueError: bad shard index 17\n")
    a, b, c = events(text)
    assert (a.kind, a.rank, a.details["error"]) == ("cuda_error", 6, "unspecified launch failure")
    assert (b.kind, b.rank, b.host, b.details["task"]) == ("nccl_init", 3, "gpu-b-2", 3)
    assert (c.kind, c.rank, c.details["class"], c.details["message"]) == ("exception", 2, "ValueError",
                                                                          "bad shard index 17")


def test_untimed_error_borrows_the_time_of_its_neighbour():
    text = ("2026-03-04 05:06:07,100 | ERROR | rank1 | step failed\n"
            "[rank1]: Traceback (most recent call last):\n"
            "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
            "capacity of 10.00 GiB of which 0 bytes is free.\n"
            "2026-03-04 05:06:09,000 | INFO | rank0 | waiting\n")
    (oom,) = events(text, "cuda_oom")
    assert (oom.time_utc, oom.time_approx, oom.rank) == ("2026-03-04T05:06:07Z", True, 1)


def test_progress_lines_with_per_rank_metrics():
    text = "2026-01-02 03:04:05,000 [rank3] INFO trainer: timing step=900 fwd_bwd_ms=2450.5 data_ms=1.2\n" \
           " [2026-01-02 03:05:00] iteration   1200/  5000 | elapsed time per iteration (ms): 1905.0 | lm loss: 2.0\n"
    a, b = events(text, "step")
    assert (a.rank, a.details["step"], a.details["metrics_ms"]["fwd_bwd_ms"]) == (3, 900, 2450.5)
    assert (b.details["step"], b.details["s_per_step"]) == (1200, 1.905)


def test_step_out_of_total_is_progress():
    # Kaldi's train.py: the job's progress is "Iter: N/M" (its stamps give the job's window)
    text = ("2026-02-03 07:41:09,118 [steps/nnet3/train_dnn.py:331 - train - INFO ] Iter: 57/240   Jobs: 3   "
            "Epoch: 0.71/3.0 (23.8% complete)   lr: 0.000842\n"
            "2026-02-03 07:45:51,604 [steps/nnet3/train_dnn.py:331 - train - INFO ] Iter: 58/240   Jobs: 3\n")
    a, b = events(text, "step")
    assert (a.details, a.time_utc) == ({"step": 57, "total": 240, "planned": 240}, "2026-02-03T07:41:09Z")
    assert b.details["step"] == 58  # "Epoch: 0.71/3.0" is a fraction of epochs, not an epoch counter


def test_streaming_matches_whole_text(tmp_path):
    body = CFE + "".join(f"2026-01-01 11:{i // 60:02d}:{i % 60:02d},000 [rank0] step {i} | loss 1.0 | 1.2 s/step\n"
                         for i in range(600))
    path = tmp_path / "big.log"
    path.write_text(body)
    old = tl.CHUNK_BYTES
    tl.CHUNK_BYTES = 4096  # force many chunks
    try:
        streamed = tl.parse_file(path).records
    finally:
        tl.CHUNK_BYTES = old
    whole = tl.parse(body).records
    assert [(e.line, e.kind) for e in streamed] == [(e.line, e.kind) for e in whole]


def test_benign_lines_are_marked_benign():
    text = ("[rank0]:[titan] 2026-01-01 01:00:00,000 - root - WARNING - Dataset mix is being re-looped\n")
    (ev,) = events(text)
    assert ev.kind == "benign"


def test_tqdm_bars_and_glued_rank_prefixes():
    text = (" 45%|####5     | 450/1000 [10:01<12:14,  1.34s/it]\r 45%|####5     | 451/1000 [10:02<12:13,  1.34s/it]"
            "\r[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 96.00 MiB. GPU 5 has a total "
            "capacity of 79.11 GiB of which 12.50 MiB is free.\n"
            "Epoch 1:  12%|#2        | 120/1000 [02:00<14:40,  1.00s/it][rank1]:[E501 01:02:03.0 ProcessGroupNCCL.cpp:616]"
            " [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=4, "
            "NumelOut=4, Timeout(ms)=600000) ran for 600050 milliseconds before timing out.\n"
            "[1,3]<stderr>:RuntimeError: CUDA error: device-side assert triggered\n")
    oom, timeout, mpi = events(text, year=2026)
    assert (oom.kind, oom.rank, oom.details["req"]) == ("cuda_oom", 5, "96.00 MiB")
    assert (timeout.kind, timeout.rank, timeout.details["seq"]) == ("watchdog_timeout", 1, 7)
    assert (mpi.kind, mpi.rank) == ("cuda_error", 3)


def test_naive_stamps_read_in_a_fixed_offset_zone():
    line = "[rank2]: 2025-04-22 11:02:24,583 ERROR RuntimeError: CUDA error: an illegal memory access was encountered\n"
    (ev,) = events(line, "cuda_error", tz="-0500")
    assert ev.time_utc == "2025-04-22T16:02:24Z"


def test_parse_file_reports_a_scanner_bug_instead_of_raising(tmp_path, monkeypatch):
    path = tmp_path / "train.log"
    path.write_text("[rank0]: step 1 loss 2.0\n")

    def broken(self, *args, **kwargs):
        raise RuntimeError("classifier bug")

    monkeypatch.setattr(tl.JobLogScanner, "take", broken)
    result = tl.parse_file(path)
    assert [str(p) for p in result.problems] == [f"{path}: could not be fully parsed: classifier bug"]


def _oom_under_srun(between: str) -> str:
    """Rank 3 logs an ERROR record and its traceback; the others' watchdog fires 10 minutes later."""
    return (
        "3: 2031-05-06 07:15:02,100 [rank3] INFO train: step 880 loss 1.91\n"
        f"{between}"
        "3: [rank3]: Traceback (most recent call last):\n"
        '3: [rank3]:   File "/opt/job/train.py", line 91, in <module>\n'
        "3: [rank3]:     loss = model(batch).loss\n"
        "3: [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
        "79.10 GiB of which 1.02 GiB is free.\n"
        "0: [rank0]:[E506 07:25:03.410000 5121 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9012, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 "
        "milliseconds before timing out.\n"
        "0: 2031-05-06 07:25:03,520 [rank0] ERROR train: collective timed out\n"
    )


def test_a_traceback_after_an_error_record_has_the_record_time():
    """logger.exception prints the record, then its traceback: the OOM happened at the record's
    time, not at the next stamped line 10 minutes later (the peers' watchdog)."""
    (oom,) = events(_oom_under_srun("3: 2031-05-06 07:15:04,250 [rank3] ERROR train: step 881 failed, exiting\n"), "cuda_oom")
    assert oom.time_utc.startswith("2031-05-06T07:15:04")


def test_a_traceback_after_a_progress_line_keeps_the_teardown_time():
    """Negative control: an uncaught exception printed after an INFO progress line says nothing
    about when it happened; the next stamped line (seconds after a crash) stays the estimate."""
    (oom,) = events(_oom_under_srun(""), "cuda_oom")
    assert not oom.time_utc.startswith("2031-05-06T07:15")


def test_an_exception_class_path_is_not_a_fanout_host():
    """``pkg.module.SomeError: [702] ...`` is the exception line; ``node-3.cluster.local: [rank1]:``
    and ``GPUN0412.Cluster: [1]`` are pdsh prefixes."""
    assert tl.strip_prefixes("numba.cuda.cudadrv.driver.CudaAPIError: [702] Call to cuMemcpyDtoH") == (
        "numba.cuda.cudadrv.driver.CudaAPIError: [702] Call to cuMemcpyDtoH", {})
    assert tl.strip_prefixes("node-3.cluster.local: [rank1]: step 4")[1] == {"prefix_host": "node-3.cluster.local",
                                                                             "rank": 1}
    assert tl.strip_prefixes("GPUN0412.Cluster: [1] ready")[1] == {"prefix_host": "GPUN0412.Cluster"}


# ---------------------------------------------------------------- a bare `raise Exception(...)`
def test_bare_exception_line_is_an_exception_but_not_prose_or_a_frame():
    text = ("Traceback (most recent call last):\n"
            "  File \"train.py\", line 9, in <module>\n"
            "    raise Exception(\n"
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n"
            "Exception handling is enabled for this run\n"
            "    Exception: printed inside a frame\n"
            "Exceptional throughput: 412 samples/s\n")
    (ev,) = events(text, "exception")
    assert (ev.line, ev.details["class"]) == (4, "Exception")
    assert ev.details["message"].startswith("Current loss scale already at minimum")


def test_data_time_and_step_time_readings_make_a_progress_line():
    text = ("2024-03-05,09:00:01 | INFO | Train Epoch: 2 [  8192/1281167 ( 1%)] Data (t): 41.502 Batch (t): 42.611, "
            "48.06/s LR: 0.000100 Loss: 6.1000 (6.2000)\n"
            "Train: 1 [ 150/5004 (  3%)]  Loss: 6.421 (6.50)  Time: 0.412s,  621.36/s  (0.398s,  643.2/s)  "
            "LR: 2.000e-03  Data: 0.021 (0.019)\n"
            "03/05 09:12:00 - mmengine - INFO - Epoch(train)  [1][ 100/2000]  lr: 1.0000e-02  eta: 1:02:03  "
            "time: 0.4567  data_time: 0.0123  memory: 9120  loss: 1.2345\n"
            "Data: /srv/shards time: 09:12 copied\n")  # a path and a clock: no readings
    got = [(e.details["data_s"], e.details["s_per_step"]) for e in events(text, "step")]
    assert got == [(41.502, 42.611), (0.021, 0.412), (0.0123, 0.4567)]


def test_a_head_of_timed_progress_lines_is_a_training_log_whatever_its_name():
    lines = "".join(f"Train: 0 [{i * 10:4d}/5004 (  0%)]  Loss: 6.9 (6.9)  Time: 0.402s,  637.1/s  LR: 1.0e-05  "
                    f"Data: 0.011 (0.011)\n" for i in range(3))
    assert tl.looks_like("[ml@gn-3 ~]$ iostat -xm 5 2\nDevice r/s w/s\n" + lines)
    assert not tl.looks_like("Data: 0.5 GB copied\nTime: 12 s elapsed\n")  # readings on separate lines
