"""gpulib.checkpoints.save: SIGKILL the writer at many points; `ckpt latest` always finds a loadable one."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from gpulib.checkpoints import save
from gpulib.checkpoints.latest import find_latest

torch = pytest.importorskip("torch")


def _state(step: int) -> dict:
    g = torch.Generator().manual_seed(step)
    return {"model": {f"layer{i}.weight": torch.randn(256, 256, generator=g) for i in range(16)},  # ~4 MiB
            "optimizer": {"state": {}, "param_groups": [{"lr": 0.1}]}, "global_step": step}


def test_save_layout_and_retention(tmp_path):
    for step in (10, 20, 30, 40):
        path = save(_state(step), tmp_path, keep=2, sha256=True)
    assert path == tmp_path / "ckpt_step_000000040.pt"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt_step_000000030.json", "ckpt_step_000000030.pt", "ckpt_step_000000030.pt.seal.json",
        "ckpt_step_000000040.json", "ckpt_step_000000040.pt", "ckpt_step_000000040.pt.seal.json", "latest"]
    manifest = json.loads((tmp_path / "ckpt_step_000000040.json").read_text())
    assert manifest["step"] == 40 and manifest["bytes"] == path.stat().st_size and len(manifest["sha256"]) == 64
    report = find_latest([tmp_path])
    assert report.resume_from == path and report.chosen.step == 40 and not report.disagreements


def test_background_save_returns_future(tmp_path):
    fut = save(_state(5), tmp_path, background=True)
    assert fut.result(timeout=60) == tmp_path / "ckpt_step_000000005.pt"


def _writer(directory: Path) -> None:  # runs in a forked child until SIGKILL
    step = int((directory / "latest").read_text()[10:19]) if (directory / "latest").exists() else 0
    while True:
        step += 1
        save(_state(step), directory, keep=2)


@pytest.mark.timeout(120)
def test_sigkill_during_saves_never_loses_the_last_good_checkpoint(tmp_path):
    rng = random.Random(3)
    verified, interrupted = 0, 0
    for _ in range(18):
        pid = os.fork()
        if pid == 0:  # child: save forever (torch is already imported, so the fork starts fast)
            try:
                _writer(tmp_path)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0.05, 0.45))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        interrupted += any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
        report = find_latest([tmp_path])
        if report.resume_from is None:
            assert verified == 0, report.to_text()  # only before the very first save completed
            continue
        loaded = torch.load(report.resume_from, weights_only=True)
        assert loaded["global_step"] == report.chosen.step >= verified
        assert torch.equal(loaded["model"]["layer3.weight"], _state(loaded["global_step"])["model"]["layer3.weight"])
        verified = report.chosen.step
    assert verified > 0
    assert interrupted >= 3, "the kills never landed inside a save: the test did not test anything"
