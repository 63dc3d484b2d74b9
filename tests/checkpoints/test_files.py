"""Single files: real torch.save / legacy / safetensors / DCP checkpoints, and every way they break."""

from __future__ import annotations

import os
import random
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

from gpulib.checkpoints import inspect_path
from gpulib.checkpoints.zipreader import read_index

torch = pytest.importorskip("torch")


def _torch_view(path: Path) -> dict:
    """Ground truth from torch itself: flattened name -> (dtype, shape)."""
    obj = torch.load(path, weights_only=False)
    out = {}

    def visit(v, p):
        if isinstance(v, torch.Tensor):
            out[p] = (str(v.dtype).replace("torch.", ""), list(v.shape))
        elif isinstance(v, dict):
            for k, x in v.items():
                visit(x, f"{p}.{k}" if p else str(k))
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                visit(x, f"{p}[{i}]")
    visit(obj, "")
    return out


def test_zip_checkpoint_lists_what_torch_loads(full_ckpt):
    report = inspect_path(full_ckpt)
    assert report.format == "torch_zip" and report.valid, report.findings
    mine = {t.name: (t.dtype, t.shape) for t in report.tensors}
    assert mine == _torch_view(full_ckpt)
    s = report.summary
    assert s.step == 120 and s.step_key == "global_step" and s.epoch == 1
    assert s.categories == ["dataloader", "model", "optimizer", "rng", "scaler", "scheduler"]
    assert s.rng_kinds == ["cuda", "numpy", "python", "torch"] and s.cuda_rng_devices == 2
    assert s.model_prefix == "module."
    assert report.values["optimizer.param_groups[0].lr"] == pytest.approx(1e-3 * 1)  # StepLR(10) after 1 step
    assert report.values["rng_state.numpy[1]"] == "ndarray[624] u4"
    assert any(f.severity == "needs_allowlist" and "numpy._core.multiarray._reconstruct" in f.message for f in report.findings)


def test_legacy_format_matches_zip(full_ckpt, legacy_ckpt):
    legacy = inspect_path(legacy_ckpt)
    assert legacy.format == "torch_legacy" and legacy.valid, legacy.findings
    assert [(t.name, t.dtype, t.shape) for t in legacy.tensors] == [
        (t.name, t.dtype, t.shape) for t in inspect_path(full_ckpt).tensors]


def test_legacy_truncated(legacy_ckpt, tmp_path):
    data = legacy_ckpt.read_bytes()
    for cut in (len(data) // 2, len(data) - 1, 1024):
        p = tmp_path / f"legacy_{cut}.pt"
        p.write_bytes(data[:cut])
        r = inspect_path(p)
        assert not r.valid, cut
        assert any("truncat" in m or "ends before" in m for m in r.reasons()), r.reasons()


def test_truncation_sweep_200_points(full_ckpt, tmp_path):
    """Cut a real checkpoint at 200 points: every cut is reported invalid with a reason, nothing raises."""
    data = full_ckpt.read_bytes()
    p = tmp_path / "cut.pt"
    for cut in sorted({int(len(data) * i / 200) for i in range(200)} | {len(data) - 1}):
        p.write_bytes(data[:cut])
        r = inspect_path(p)
        assert not r.valid, f"cut at {cut} of {len(data)} reported valid"
        assert r.reasons(), cut
        if cut > 22:
            assert any("truncated: no zip end record" in m for m in r.reasons()), (cut, r.reasons())


@pytest.mark.parametrize("crc_impl", ["default", "stdlib_zlib"])
def test_zeroed_block_needs_deep(full_ckpt, tmp_path, monkeypatch, crc_impl):
    """torch.load accepts a zeroed block inside a tensor payload; only the CRC check finds it
    (with zlib-ng's CRC when installed, and with the stdlib fallback)."""
    if crc_impl == "stdlib_zlib":
        import zlib

        from gpulib.checkpoints import zipreader
        monkeypatch.setattr(zipreader, "crc32", zlib.crc32)
    p = tmp_path / "zeroed.pt"
    shutil.copy(full_ckpt, p)
    with open(p, "rb") as fh:
        index = read_index(str(p), fh.fileno())
        from gpulib.checkpoints.zipreader import locate_data
        members, _ = locate_data(fh.fileno(), index)
    big = max((m for m in members if "/data/" in m.name), key=lambda m: m.size_bytes)
    with open(p, "r+b") as fh:
        fh.seek(big.data_offset + 8)
        fh.write(b"\0" * min(64, big.size_bytes - 8))
    torch.load(p, weights_only=False)  # loads "fine": the damage is silent
    assert inspect_path(p).valid
    deep = inspect_path(p, deep=True)
    assert not deep.valid
    assert any(big.name in m and "CRC-32" in m for m in deep.reasons()), deep.reasons()


def test_random_byte_flips_never_crash(full_ckpt, tmp_path):
    data = bytearray(full_ckpt.read_bytes())
    rng = random.Random(7)
    p = tmp_path / "flip.pt"
    caught = 0
    for _ in range(60):
        copy = bytearray(data)
        pos = rng.randrange(len(copy))
        copy[pos] ^= 0xFF
        p.write_bytes(bytes(copy))
        r = inspect_path(p, deep=True)
        caught += not r.valid
    assert caught >= 50  # flips in zip padding/extra fields are harmless; payload flips are caught


def test_storage_shorter_than_declared(full_ckpt, tmp_path):
    """Rewrite the archive with one storage cut short: 'storage K has X of Y bytes'."""
    p = tmp_path / "short.pt"
    with zipfile.ZipFile(full_ckpt) as src, zipfile.ZipFile(p, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/data/0"):
                data = data[: len(data) // 4]
            dst.writestr(info.filename, data)
    r = inspect_path(p)
    assert not r.valid
    want = inspect_path(full_ckpt).tensors[0].nbytes
    assert f"storage 0 has {want // 4:,} of {want:,} bytes" in " ".join(r.reasons())


def _sparse_zip64(path: Path, members: list[tuple[str, bytes | int]]) -> None:
    """Write a ZIP64 archive by hand; an int member is a sparse hole of that many zero bytes."""
    import zlib
    central, pos = b"", 0
    with open(path, "wb") as fh:
        for name, data in members:
            size = data if isinstance(data, int) else len(data)
            crc = 0 if isinstance(data, int) else zlib.crc32(data)
            raw = name.encode()
            local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 45, 0, 0, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(raw), 20)
            fh.write(local + raw + struct.pack("<2H2Q", 1, 16, size, size))
            if isinstance(data, int):
                fh.seek(size, os.SEEK_CUR)
            else:
                fh.write(data)
            central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 45, 45, 0, 0, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                                   len(raw), 28, 0, 0, 0, 0, 0xFFFFFFFF) + raw + struct.pack("<2H3Q", 1, 24, size, size, pos)
            pos = fh.tell()
        fh.write(central)
        z64 = fh.tell()
        fh.write(struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, len(members), len(members), len(central), pos))
        fh.write(struct.pack("<4sLQL", b"PK\x06\x07", 0, z64, 1))
        fh.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))


def test_zip64_members_beyond_4gib(tmp_path):
    """A 5 GiB storage (sparse) followed by data.pkl past 4 GiB: ZIP64 sizes and offsets are honoured."""
    import collections
    import io
    import pickle

    big = 5 << 30

    class Tensor:
        def __reduce__(self):
            return torch._utils._rebuild_tensor_v2, ("STORAGE", 0, (big,), (1,), False, collections.OrderedDict())

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.ByteStorage, "0", "cpu", big) if obj == "STORAGE" else None

    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump({"w": Tensor()})
    p = tmp_path / "huge.pt"
    _sparse_zip64(p, [("huge/data/0", big), ("huge/data.pkl", buf.getvalue()), ("huge/byteorder", b"little")])
    with open(p, "rb") as fh:
        index = read_index(str(p), fh.fileno())
    assert index.zip64
    assert {m.name: m.size_bytes for m in index.members}["huge/data/0"] == big
    assert {m.name: m.header_offset for m in index.members}["huge/data.pkl"] > big
    r = inspect_path(p)
    assert r.valid, r.findings
    assert [(t.name, t.dtype, t.shape, t.nbytes) for t in r.tensors] == [("w", "uint8", [big], big)]


@pytest.mark.parametrize(("content", "expect"), [
    (b"", "empty file (0 bytes)"),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n", "git-lfs pointer"),
    (b"<!DOCTYPE html><html>quota exceeded</html>", "HTML"),
    (b"\0" * 4096, "starts with zero bytes"),
    (bytes(range(7, 255)) * 3, "unknown format"),
    (b"PK\x03\x04" + b"\x01" * 100, "truncated: no zip end record"),
])
def test_junk_gets_a_clear_reason(tmp_path, content, expect):
    p = tmp_path / "model.pt"
    p.write_bytes(content)
    r = inspect_path(p)
    assert not r.valid
    assert any(expect in m for m in r.reasons()), r.reasons()


def test_missing_and_directory(tmp_path):
    assert "does not exist" in inspect_path(tmp_path / "nope.pt").reasons()[0]
    d = tmp_path / "model.pt"
    d.mkdir()
    assert "a directory, not a checkpoint file" in inspect_path(d).reasons()[0]


def test_permission_denied(full_ckpt, tmp_path, run_without_root_read):
    """``gpulib ckpt verify`` of an unreadable copy, in a child that cannot bypass file permissions."""
    p = tmp_path / "locked.pt"
    shutil.copy(full_ckpt, p)
    p.chmod(0o000)
    try:
        out = run_without_root_read(f"import sys; from gpulib.cli import main; sys.exit(main(['ckpt', 'verify', {str(p)!r}]))")
    finally:
        p.chmod(0o644)
    assert out.returncode == 2, out.stderr  # an unreadable path is a usage/input error (gpulib.exit_codes)
    assert f"{p}: cannot be read: Permission denied" in out.stderr
    assert inspect_path(p).valid  # root, in this process: the library itself still reads it


def test_safetensors_valid_and_truncated(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    p = tmp_path / "model.safetensors"
    st.save_file({"w": torch.zeros(16, 8, dtype=torch.bfloat16), "b": torch.ones(8)}, str(p))
    r = inspect_path(p)
    assert r.format == "safetensors" and r.valid, r.findings
    assert {(t.name, t.dtype, tuple(t.shape), t.nbytes) for t in r.tensors} == {("w", "BF16", (16, 8), 256),
                                                                              ("b", "F32", (8,), 32)}
    data = p.read_bytes()
    for cut, expect in ((len(data) - 5, "incomplete metadata, file not fully covered"), (20, "invalid header length"),
                        (4, "header too small")):
        q = tmp_path / f"cut{cut}.safetensors"
        q.write_bytes(data[:cut])
        r = inspect_path(q)
        if cut == 4:  # 4 bytes cannot be recognised as safetensors: reported as junk instead
            assert not r.valid
            continue
        assert not r.valid and any(expect in m for m in r.reasons()), r.reasons()


def test_dcp_directory(dcp_ckpt, tmp_path):
    r = inspect_path(dcp_ckpt)
    assert r.format == "dcp" and r.valid, r.findings
    names = {t.name for t in r.tensors}
    assert "model.proj.weight" in names and "optimizer.0.exp_avg" in names
    assert r.summary.step == 40
    assert {"model", "optimizer", "dataloader"} <= set(r.summary.categories)
    assert inspect_path(dcp_ckpt, deep=True).valid

    broken = tmp_path / "dcp"
    shutil.copytree(dcp_ckpt, broken)
    shard = sorted(broken.glob("*.distcp"))[0]
    with open(shard, "r+b") as fh:
        fh.truncate(shard.stat().st_size // 2)
    assert any(f"shard {shard.name} has" in m and "truncated" in m for m in inspect_path(broken).reasons())
    shard.unlink()
    assert any(f"shard {shard.name} is missing" in m for m in inspect_path(broken).reasons())
    (broken / ".metadata").rename(broken / ".metadata.tmp")
    reasons = inspect_path(broken).reasons()
    assert any(".metadata.tmp left behind" in m for m in reasons) and any("no .metadata" in m for m in reasons)


def test_dcp_zeroed_item_found_by_deep(dcp_ckpt, tmp_path):
    broken = tmp_path / "dcp"
    shutil.copytree(dcp_ckpt, broken)
    shard = sorted(broken.glob("*.distcp"))[0]
    data = bytearray(shard.read_bytes())
    head = data.rfind(b"PK\x03\x04", 0, data.find(b"/data/0"))
    name_len, extra_len = struct.unpack_from("<2H", data, head + 26)
    payload = head + 30 + name_len + extra_len
    data[payload : payload + 4] = bytes(b ^ 0xFF for b in data[payload : payload + 4])  # silent bit rot
    shard.write_bytes(bytes(data))
    assert inspect_path(broken).valid
    assert any("CRC-32" in m for m in inspect_path(broken, deep=True).reasons())


def test_cli_exit_codes(full_ckpt, tmp_path, capsys):
    from gpulib.cli import main
    assert main(["ckpt", "verify", str(full_ckpt)]) == 0
    bad = tmp_path / "bad.pt"
    bad.write_bytes(full_ckpt.read_bytes()[:-100])
    assert main(["ckpt", "verify", "--deep", str(bad)]) == 1
    assert "INVALID" in capsys.readouterr().out
    assert main(["ckpt", "inspect", "--format", "json", str(full_ckpt)]) == 0
    import json
    doc = json.loads(capsys.readouterr().out)
    assert doc[0]["summary"]["step"] == 120 and doc[0]["tensors"]


def test_header_struct_sanity():
    assert struct.calcsize("<4s4H2LH") == 22


def test_chunked_crc_combination(full_ckpt, tmp_path, monkeypatch):
    """Members bigger than one read chunk are CRC'd in pieces and joined with crc32_combine."""
    import zlib

    from gpulib.checkpoints import zipreader
    monkeypatch.setattr(zipreader, "CHUNK_BYTES", 100)  # every storage spans several chunks
    assert zipreader._chunks(250) == [(0, 50), (50, 100), (150, 100)]
    a, b = os.urandom(777), os.urandom(100)
    assert zipreader.crc32_combine(zlib.crc32(a), zlib.crc32(b), 100) == zlib.crc32(a + b)
    assert inspect_path(full_ckpt, deep=True).valid
    with open(full_ckpt, "rb") as fh:
        members, _ = zipreader.locate_data(fh.fileno(), read_index(str(full_ckpt), fh.fileno()))
    big = max(members, key=lambda m: m.size_bytes)
    assert big.size_bytes > 300
    p = tmp_path / "rot.pt"
    data = bytearray(full_ckpt.read_bytes())
    data[big.data_offset + big.size_bytes - 7] ^= 0x01  # in the last chunk of the member
    p.write_bytes(bytes(data))
    assert any(big.name in m for m in inspect_path(p, deep=True).reasons())


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_archive_is_flagged(tmp_path):
    p = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(p))
    r = inspect_path(p)
    assert r.format == "torchscript"
    assert any("torch.jit.load, which runs its code" in f.message for f in r.findings if f.severity == "unsafe")
