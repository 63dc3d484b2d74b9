"""Runs chained by their manifests: a run whose findings were edited and re-hashed in its own
manifest is caught by the run archived after it (`archive show` refuses to list its findings,
`archive diff` refuses to compare it); archives written before the chain read as unchained.
Runs are written with the real ArchiveWriter; no notebook runs."""

from __future__ import annotations

import json
import os

from gpulib.cli import main
from gpulib.evidence.bundle import MANIFEST, sha256_file
from gpulib.runbooks.archive import ArchivedRun
from tests.runbooks.test_archive_cli import archived, xid


def _forge(run: ArchivedRun, findings: list[dict]) -> None:
    """What an editor with write access does: new findings, their hash put into the manifest."""
    target = run.path / "findings.json"
    os.chmod(target, 0o644)
    target.write_text(json.dumps({"format": "gpulib.runbook-findings/1", "findings": findings}))
    manifest = json.loads((run.path / MANIFEST).read_text())
    manifest["files"]["findings.json"] = {"sha256": sha256_file(target), "bytes": target.stat().st_size}
    os.chmod(run.path / MANIFEST, 0o644)
    (run.path / MANIFEST).write_text(json.dumps(manifest, indent=2))


def test_each_run_links_the_manifest_of_the_run_before_it(tmp_path, capsys):
    first = archived(tmp_path, "/shared/inc-7", [xid("gpu-q1")])
    second = archived(tmp_path, "/shared/inc-7", [xid("gpu-q1")])
    assert first.manifest["chain"] == {"previous": None, "previous_manifest_sha256": None}
    assert second.manifest["chain"] == {"previous": first.path.name,
                                        "previous_manifest_sha256": sha256_file(first.path / MANIFEST)}
    assert main(["archive", "show", str(second.path)]) == 0
    out = capsys.readouterr().out
    assert "chain: verified back 1 run(s) to the first chained run" in out
    assert f"manifest sha256: {sha256_file(second.path / MANIFEST)}" in out


def test_findings_edited_and_rehashed_are_caught_by_the_next_run(tmp_path, capsys):
    older = archived(tmp_path, "/shared/inc-9", [xid("gpu-q2")])
    newer = archived(tmp_path, "/shared/inc-9", [xid("gpu-q2")])
    _forge(older, [])  # "nothing was wrong": the Xid is gone, and the run verifies against itself
    assert ArchivedRun.open(older.path).verify().ok  # what the per-run re-hash alone cannot see
    assert main(["archive", "show", str(older.path)]) == 1
    out = capsys.readouterr().out
    assert "REFUSED: this run was changed after it was archived" in out and f"chain BROKEN: {newer.path.name}" in out
    assert "Xid 79" not in out  # the forged (or any) findings are not listed
    assert main(["archive", "show", str(newer.path)]) == 1  # the newer run's link back is broken too
    assert f"{older.path.name} was changed after it was archived" in capsys.readouterr().out
    assert main(["archive", "diff", str(older.path), str(newer.path)]) == 2
    err = capsys.readouterr().err
    assert "not compared" in err and "nothing got worse" not in err


def test_the_newest_run_is_covered_only_once_a_later_run_links_to_it(tmp_path, capsys):
    """Documented limit: without a key, the newest run's edit is seen only by the next run."""
    run = archived(tmp_path, None, [xid("gpu-q3")], runbook="preflight")
    _forge(run, [])
    assert main(["archive", "show", str(run.path)]) == 0
    assert "no later run links to this one yet" in capsys.readouterr().out
    archived(tmp_path, None, [], runbook="preflight")  # links to the forged manifest as it now is
    assert main(["archive", "show", str(run.path)]) == 0


def test_an_archive_written_before_the_chain_reads_as_unchained(tmp_path, capsys):
    old = archived(tmp_path, "/shared/inc-3", [xid("gpu-q4")])
    manifest = json.loads((old.path / MANIFEST).read_text())
    del manifest["chain"]  # the older format
    os.chmod(old.path / MANIFEST, 0o644)
    (old.path / MANIFEST).write_text(json.dumps(manifest))
    assert main(["archive", "show", str(old.path)]) == 0
    assert "chain: unchained (older format)" in capsys.readouterr().out
    new = archived(tmp_path, "/shared/inc-3", [xid("gpu-q4")])
    assert main(["archive", "show", str(new.path)]) == 0
    assert f"to {old.path.name}, an unchained run (older format)" in capsys.readouterr().out
    assert main(["archive", "diff", str(old.path), str(new.path)]) == 0
