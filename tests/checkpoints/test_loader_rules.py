"""What each framework's loader really opens, one test per defect found by damaging real checkpoints
(HF Trainer, accelerate, Lightning, DCP; see test_real_frameworks.py for the same cases resumed by the
frameworks themselves). Files here are written by torch / safetensors, no framework needed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from gpulib.checkpoints import inspect_path
from gpulib.checkpoints.latest import find_latest
from tests.checkpoints.conftest import training_state
from tests.checkpoints.test_latest import _hf_checkpoint, _lightning, _reason, _save, _truncate

torch = pytest.importorskip("torch")
st = pytest.importorskip("safetensors.torch")


# --- HF Trainer ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["[]", "null", '"x"', "", '{"global_step": 2'])
def test_hf_trainer_state_json_not_an_object_is_rejected_not_a_crash(tmp_path, text):
    """TrainerState(**json.load(f)) raises on anything but a JSON object; `latest` crashed on [] / null."""
    _hf_checkpoint(tmp_path / "checkpoint-1", 1, ranks=(0,))
    bad = _hf_checkpoint(tmp_path / "checkpoint-2", 2, ranks=(0,))
    (bad / "trainer_state.json").write_text(text)
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint-1"
    assert "trainer_state.json unreadable" in _reason(report, "checkpoint-2")


def test_hf_config_json_damaged_is_unresumable(tmp_path):
    """Trainer._load_from_checkpoint opens config.json whenever it is there: truncated, the resume raises."""
    good = _hf_checkpoint(tmp_path / "checkpoint-1", 1, ranks=(0,))
    (good / "config.json").write_text(json.dumps({"model_type": "gpt2", "transformers_version": "5.0.0"}))
    bad = _hf_checkpoint(tmp_path / "checkpoint-2", 2, ranks=(0,))
    (bad / "config.json").write_text('{"model_type": "gp')
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint-1"
    assert "config.json unreadable" in _reason(report, "checkpoint-2")


def test_hf_optimizer_without_scheduler_is_not_loaded(tmp_path):
    """Trainer restores optimizer.pt and scheduler.pt only as a pair: with scheduler.pt missing it loads
    neither, so a truncated optimizer.pt does not stop the resume - and the optimizer state is lost."""
    d = _hf_checkpoint(tmp_path / "checkpoint-2", 2, ranks=(0,))
    _hf_checkpoint(tmp_path / "checkpoint-1", 1, ranks=(0,))
    (d / "scheduler.pt").unlink()
    _truncate(d / "optimizer.pt")
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint-2", report.to_text()
    assert any(x.startswith("no optimizer state") for x in report.lacks)
    assert any(x.startswith("no LR-scheduler state") for x in report.lacks)
    assert any("only as a pair" in w for w in report.chosen.warnings)


def test_hf_weights_not_opened_do_not_block(tmp_path):
    """model.safetensors is what Trainer loads: a stale index whose shard is gone, or a junk
    pytorch_model.bin next to it, is never opened."""
    _hf_checkpoint(tmp_path / "checkpoint-1", 1, ranks=(0,))
    d = _hf_checkpoint(tmp_path / "checkpoint-2", 2, ranks=(0,))
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "model-00001-of-00002.safetensors"}}))
    (d / "pytorch_model.bin").write_bytes(b"junk")
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint-2", report.to_text()
    assert any("not opened" in w for w in report.chosen.warnings)


def test_hf_sharded_index_shard_missing_or_truncated(tmp_path):
    """Without model.safetensors the index is opened, and every shard it names."""
    state = training_state(3, ddp_prefix=False)["model"]
    names = sorted(state)
    for step, damage in ((1, None), (2, "missing"), (3, "truncated")):
        d = _hf_checkpoint(tmp_path / f"checkpoint-{step}", step, ranks=(0,))
        (d / "model.safetensors").unlink()
        shards = {"model-00001-of-00002.safetensors": names[:2], "model-00002-of-00002.safetensors": names[2:]}
        for shard, keys in shards.items():
            st.save_file({k: state[k].contiguous() for k in keys}, str(d / shard))
        (d / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {}, "weight_map": {k: s for s, keys in shards.items() for k in keys}}))
        if damage == "missing":
            (d / "model-00001-of-00002.safetensors").unlink()
        elif damage == "truncated":
            _truncate(d / "model-00002-of-00002.safetensors")
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint-1", report.to_text()
    assert "model-00001-of-00002.safetensors named in model.safetensors.index.json is missing" in _reason(report, "checkpoint-2")
    assert "model-00002-of-00002.safetensors" in _reason(report, "checkpoint-3")


# --- FIFO / special files ------------------------------------------------------------------

@pytest.mark.timeout(60)  # the defect was a hang
def test_fifo_is_reported_not_read(tmp_path):
    """open() of a FIFO blocks until a writer comes: `inspect` and `latest` hung forever."""
    fifo = tmp_path / "optimizer.pt"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    r = inspect_path(fifo)
    assert not r.valid and "FIFO, not a regular file" in r.reasons()[0]
    _hf_checkpoint(tmp_path / "out" / "checkpoint-1", 1, ranks=(0,))
    d = _hf_checkpoint(tmp_path / "out" / "checkpoint-2", 2, ranks=(0,))
    (d / "trainer_state.json").unlink()
    os.mkfifo(d / "trainer_state.json")
    os.mkfifo(tmp_path / "out" / "weights.bin")  # a .bin is sniffed during discovery
    report = find_latest([tmp_path / "out"])
    assert report.chosen.name == "checkpoint-1"
    assert "not a regular file" in _reason(report, "checkpoint-2")
    assert time.monotonic() - t0 < 30


# --- accelerate ----------------------------------------------------------------------------

def _accelerate(d: Path, scheduler: bool = True) -> Path:
    state = training_state(7, ddp_prefix=False)
    d.mkdir(parents=True)
    st.save_file({k: v.contiguous() for k, v in state["model"].items()}, str(d / "model.safetensors"))
    opt = state["optimizer"]
    for g in opt["param_groups"]:
        g["initial_lr"] = g["lr"]  # what attaching any torch LR scheduler does
    _save(opt, d / "optimizer.bin")
    if scheduler:
        _save(state["lr_scheduler"], d / "scheduler.bin")
    _save({"step": 0, "random_state": state["rng_state"]["python"]}, d / "random_states_0.pkl")
    return d


def test_accelerate_folders_named_by_script_ordered_numerically(tmp_path):
    """accelerator.save_state("out/step_100") has no checkpoint_N name: the step in the name, compared as a
    number, orders them (text order picked step_99 over step_100)."""
    for n in (98, 99, 100):
        _accelerate(tmp_path / f"step_{n}")
    report = find_latest([tmp_path])
    assert report.chosen.name == "step_100" and report.chosen.step == 100


def test_accelerate_lone_checkpoint_without_scheduler_bin(tmp_path):
    """One checkpoint, no sibling to compare with: the optimizer's initial_lr shows a scheduler was
    attached; load_state opens scheduler.bin for it and raises."""
    _accelerate(tmp_path / "checkpoints" / "checkpoint_0", scheduler=False)
    report = find_latest([tmp_path])
    assert report.chosen is None
    assert "no scheduler.bin, but optimizer.bin shows an LR scheduler" in _reason(report, "checkpoint_0")


def test_accelerate_bin_shadowed_by_safetensors_does_not_block(tmp_path):
    _accelerate(tmp_path / "checkpoints" / "checkpoint_0")
    d = _accelerate(tmp_path / "checkpoints" / "checkpoint_1")
    (d / "pytorch_model.bin").write_bytes(b"junk")
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint_1", report.to_text()


# --- Lightning -----------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["state_dict", "optimizer_states", "lr_schedulers", "pytorch-lightning_version"])
def test_lightning_checkpoint_missing_a_key_fit_reads(tmp_path, key):
    """trainer.fit(ckpt_path=) raises KeyError without any of these."""
    _lightning(tmp_path / "epoch=0-step=5.ckpt", 5)
    bad = _lightning(tmp_path / "epoch=0-step=10.ckpt", 10)
    ck = torch.load(bad, weights_only=False)
    del ck[key]
    torch.save(ck, bad)
    report = find_latest([tmp_path])
    assert report.chosen.step == 5
    assert f"no {key} in it" in _reason(report, bad.name)


def test_lightning_without_scheduler_still_resumable(tmp_path):
    good = _lightning(tmp_path / "epoch=0-step=10.ckpt", 10)
    ck = torch.load(good, weights_only=False)
    ck["lr_schedulers"] = []  # what Lightning writes without a scheduler
    torch.save(ck, good)
    assert find_latest([tmp_path]).chosen.step == 10


# --- DCP -----------------------------------------------------------------------------------

def test_dcp_bytes_item_with_damaged_head(tmp_path):
    """A non-tensor item (torch.save bytes) whose first bytes are overwritten: dcp.load fails on it.
    Seen without --deep (one 4-byte read per item)."""
    import warnings

    import torch.distributed.checkpoint as dcp

    for step in (2, 4):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dcp.save({"model": torch.nn.Linear(4, 4).state_dict(), "train_state": {"step": step}},
                     checkpoint_id=str(tmp_path / f"step-{step}"))
    meta = dcp.FileSystemReader(str(tmp_path / "step-4")).read_metadata()
    info = next(v for k, v in meta.storage_data.items() if k.fqn == "train_state.step")
    with open(tmp_path / "step-4" / info.relative_path, "r+b") as fh:
        fh.seek(info.offset)
        fh.write(b"XXXX")
    report = find_latest([tmp_path])
    assert report.chosen.name == "step-2", report.to_text()
    assert "item train_state.step" in _reason(report, "step-4")
