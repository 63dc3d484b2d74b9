"""Hostile seal sidecars: a malformed entry is a named problem (never a traceback), and an entry that
names a path outside the sealed folder is refused without being opened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulib.checkpoints import inspect_path
from gpulib.checkpoints.latest import find_latest
from gpulib.checkpoints.seal import DIR_SEAL, seal
from gpulib.cli import main

torch = pytest.importorskip("torch")


def _sealed_run(tmp_path: Path) -> Path:
    """An HF Trainer-style run with one good checkpoint folder, sealed."""
    run = tmp_path / "run"
    ckpt = run / "checkpoint-100"
    ckpt.mkdir(parents=True)
    torch.save({"w": torch.zeros(4)}, ckpt / "pytorch_model.bin")
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 100}))
    seal(ckpt)
    return run


def _edit(run: Path, change) -> None:
    p = run / "checkpoint-100" / DIR_SEAL
    doc = json.loads(p.read_text())
    text = change(doc)
    p.write_text(text if isinstance(text, str) else json.dumps(doc))


@pytest.mark.parametrize(("name", "change", "named"), [
    ("bytes_is_text", lambda d: d["files"]["pytorch_model.bin"].update(bytes="x"), "'bytes' is 'x', not a byte count"),
    ("entry_is_a_list", lambda d: d["files"].update({"pytorch_model.bin": [1, 2]}), "a JSON list, not an object"),
    ("deep_json", lambda d: '{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ("bytes_is_bool", lambda d: d["files"]["pytorch_model.bin"].update(bytes=True), "not a byte count"),
])
def test_a_malformed_seal_is_a_named_problem(tmp_path, capsys, name, change, named):
    run = _sealed_run(tmp_path)
    _edit(run, change)
    report = inspect_path(run / "checkpoint-100" / "pytorch_model.bin", deep=True)
    assert not report.valid and any(named in f.message for f in report.findings), [f.message for f in report.findings]
    latest = find_latest([run], deep=True)
    assert latest.chosen is None and named in latest.to_text(), latest.to_text()
    assert main(["ckpt", "latest", "--deep", str(run)]) == 1
    assert "Traceback" not in capsys.readouterr().out


@pytest.mark.parametrize("outside", ["../../outside.bin", "/etc/hostname", "sub/../../x", "./pytorch_model.bin"])
def test_a_seal_entry_outside_the_folder_is_refused_not_opened(tmp_path, outside):
    run = _sealed_run(tmp_path)
    (tmp_path / "outside.bin").write_bytes(b"not what the seal says")
    _edit(run, lambda d: d["files"].update({outside: {"bytes": 1, "crc32": "00000000"}}))
    latest = find_latest([run], deep=True)
    assert latest.chosen is not None and latest.chosen.name == "checkpoint-100", latest.to_text()
    assert f"lists {outside!r}, a path outside the sealed folder: refused, not opened" in latest.to_text()
