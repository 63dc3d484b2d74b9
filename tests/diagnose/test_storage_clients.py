"""Storage clients under a job: a Lustre eviction, LNet timeouts and a task blocked inside a
network (or FUSE) file-system client are storage stalls (``data_pipeline_stall``, soft), and the
NCCL timeouts of the ranks that waited for the starved one are their cascade. Each rule has its
negative control: a reconnect line, a transient eviction in a run that completed, a task hung in
the GPU driver, LNet's start-up lines."""

from __future__ import annotations

from gpulib.diagnose import diagnose

EVICTED = ("May  6 02:52:10 gn07 kernel: LustreError: 167-0: scr-OST001a-osc-ffff94c18e7a2800: This client was "
           "evicted by scr-OST001a; in progress operations using this service will fail.\n")
REFUSED = ("May  6 02:50:01 gn07 kernel: LustreError: 11-0: scr-MDT0000-mdc-ffff94c18e7a2800: operation "
           "obd_ping to node 10.60.4.9@o2ib failed: rc = -107\n")
LNET = ("May  6 02:41:26 gn07 kernel: LNetError: 3418:0:(o2iblnd_cb.c:3458:kiblnd_check_conns()) Timed out RDMA "
        "with 10.60.4.17@o2ib (7): c: 0, oc: 0, rc: 8\n")
RESTORED = ("May  6 03:13:48 gn07 kernel: Lustre: scr-OST001a-osc-ffff94c18e7a2800: Connection restored to "
            "10.60.4.17@o2ib (at 10.60.4.17@o2ib)\n")


def _hung(module_frames: list[str]) -> str:
    head = ["May  6 02:44:37 gn07 kernel: INFO: task pt_data_worker:2211390 blocked for more than 122 seconds.",
            "May  6 02:44:37 gn07 kernel: task:pt_data_worker  state:D stack:0     pid:2211390 ppid:2211372",
            "May  6 02:44:37 gn07 kernel: Call Trace:", "May  6 02:44:37 gn07 kernel:  <TASK>",
            "May  6 02:44:37 gn07 kernel:  schedule+0x2d/0x70"]
    return "\n".join(head + [f"May  6 02:44:37 gn07 kernel:  {f}" for f in module_frames]
                     + ["May  6 02:44:37 gn07 kernel:  </TASK>"]) + "\n"


def _timeouts(ranks: range = range(4)) -> str:
    return "".join(
        f"[rank{r}]:[E506 03:12:02.118290412 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=96044, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
        "ran for 1800082 milliseconds before timing out.\n" for r in ranks)


def _case(tmp_path, kern: str, job: str | None = None):
    (tmp_path / "gn07").mkdir()
    (tmp_path / "gn07" / "kern.log").write_text(kern)
    if job is not None:
        (tmp_path / "slurm-9.out").write_text(job)
    return diagnose([tmp_path])


def test_an_eviction_alone_names_the_storage_stall(tmp_path):
    d = _case(tmp_path, EVICTED)
    assert (d.interruption, d.category) == ("soft", "data_pipeline_stall")
    assert "scr-OST001a" in d.root_cause.title


def test_refused_io_and_lnet_timeouts_under_nccl_timeouts_are_the_cause_not_the_gpu(tmp_path):
    d = _case(tmp_path, LNET + REFUSED, _timeouts())
    assert (d.interruption, d.category, d.root_cause.host) == ("soft", "data_pipeline_stall", "gn07")
    assert any(f.id.startswith("nccl-timeout") and f.caused_by == d.root_cause.id for f in d.findings)


def test_lnet_and_lustre_error_prefixes_are_not_python_exceptions(tmp_path):
    d = _case(tmp_path, LNET + EVICTED)
    assert not [f for f in d.findings if f.id.startswith("sig-python-exception")]


def test_a_task_hung_in_the_lustre_client_is_a_storage_stall_not_a_wedged_gpu_driver(tmp_path):
    d = _case(tmp_path, _hung(["cl_sync_io_wait+0x1b6/0x2e0 [obdclass]", "ll_readpage+0x12e/0x5a0 [lustre]"]),
              _timeouts())
    assert (d.interruption, d.category) == ("soft", "data_pipeline_stall")


def test_a_task_hung_in_a_fuse_mount_is_a_storage_stall(tmp_path):
    d = _case(tmp_path, _hung(["request_wait_answer+0x13b/0x210 [fuse]", "fuse_simple_request+0x1a5/0x2d0 [fuse]"]),
              _timeouts())
    assert d.category == "data_pipeline_stall"


def test_control_a_task_hung_in_the_nvidia_driver_stays_a_gpu_matter(tmp_path):
    d = _case(tmp_path, _hung(["_nv012345rm+0x3c/0x90 [nvidia]", "rm_ioctl+0x58/0xb0 [nvidia]"]), _timeouts())
    assert d.category != "data_pipeline_stall"


def test_control_a_reconnect_line_alone_is_no_failure(tmp_path):
    d = _case(tmp_path, RESTORED)
    assert d.category != "data_pipeline_stall" and d.interruption == "none"


def test_control_lnet_start_up_lines_are_no_failure(tmp_path):
    d = _case(tmp_path, "May  6 00:01:02 gn07 kernel: LNet: Added LNI 10.60.5.7@o2ib [8/256/0/180]\n"
                        "May  6 00:01:02 gn07 kernel: LNet: Accept secure, port 988\n")
    assert d.interruption == "none"


def test_control_a_transient_eviction_in_a_run_that_completed_is_no_failure(tmp_path):
    job = ("2026-05-06 02:40:43 | INFO | rank 0 | step 12000 | loss 2.3090\n"
           "2026-05-06 04:10:11 | INFO | rank 0 | Training completed in 3:08:02\n")
    d = _case(tmp_path, EVICTED + RESTORED, job)
    assert d.interruption == "none"


def test_a_job_that_hung_from_its_start_keeps_the_stall_that_held_it(tmp_path):
    """The job printed nothing stamped until the scheduler cancelled it, hours after the eviction:
    its first stamped line is its failure, which says nothing about when it began."""
    job = ("waiting for lock on /lustre/shared/images/.import.lock ...\n"
           "slurmstepd: error: *** STEP 9.0 ON gn07 CANCELLED AT 2026-05-06T05:03:19 DUE TO TIME LIMIT ***\n")
    d = _case(tmp_path, EVICTED, job)
    assert (d.interruption, d.category) == ("soft", "data_pipeline_stall")


def test_control_an_eviction_hours_before_a_job_that_ran_belongs_to_an_earlier_job(tmp_path):
    job = ("2026-05-06 05:00:02 | INFO | rank 0 | step 100 | loss 4.1\n"
           "2026-05-06 05:40:02 | INFO | rank 0 | step 900 | loss 3.2\n" + _timeouts().replace("E506 03:12", "E506 06:12"))
    d = _case(tmp_path, EVICTED, job)
    assert d.root_cause is None or d.root_cause.category != "data_pipeline_stall"


def test_errno_108_on_a_lustre_path_is_the_evicted_client_seen_from_the_dataloader(tmp_path):
    (tmp_path / "train.log").write_text(
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", line 349, in _worker_loop\n'
        "OSError: [Errno 108] Cannot send after transport endpoint shutdown: "
        "'/lustre/scratch/proj-vl/shards/shard-00412.tar'\n" + _timeouts())
    d = diagnose([tmp_path])
    assert (d.interruption, d.category) == ("soft", "data_pipeline_stall")


def test_control_errno_108_on_a_socket_is_not_a_file_system(tmp_path):
    (tmp_path / "train.log").write_text(
        "ConnectionError: [Errno 108] Cannot send after transport endpoint shutdown\n")
    assert diagnose([tmp_path]).category != "data_pipeline_stall"
