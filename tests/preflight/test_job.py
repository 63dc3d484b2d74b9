"""The job's environment file read by gpulib (not by a notebook cell), and checks as the one finding model."""

from __future__ import annotations

import pytest

from gpulib.errors import InputError
from gpulib.preflight.findings import env_finding
from gpulib.preflight.job import job_checks


def test_a_missing_environment_file_is_named(tmp_path):
    with pytest.raises(InputError) as info:
        job_checks(tmp_path, [], job_env=str(tmp_path / "job.env"))
    assert info.value.path == str(tmp_path / "job.env") and "environment file" in info.value.message


def test_without_a_job_environment_the_notes_say_what_was_not_checked(tmp_path):
    checks, notes = job_checks(tmp_path, [])
    assert checks == [] and "not audited" in notes[0]


def test_the_job_environment_file_is_what_is_audited(tmp_path):
    env = tmp_path / "job.env"
    env.write_text("NCCL_SOCKET_IFNAME=ib0\n", encoding="utf-8")
    checks, notes = job_checks(tmp_path, [], job_env=str(env))
    assert notes == [] and "nccl-debug-off" in [c.id for c in checks]
    env.write_text("NCCL_SOCKET_IFNAME=ib0\nNCCL_DEBUG=INFO\n", encoding="utf-8")
    checks, _ = job_checks(tmp_path, [], job_env=str(env))
    assert "nccl-debug-off" not in [c.id for c in checks]


def test_a_check_is_a_finding_with_its_fix_as_the_action():
    f = env_finding("nccl-ib-disabled", "error", "NCCL_IB_DISABLE", "IB disabled on an IB fabric",
                    fix="unset NCCL_IB_DISABLE", hosts=["n1"])
    assert (f.id, f.severity, f.category, f.actions) == ("nccl-ib-disabled", "error", "network_fabric",
                                                        ["unset NCCL_IB_DISABLE"])
    assert f.to_dict()["hosts"] == ["n1"] and f.to_dict()["variable"] == "NCCL_IB_DISABLE"
    version = env_finding("cuda-runtime-too-new", "error", None, "CUDA 12.4 on a 12.2 driver")
    assert version.category == "driver_mismatch" and "variable" not in version.to_dict() and version.actions == []
