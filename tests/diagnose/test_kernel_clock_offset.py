"""A zone-less kernel clock beside a job clock in UTC (:mod:`gpulib.evidence.clock_offset`).

The fixture: a container on host ``gx-ws5`` (a workstation in a UTC-05:00 zone) whose
``docker logs --timestamps`` prints RFC 3339 UTC stamps and fails with ``CUDA error: unknown error``
at 14:02:10Z; the host's ``journalctl -k`` (short format: local time, no zone) shows Xid 79 on the
GPU at bus 4b:00 at 09:02:09 - one second before the error once the five hours are known. Read as
UTC, the Xid lands five hours *before* the error and the application is blamed.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.evidence.gather import gather

DOCKER = """\
$ docker logs --timestamps trainer 2>&1 | tail -n 6
2026-03-09T14:01:40.118230551Z epoch 3 step 1200 loss 1.742
2026-03-09T14:01:55.902114873Z epoch 3 step 1250 loss 1.738
2026-03-09T14:02:10.551902117Z Traceback (most recent call last):
2026-03-09T14:02:10.552004876Z   File "/app/train.py", line 211, in <module>
2026-03-09T14:02:10.552318020Z RuntimeError: CUDA error: unknown error
2026-03-09T14:02:10.552340911Z CUDA kernel errors might be asynchronously reported at some other API call.
"""

JOURNAL = """\
Mar 09 08:58:02 gx-ws5 kernel: IPv6: ADDRCONF(NETDEV_CHANGE): veth81c2d40: link becomes ready
Mar 09 {hms} gx-ws5 kernel: NVRM: GPU at PCI:0000:4b:00: GPU-0d7a3e91-55c2-4b18-9f0e-c61a2b8e7d40
Mar 09 {hms} gx-ws5 kernel: NVRM: Xid (PCI:0000:4b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
Mar 09 {hms} gx-ws5 kernel: NVRM: GPU 0000:4b:00.0: GPU has fallen off the bus.
"""


def incident(tmp_path, hms: str = "09:02:09"):
    (tmp_path / "docker-logs-trainer.txt").write_text(DOCKER)
    (tmp_path / "journal-kernel.txt").write_text(JOURNAL.format(hms=hms))
    return tmp_path


def xid_time(inputs) -> str:
    (kernel,) = [f for f in inputs.files if f.kind == "kernel_log"]
    return next(e.time_utc for e in kernel.records if e.kind == "xid")


def test_an_offset_that_puts_the_xid_on_the_jobs_error_is_adopted_and_said(tmp_path):
    inputs = gather([incident(tmp_path)])
    assert xid_time(inputs) == "2026-03-09T14:02:09Z"
    (kernel,) = [f for f in inputs.files if f.kind == "kernel_log"]
    assert any("kernel clock read as UTC-05:00" in p.message for p in kernel.problems)
    d = diagnose([tmp_path])
    assert (d.interruption, d.category) == ("hard", "gpu_fell_off_bus")
    assert d.root_cause.host == "gx-ws5" and d.root_cause.gpu_pci == "0000:4b:00.0"


def test_no_offset_that_lines_anything_up_leaves_the_clock_as_read(tmp_path):
    inputs = gather([incident(tmp_path, hms="10:19:47")])  # 17 min 37 s off any whole or half hour
    assert xid_time(inputs) == "2026-03-09T10:19:47Z"


def test_an_explicit_zone_wins_over_an_offset_the_evidence_suggests(tmp_path):
    inputs = gather([incident(tmp_path)], tz="UTC")
    assert xid_time(inputs) == "2026-03-09T09:02:09Z"


def test_an_xid_on_a_gpu_the_job_did_not_use_moves_no_clock(tmp_path):
    """The job names its GPU (NCCL init on bus 1a:00); the Xid an hour later hits bus 4b:00."""
    nccl = "2026-03-09T13:55:00.000000000Z gx-ws5:4410:4410 [0] NCCL INFO comm 0x5 rank 0 nranks 1 cudaDev 0 " \
           "nvmlDev 0 busId 1a000 commId 0x77 - Init COMPLETE\n"
    incident(tmp_path, hms="15:02:11")
    (tmp_path / "docker-logs-trainer.txt").write_text(DOCKER.replace("\n", "\n" + nccl, 1))
    inputs = gather([tmp_path])
    assert xid_time(inputs) == "2026-03-09T15:02:11Z"


def test_two_offsets_that_both_line_up_leave_the_clock_as_read(tmp_path):
    """Xids at 09:02:09 and 16:02:10 local: UTC-05:00 and UTC+02:00 both fit - the evidence does not say which."""
    incident(tmp_path)
    later = "Mar 09 16:02:10 gx-ws5 kernel: NVRM: Xid (PCI:0000:4b:00): 79, pid='<unknown>', name=<unknown>, " \
            "GPU has fallen off the bus.\n"
    with (tmp_path / "journal-kernel.txt").open("a") as journal:
        journal.write(later)
    inputs = gather([tmp_path])
    assert xid_time(inputs) == "2026-03-09T09:02:09Z"
