import json

import pytest

from gpulib.errors import BundleError
from gpulib.evidence.bundle import FORMAT, Bundle, BundleWriter, CollectorRecord, verify


def _bundle(tmp_path):
    with BundleWriter(tmp_path / "node-a", host="node-a", command_line=["gpulib", "collect"]) as b:
        b.write_text("kernel/dmesg.txt", "[  1.0] hello\n")
        b.record(CollectorRecord("dmesg", "ok", seconds=0.1, files=["kernel/dmesg.txt"]))
        b.record(CollectorRecord("nvml", "unavailable", reason="no NVIDIA driver"))
    return tmp_path / "node-a"


def test_manifest_is_complete_and_written_last(tmp_path):
    root = _bundle(tmp_path)
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["format"] == FORMAT and manifest["host"] == "node-a"
    assert manifest["captured_at"].endswith("Z")
    assert manifest["files"]["kernel/dmesg.txt"]["bytes"] == 14
    assert [c["status"] for c in manifest["collectors"]] == ["ok", "unavailable"]
    assert not list(tmp_path.glob(".*partial*")), "temporary directory must be renamed away"
    assert Bundle.open(root).collectors[1].reason == "no NVIDIA driver"


def test_verify_catches_one_changed_byte(tmp_path):
    root = _bundle(tmp_path)
    assert verify(root).ok
    path = root / "kernel" / "dmesg.txt"
    data = bytearray(path.read_bytes())
    data[3] ^= 0x01
    path.write_bytes(bytes(data))
    report = verify(root)
    assert report.changed == ["kernel/dmesg.txt"] and not report.ok


def test_verify_reports_missing_and_unexpected(tmp_path):
    root = _bundle(tmp_path)
    (root / "kernel" / "dmesg.txt").unlink()
    (root / "extra.txt").write_text("x")
    report = verify(root)
    assert report.missing == ["kernel/dmesg.txt"] and report.unexpected == ["extra.txt"]


def test_existing_bundle_is_never_overwritten(tmp_path):
    _bundle(tmp_path)
    with pytest.raises(BundleError, match="never overwritten"):
        BundleWriter(tmp_path / "node-a")


def test_failed_capture_keeps_partial_data_under_temporary_name(tmp_path):
    with pytest.raises(RuntimeError):
        with BundleWriter(tmp_path / "node-b") as b:
            b.write_text("a.txt", "evidence")
            raise RuntimeError("collector crashed")
    assert not (tmp_path / "node-b").exists()
    (partial,) = tmp_path.glob(".node-b.partial-*")
    assert (partial / "a.txt").read_text() == "evidence"


def test_open_rejects_non_bundle(tmp_path):
    with pytest.raises(BundleError, match="no manifest.json"):
        Bundle.open(tmp_path)


def test_open_names_the_wrong_format_and_the_folder(tmp_path):
    (tmp_path / "manifest.json").write_text('{"format": "gpulib.runbook-run/1"}')
    with pytest.raises(BundleError, match="unknown bundle format 'gpulib.runbook-run/1', expected gpulib-evidence/1") as err:
        Bundle.open(tmp_path)
    assert err.value.path == str(tmp_path)
    (tmp_path / "manifest.json").write_text("[1, 2]")  # valid JSON, not an object
    with pytest.raises(BundleError, match="unknown bundle format None"):
        Bundle.open(tmp_path)


def test_a_bundle_is_not_a_run_archive(tmp_path):
    from gpulib.runbooks.archive import ArchivedRun
    from gpulib.runbooks.spec import RunbookError

    root = _bundle(tmp_path)
    with pytest.raises(RunbookError, match="unknown run archive format 'gpulib-evidence/1'"):
        ArchivedRun.open(root)


def test_a_file_name_outside_the_bundle_is_refused_and_named(tmp_path):
    with BundleWriter(tmp_path / "node-a", host="node-a", command_line=[]) as b:
        with pytest.raises(BundleError, match=r"path escapes the bundle: '\.\./evil\.txt'") as err:
            b.write_text("../evil.txt", "x")
        b.record(CollectorRecord("dmesg", "ok"))
    assert err.value.path == str(tmp_path / "node-a") and "no '..'" in str(err.value)
    assert not (tmp_path / "evil.txt").exists()
