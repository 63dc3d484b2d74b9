"""The Epilog runs as root and writes DIR/<jobid>/<node>: a job id or node name from the
environment must never lead the bundle out of DIR; the health check drains the node it runs on,
so it judges only that node's evidence. No Slurm needed: every refusal comes before scontrol
matters (without scontrol, the epilog environment's exit code decides, as documented)."""

from __future__ import annotations

import json

import pytest

from gpulib.cli import main
from gpulib.errors import InputError
from gpulib.slurm.epilog import run_epilog
from gpulib.slurm.healthcheck import run_healthcheck
from gpulib.slurm.names import inside, unsafe_reason

FAILED_JOB = {"SLURM_JOB_EXIT_CODE2": "1:0", "PATH": "/nonexistent"}  # no scontrol: the env decides


@pytest.mark.parametrize("value", ["../x", "/etc", "a/b", "..", ".", "-rf", "node b", "gpu;reboot", ""])
def test_names_that_are_not_one_plain_component_are_refused(value):
    assert unsafe_reason(value)


@pytest.mark.parametrize("value", ["88231", "gpu-a17", "node01.rack3", "n_7"])
def test_slurm_ids_and_node_names_pass(value):
    assert unsafe_reason(value) is None


@pytest.mark.parametrize(("job", "node"), [("../x", "gpu-c3"), ("/tmp/elsewhere", "gpu-c3"), ("551", "../../up"),
                                           ("551", "rack/gpu-c3")])
def test_epilog_writes_nothing_for_a_hostile_job_id_or_node(tmp_path, job, node):
    out = tmp_path / "evidence"
    out.mkdir()
    outcome = run_epilog(out, {**FAILED_JOB, "SLURM_JOB_ID": job}, node=node, budget_s=5)
    assert outcome.action == "error" and outcome.exit_code == 2 and "misconfigured" in outcome.why, outcome
    assert repr(job if unsafe_reason(job) else node) in outcome.why
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["evidence"]  # nothing written anywhere


def test_a_job_folder_replaced_by_a_link_out_of_dir_is_not_followed(tmp_path):
    out, outside = tmp_path / "evidence", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "552").symlink_to(outside)
    outcome = run_epilog(out, {**FAILED_JOB, "SLURM_JOB_ID": "552"}, node="gpu-c4", budget_s=5)
    assert outcome.action == "error" and "leads outside" in outcome.why and outcome.bundle is None, outcome
    assert list(outside.iterdir()) == []
    with pytest.raises(ValueError, match="leads outside"):
        inside(out, "552")


def _bundle(root, host: str):
    """A gpulib-evidence/1 bundle of ``host`` with a kernel log that names it and an Xid 79."""
    root.mkdir(parents=True)
    (root / "kernel").mkdir()
    (root / "kernel" / "dmesg.txt").write_text(
        f"2026-05-06T07:08:09+0000 {host} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=3131, name=python3, "
        "GPU has fallen off the bus.\n")
    (root / "manifest.json").write_text(json.dumps({
        "format": "gpulib-evidence/1", "host": host, "captured_at": "2026-05-06T07:10:00Z", "timezone": "UTC",
        "collectors": [], "files": {}}))
    return root


def test_healthcheck_refuses_another_hosts_bundle(tmp_path, capsys):
    other = _bundle(tmp_path / "gpu-z9", "gpu-z9")
    with pytest.raises(InputError, match=r"the evidence is of gpu-z9, not of this node \(gpu-c5\)"):
        run_healthcheck({"PATH": "/nonexistent"}, node="gpu-c5", evidence=other, dry_run=True, budget_s=8)
    assert main(["slurm", "healthcheck", "--node", "gpu-c5", "--evidence", str(other), "--dry-run"]) == 2
    assert "would drain gpu-c5 for another host's fault" in capsys.readouterr().err
    # its own node's bundle is judged: a no-go (Xid 79), which a dry run only reports
    own = run_healthcheck({"PATH": "/nonexistent"}, node="gpu-z9", evidence=other, dry_run=True, budget_s=8)
    assert own.exit_code == 3 and "would drain" in own.message


@pytest.mark.parametrize("kind", ["fifo", "device", "binary"])
def test_healthcheck_on_evidence_it_cannot_read_changes_nothing(tmp_path, capsys, kind):
    path = tmp_path / "evidence.log"
    if kind == "fifo":
        import os
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(bytes(range(256)) * 64)
    assert main(["slurm", "healthcheck", "--node", "gpu-c6", "--evidence", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "would drain" not in err


def test_healthcheck_refuses_a_node_name_that_is_not_plain(capsys):
    assert main(["slurm", "healthcheck", "--node", "../../tmp/x", "--dry-run"]) == 2
    assert "is not a plain name" in capsys.readouterr().err
