"""``gpulib nccl-test`` exits by the one table (DESIGN.md): PASS 0, WARN 1, usage 2, FAIL 3 (no-go),
the run itself failed 5. End to end with the real launcher, torchrun and gloo on this machine (a
CPU run is WARN: no GPU model to judge against), with the injected faults the tester must catch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpulib.nccl import status

pytestmark = pytest.mark.torchrun

SMALL = ["--backend", "gloo", "--nproc-per-node", "2", "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "-w", "1",
         "-c", "1", "-T", "6"]


def nccl_test(tmp_path, *args: str, **inject: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPULIB_NCCL_TEST_", "RANK", "WORLD_SIZE"))}
    env.update(OMP_NUM_THREADS="1", **inject)
    return subprocess.run([sys.executable, "-m", "gpulib", "nccl-test", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)


def test_warn_is_1_and_the_verdict_is_recorded(tmp_path):
    out = tmp_path / "out.json"
    proc = nccl_test(tmp_path, *SMALL, "--json", str(out))
    assert json.loads(out.read_text())["verdict"]["status"] == "WARN"
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "ChildFailedError" not in proc.stderr, "a judged run is no failed worker"


def test_wrong_data_is_fail_3_no_go(tmp_path):
    proc = nccl_test(tmp_path, *SMALL, GPULIB_NCCL_TEST_INJECT_WRONG_RANK="1")
    assert proc.returncode == 3, proc.stderr[-2000:]


def test_a_hang_is_fail_3_with_the_rank_named(tmp_path):
    proc = nccl_test(tmp_path, *SMALL, GPULIB_NCCL_TEST_INJECT_HANG_RANK="1")
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "rank 1" in proc.stderr


def test_a_rank_that_raises_is_the_run_failing_5(tmp_path):
    proc = nccl_test(tmp_path, *SMALL, GPULIB_NCCL_TEST_INJECT_RAISE_RANK="0")
    assert proc.returncode == 5, proc.stderr[-2000:]
    assert "the run itself failed" in proc.stderr and "no verdict recorded" in proc.stderr


def test_bad_arguments_are_2_before_any_rank_starts(tmp_path):
    proc = nccl_test(tmp_path, "--backend", "gloo", "-b", "64K", "-e", "1K")
    assert proc.returncode == 2 and "torch.distributed.run" not in proc.stderr


@pytest.mark.parametrize(("rc", "recorded", "code"), [
    (0, {"status": "PASS"}, 0), (0, {"status": "WARN"}, 1), (0, {"status": "FAIL"}, 3),
    (1, {"status": "FAIL"}, 3),  # a hang recorded before torchrun tore the ranks down
    (1, None, 5), (0, None, 5), (1, {"status": "PASS"}, 5)])  # crashed after its verdict: not a clean run
def test_launcher_exit_table(rc, recorded, code):
    assert status.launcher_exit(rc, recorded) == code


def test_first_recorded_verdict_wins_and_is_written_whole(tmp_path, monkeypatch):
    path = tmp_path / "status.json"
    monkeypatch.setenv(status.STATUS_ENV, str(path))
    status.record("FAIL", "rank 3 did not arrive")
    status.record("PASS", "a late rank-0 footer")
    assert status.read(path) == {"status": "FAIL", "reason": "rank 3 did not arrive"}
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"], "no temp file left behind"
    assert status.read(tmp_path / "absent.json") is None
