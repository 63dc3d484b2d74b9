"""The Slurm hooks against a real one-node Slurm (see tests/slurm/cluster.py).

* a job that fails leaves a bundle captured by the Epilog, with Slurm's record of the job in it,
  and gpulib diagnose reads that record; a job that succeeds leaves none;
* slurmd's HealthCheckProgram drains this GPU-less node with a ``gpulib:`` reason, and resumes
  it when the checks pass on a real recorded capture of a healthy 8-GPU node; a drain set by
  someone else is never resumed;
* ``srun`` fan-out of ``gpulib collect --out DIR/%h`` writes one bundle per node.
"""

from __future__ import annotations

import json
import re

import pytest

from gpulib.evidence.bundle import Bundle, verify

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(400)]

HEALTHY = "nvidia-smi/thamada/H100SXMx8__nvidia-smi-q.txt"  # 8 GPUs, nothing pending
REMAP_PENDING = "nvidia-smi/thamada/A100SXMx4__nvidia-smi-q.txt"  # GPU 1: remap pending (correctable): a warning
XID_119 = "kernel/gpud/dmesg-with-xid-119.log"  # a kernel log with Xid 119 (GSP timeout): no-go


def _epilog_lines(cluster) -> list[dict]:
    if not cluster.epilog_log.is_file():
        return []
    return [json.loads(line) for line in cluster.epilog_log.read_text().splitlines() if line.strip()]


def _epilog_of(cluster, job_id: str) -> dict:
    return cluster.wait_for(f"the epilog of job {job_id}",
                            lambda: next((r for r in _epilog_lines(cluster) if r["job_id"] == job_id), None), 120)


def _sbatch(cluster, tmp_path, script: str) -> str:
    out = cluster.run("sbatch", "--parsable", "-o", str(tmp_path / "slurm-%j.out"), "--wrap", script).stdout
    return out.strip().split(";")[0]


def test_failed_job_leaves_a_bundle_captured_by_the_epilog(cluster, tmp_path):
    job_id = _sbatch(cluster, tmp_path, "echo starting; echo 'RuntimeError: CUDA error: an illegal memory access'"
                                        " >&2; false")
    record = _epilog_of(cluster, job_id)
    assert record["action"] == "captured", record
    assert record["why"] == "Reason=NonZeroExitCode" and record["job_state"] == "COMPLETING"
    bundle = cluster.evidence_dir / job_id / cluster.node
    assert record["bundle"] == str(bundle)
    assert verify(bundle).ok and Bundle.open(bundle).host == cluster.node
    job_text = (bundle / "slurm" / "scontrol-show-job.txt").read_text()
    assert re.search(rf"JobId={job_id}\b", job_text) and "ExitCode=1:0" in job_text
    assert "Nodes=" in job_text  # -d: the per-node detail line
    copied = [p.name for p in (bundle / "logs").rglob("*") if p.is_file()]
    assert f"slurm-{job_id}.out" in copied  # the job's own output (StdOut) travels with the bundle
    statuses = {c.name: c.status for c in Bundle.open(bundle).collectors}
    assert statuses["slurm-job"] == "ok"
    diag = cluster.gpulib("diagnose", str(bundle), "--format", "json")
    doc = json.loads(diag.stdout)
    kinds = {i["path"].split("/")[-1]: i["kind"] for i in doc["inputs"]}
    assert kinds["scontrol-show-job.txt"] == "slurm_job" and kinds["sinfo-R.txt"] == "slurm_sinfo"
    assert any(f["id"].startswith("slurm-job-failed") and "exit code 1" in f["title"] for f in doc["findings"])
    assert doc["verdict"]["interruption"] != "none"


def test_srun_step_that_fails_is_captured_and_a_good_job_is_not(cluster, tmp_path):
    bad = cluster.run("srun", "-N1", "-n1", "sh", "-c", "exit 7", check=False)
    assert bad.returncode == 7
    jobs = cluster.wait_for("the srun job to be listed",
                            lambda: [r for r in _epilog_lines(cluster) if r["why"].startswith(("ExitCode=7",
                                                                                               "Reason="))], 60)
    srun_record = next(r for r in jobs if r["why"] in ("Reason=NonZeroExitCode", "ExitCode=7:0"))
    assert srun_record["action"] == "captured"
    good = _sbatch(cluster, tmp_path, "echo fine")
    record = _epilog_of(cluster, good)
    assert record["action"] == "skipped" and "ended well" in record["why"]
    assert not (cluster.evidence_dir / good).exists()


def test_healthcheck_drains_the_gpu_less_node_and_resumes_it_when_checks_pass(cluster, recorded):
    # slurmd runs the HealthCheckProgram every 5 s: first on a live capture of this GPU-less node
    cluster.set_healthcheck("")
    def drained():
        state = cluster.node_state()
        return state if "drain" in state[0] else None

    _state, reason = cluster.wait_for("gpulib to drain the node", drained, 90)
    assert reason.startswith("gpulib: no GPU visible"), reason
    sinfo = cluster.run("sinfo", "-R", "-h", "-o", "%E|%N").stdout
    assert f"gpulib: no GPU visible: no nvidia-smi or NVML snapshot lists one|{cluster.node}" in sinfo
    # then on a real recorded capture of a healthy 8-GPU node: the checks pass, gpulib's drain is lifted
    cluster.set_healthcheck(f"--evidence {recorded / HEALTHY}")
    cluster.wait_for("gpulib to resume the node", lambda: "drain" not in cluster.node_state()[0], 90)
    log = cluster.healthcheck_log.read_text()
    assert "no-go; drained: gpulib: no GPU visible" in log and "go; resumed" in log


def test_healthcheck_replays_recorded_outputs_and_leaves_other_drains_alone(cluster, recorded):
    node = cluster.node
    no_go = cluster.gpulib("slurm", "healthcheck", "--gpus", "0", "--evidence", str(recorded / XID_119))
    assert no_go.returncode == 3, no_go.stdout + no_go.stderr
    state, reason = cluster.node_state()
    assert "drain" in state and reason.startswith("gpulib: Xid 119"), reason
    # same verdict again: the drain stays, nothing is re-issued
    again = cluster.gpulib("slurm", "healthcheck", "--gpus", "0", "--evidence", str(recorded / XID_119))
    assert again.returncode == 3 and "still drained" in again.stdout
    # go with a warning (a pending remap for a correctable error): gpulib's drain is lifted, exit 1
    warn = cluster.gpulib("slurm", "healthcheck", "--evidence", str(recorded / REMAP_PENDING))
    assert warn.returncode == 1 and "resumed" in warn.stdout and "row remap pending" in warn.stdout
    assert "drain" not in cluster.node_state()[0]
    # an operator's own drain: a passing check never resumes it, a failing one never rewrites it
    cluster.run("scontrol", "update", f"nodename={node}", "state=drain", "reason=PSU swap ticket 4411")
    assert cluster.gpulib("slurm", "healthcheck", "--evidence", str(recorded / HEALTHY)).returncode == 0
    assert cluster.node_state()[1] == "PSU swap ticket 4411"
    kept = cluster.gpulib("slurm", "healthcheck", "--gpus", "0", "--evidence", str(recorded / XID_119))
    assert kept.returncode == 3 and "already drained by someone else" in kept.stdout
    assert cluster.node_state()[1] == "PSU swap ticket 4411"
    # --gpus 0 declares a node without GPUs: the live check of this node passes
    cluster.run("scontrol", "update", f"nodename={node}", "state=resume")
    assert cluster.gpulib("slurm", "healthcheck", "--gpus", "0").returncode in (0, 1)
    assert "drain" not in cluster.node_state()[0]


def test_healthcheck_without_slurmctld_changes_nothing(cluster, recorded, tmp_path):
    env_conf = tmp_path / "slurm.conf"  # a config naming a controller nobody listens on
    env_conf.write_text((cluster.root / "slurm.conf").read_text().replace("SlurmctldPort=", "SlurmctldPort=1"))
    result = cluster.run("sh", "-c", f"SLURM_CONF={env_conf} {_py()} -m gpulib slurm healthcheck --timeout 20 "
                                     f"--evidence {recorded / XID_119}", check=False, timeout_s=90)
    assert result.returncode == 5, result.stdout + result.stderr
    assert "cannot read the node from Slurm" in result.stdout
    assert "drain" not in cluster.node_state()[0]


def test_srun_fan_out_of_collect(cluster, tmp_path):
    out = tmp_path / "inc-42"
    out.mkdir()
    script = f"srun --ntasks-per-node=1 {_py()} -m gpulib collect --out {out}/%h --slurm-job $SLURM_JOB_ID"
    job_id = _sbatch(cluster, tmp_path, script)
    cluster.wait_for(f"job {job_id} to end", lambda: cluster.job_state(job_id) in ("COMPLETED", "FAILED"), 180, 1)
    assert cluster.job_state(job_id) == "COMPLETED", (tmp_path / f"slurm-{job_id}.out").read_text()
    bundles = sorted(p.name for p in out.iterdir())
    import socket

    assert bundles == [socket.gethostname()]
    bundle = out / bundles[0]
    assert verify(bundle).ok
    assert "JobState=RUNNING" in (bundle / "slurm" / "scontrol-show-job.txt").read_text()


def _py() -> str:
    import sys

    return sys.executable
