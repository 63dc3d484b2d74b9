"""GitHub Actions job logs: every line carries the runner's ISO-8601 stamp with 7 fraction digits.
The step's start and the runner's failure verdict give the job's start and failure times; the
verdict alone is a failure without a cause (unknown), never a silent 'none'; exit code 0 is not.
A pytest summary that starts with "passed" (pytest lists failures first) is a completion."""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.parsers.training_log import parse

LOG = ("2026-05-02T22:41:07.5512093Z ##[group]Run torchrun --nproc_per_node 4 -m pytest tests/dist -x\n"
       "2026-05-02T22:41:07.5513117Z ##[endgroup]\n"
       "2026-05-02T22:47:19.0041870Z [rank2]: torch.distributed.DistBackendError: NCCL communicator was aborted\n"
       "2026-05-02T22:47:21.8820011Z ##[error]Process completed with exit code 1.\n")


def test_step_start_and_failure_carry_the_runner_stamps():
    events = {e.kind: e for e in parse(LOG).records}
    assert events["ci_step_start"].time_utc == "2026-05-02T22:41:07Z"
    assert events["ci_step_start"].details["command"].startswith("torchrun --nproc_per_node 4")
    assert events["ci_step_failed"].time_utc == "2026-05-02T22:47:21Z"
    assert events["ci_step_failed"].details["exitcode"] == 1


def test_runner_failure_alone_is_unknown_not_none(tmp_path):
    (tmp_path / "job-logs.txt").write_text(
        "2026-05-02T22:41:07.5512093Z ##[group]Run torchrun --nproc_per_node 4 train.py\n"
        "2026-05-02T22:47:21.8820011Z ##[error]Process completed with exit code 1.\n")
    got = diagnose([tmp_path]).to_dict()
    assert got["verdict"]["interruption"] == "unknown"


def test_control_exit_code_zero_is_no_failure(tmp_path):
    text = LOG.replace("[rank2]: torch.distributed.DistBackendError: NCCL communicator was aborted",
                       "[rank0]: step 400/400 loss 1.92 (torch.distributed world size 4)").replace("code 1.", "code 0.")
    (tmp_path / "job-logs.txt").write_text(text)
    assert not [e for e in parse(text).records if e.kind == "ci_step_failed"]
    assert diagnose([tmp_path]).to_dict()["verdict"]["interruption"] != "unknown"


def test_a_pytest_summary_without_failures_is_a_completion():
    kinds = [e.kind for e in parse("==== 4 passed, 1 skipped in 12.31s ====\n4 passed in 9.02s\n").records]
    assert kinds == ["completed", "completed"]


def test_control_a_pytest_summary_with_failures_or_errors_is_not():
    text = "==== 1 failed, 3 passed in 12.31s ====\n3 passed, 1 error in 9.02s\n"
    assert not [e for e in parse(text).records if e.kind == "completed"]
