"""Issue 16's honest integrity: ``gpulib ckpt seal`` and the seal ``gpulib.checkpoints.save`` writes,
on real small torch checkpoints. A byte flipped inside tensor data keeps the size and, in a legacy
torch file, breaks no checksum of the format: only the seal sees it, and names the file."""

from __future__ import annotations

import json
import zlib

import pytest

from gpulib.checkpoints import save
from gpulib.checkpoints.files import inspect_path
from gpulib.checkpoints.latest import find_latest
from gpulib.checkpoints.seal import DIR_SEAL, SealError, check, seal
from gpulib.cli import main

torch = pytest.importorskip("torch")


def state(step: int) -> dict:
    g = torch.Generator().manual_seed(step)
    return {"model": {"w": torch.randn(512, 512, generator=g)}, "global_step": step}  # 1 MiB of tensor data


def flip_middle_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # inside the one large tensor's bytes: same size, other numbers
    path.write_bytes(bytes(data))


def test_save_writes_a_crc32_seal_that_matches_the_file(tmp_path):
    path = save(state(7), tmp_path)
    doc = json.loads((tmp_path / (path.name + ".seal.json")).read_text())
    entry = doc["files"][path.name]
    assert doc["algorithm"] == "crc32" and entry["bytes"] == path.stat().st_size
    assert entry["crc32"] == f"{zlib.crc32(path.read_bytes()):08x}"
    assert check(path, checksums=True).ok and not list(tmp_path.glob(".*.tmp"))


def test_flipped_byte_in_a_legacy_file_is_seen_only_through_the_seal(tmp_path, capsys):
    path = tmp_path / "model_legacy.pt"
    torch.save(state(3), path, _use_new_zipfile_serialization=False)
    assert main(["ckpt", "seal", str(path), "--checksum", "sha256"]) == 0
    assert (tmp_path / "model_legacy.pt.seal.json").is_file()
    flip_middle_byte(path)
    assert inspect_path(path).valid, "the format itself cannot tell"
    report = inspect_path(path, deep=True)
    assert not report.valid
    assert any(f.severity == "corrupt" and "model_legacy.pt: sha256" in f.message and "seal" in f.message
               for f in report.findings)
    capsys.readouterr()
    assert main(["ckpt", "verify", "--deep", str(path)]) == 1
    assert "differs from its seal model_legacy.pt.seal.json: model_legacy.pt" in capsys.readouterr().out


def test_sealed_legacy_file_deep_verify_says_what_it_checked(tmp_path):
    path = tmp_path / "model_legacy.pt"
    torch.save(state(3), path, _use_new_zipfile_serialization=False)
    seal(path)
    report = inspect_path(path, deep=True)
    assert report.valid and any("crc32 of 1 file(s) match" in f.message for f in report.findings)
    assert not any("carry no checksum" in f.message for f in report.findings), "the seal did check it"
    shallow = inspect_path(path)
    assert any("sizes match" in f.message and "--deep" in f.message for f in shallow.findings)


def test_latest_skips_the_newest_save_that_differs_from_its_seal(tmp_path):
    for step in (100, 200):
        save(state(step), tmp_path)
    newest = tmp_path / "ckpt_step_000000200.pt"
    flip_middle_byte(newest)
    report = find_latest([tmp_path])
    assert report.chosen.step == 100
    reason = dict((p.name, r) for p, r in report.rejected)["ckpt_step_000000200.pt"]
    assert "differs from its seal ckpt_step_000000200.pt.seal.json" in reason and "crc32" in reason
    # unsealed, the same damage goes unseen without --deep: the seal is what caught it
    (tmp_path / "ckpt_step_000000200.pt.seal.json").unlink()
    assert find_latest([tmp_path]).chosen.step == 200


def test_a_truncated_or_missing_member_of_a_sealed_folder_is_named(tmp_path):
    folder = tmp_path / "checkpoint-300"
    folder.mkdir()
    torch.save(state(1), folder / "model.pt")
    torch.save({"lr": 0.1}, folder / "optimizer.pt")
    assert seal(folder) == str(folder / DIR_SEAL)
    data = (folder / "optimizer.pt").read_bytes()
    (folder / "optimizer.pt").write_bytes(data[:-100])
    report = inspect_path(folder / "optimizer.pt")
    assert any(f"optimizer.pt: {len(data) - 100:,} bytes, sealed with {len(data):,}" in f.message for f in report.findings)
    (folder / "model.pt").unlink()
    result = check(folder, checksums=False)
    assert "model.pt: sealed but missing" in result.problems


def test_seal_errors_name_the_path(tmp_path, capsys):
    assert main(["ckpt", "seal", str(tmp_path / "nope.pt")]) == 2
    assert "nope.pt: does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(SealError, match="empty folder"):
        seal(tmp_path / "empty")
