"""`ckpt latest`: framework layouts built from their documented file names, with real torch files
inside, broken the ways real saves break; several roots (one per node); the case-06 incident."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

from gpulib.checkpoints.latest import find_latest
from tests.checkpoints.conftest import TinyNet, training_state

torch = pytest.importorskip("torch")


def _save(obj, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path)
    return path


def _truncate(path: Path, keep: float = 0.5) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(int(path.stat().st_size * keep))


def _dcp(state: dict, path: Path) -> Path:
    import torch.distributed.checkpoint as dcp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, checkpoint_id=str(path))
    return path


def _reason(report, name: str) -> str:
    return next(r for p, r in report.rejected if p.name == name)


# --- HF Trainer ----------------------------------------------------------------------------

def _hf_checkpoint(d: Path, step: int, ranks=(0, 1)) -> Path:
    st = pytest.importorskip("safetensors.torch")
    state = training_state(step, ddp_prefix=False)
    d.mkdir(parents=True)
    st.save_file({k: v.contiguous() for k, v in state["model"].items()}, str(d / "model.safetensors"))
    _save(state["optimizer"], d / "optimizer.pt")
    _save(state["lr_scheduler"], d / "scheduler.pt")
    for r in ranks:
        _save(state["rng_state"], d / f"rng_state_{r}.pth")
    _save(argparse.Namespace(output_dir=str(d.parent), learning_rate=1e-3), d / "training_args.bin")
    (d / "trainer_state.json").write_text(json.dumps({"global_step": step, "epoch": 1.0, "log_history": []}))
    return d


def test_hf_trainer_skips_unfinished_and_rank_gaps(tmp_path):
    out = tmp_path / "out"
    good = _hf_checkpoint(out / "checkpoint-100", 100)
    unfinished = _hf_checkpoint(out / "checkpoint-200", 200)
    (unfinished / "trainer_state.json").unlink()
    _truncate(unfinished / "optimizer.pt")
    _hf_checkpoint(out / "checkpoint-150", 150, ranks=(0, 2))
    report = find_latest([out])
    # a lost rng_state_1.pth does not stop Trainer: that rank logs "Didn't find an RNG file" and goes on
    assert report.resume_from == out / "checkpoint-150"
    assert report.chosen.layout == "hf_trainer" and report.chosen.step == 150
    assert any("RNG state (rng_state_<rank>.pth) missing for ranks 1 (present: 0,2)" in w for w in report.chosen.warnings)
    assert report.lacks == ["RNG state for only 2 of 3 ranks: the other ranks restart their streams"]
    r200 = _reason(report, "checkpoint-200")
    assert "no trainer_state.json" in r200 and "optimizer.pt: truncated: no zip end record" in r200
    assert "--resume_from_checkpoint" in report.resume_command and "checkpoint-150" in report.resume_command
    (out / "checkpoint-150" / "rng_state_2.pth").write_bytes(b"")  # a damaged one does: torch.load raises on rank 2
    report = find_latest([out])
    assert report.resume_from == good and report.lacks == []  # optimizer, scheduler, RNG per rank: all there


# --- Lightning -----------------------------------------------------------------------------

def _lightning(path: Path, step: int, full: bool = True) -> Path:
    state = training_state(step, ddp_prefix=False)
    ckpt = {"epoch": 0, "global_step": step, "pytorch-lightning_version": "2.5.0",
            "state_dict": {f"model.{k}": v for k, v in state["model"].items()}, "loops": {"fit_loop": {"epoch_progress": {}}},
            "callbacks": {}, "hparams_name": "kwargs", "hyper_parameters": {"lr": 1e-3}}
    if full:
        ckpt["optimizer_states"] = [state["optimizer"]]
        ckpt["lr_schedulers"] = [state["lr_scheduler"]]
    return _save(ckpt, path)


def test_lightning_last_symlink_to_broken_file(tmp_path):
    d = tmp_path / "lightning_logs" / "version_0" / "checkpoints"
    good = _lightning(d / "epoch=0-step=500.ckpt", 500)
    bad = _lightning(d / "epoch=1-step=1000.ckpt", 1000)
    _truncate(bad, 0.9)
    os.symlink(bad.name, d / "last.ckpt")
    report = find_latest([tmp_path])
    assert report.resume_from == good and report.chosen.layout == "lightning"
    assert "truncated: no zip end record" in _reason(report, bad.name)
    assert any("last.ckpt" in x and "incomplete" in x for x in report.disagreements), report.disagreements
    assert "--ckpt_path" in report.resume_command
    assert not any("optimizer" in x for x in report.lacks)


def test_lightning_weights_only_checkpoint_is_not_resumable(tmp_path):
    """trainer.fit(ckpt_path=) of a save_weights_only checkpoint raises KeyError ('Trying to restore optimizer
    state but checkpoint contains only the model'): it is never recommended, and the reason says what it is.
    (Proved with Lightning itself in test_real_frameworks.py.)"""
    _lightning(tmp_path / "epoch=0-step=5.ckpt", 5)
    _lightning(tmp_path / "epoch=0-step=10.ckpt", 10, full=False)
    report = find_latest([tmp_path])
    assert report.chosen.step == 5
    assert "save_weights_only=True" in _reason(report, "epoch=0-step=10.ckpt")


# --- DeepSpeed -----------------------------------------------------------------------------

def _deepspeed_tag(root: Path, tag: str, step: int, dp: int, optim_ranks) -> Path:
    d = root / tag
    sd = TinyNet().state_dict()
    _save({"module": sd, "dp_world_size": dp, "mp_world_size": 1, "global_steps": step, "optimizer": None,
           "lr_scheduler": {"last_epoch": step}, "data_sampler": None, "ds_version": "0.16.0"},
          d / "mp_rank_00_model_states.pt")
    for r in optim_ranks:
        _save({"optimizer_state_dict": {"zero_stage": 2, "partition_count": dp, "fp32": torch.zeros(4)}},
              d / f"bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt")
    return d


def test_deepspeed_latest_names_a_tag_with_missing_shards(tmp_path):
    save = tmp_path / "save"
    good = _deepspeed_tag(save, "global_step20", 20, 4, range(4))
    _deepspeed_tag(save, "global_step30", 30, 4, [0, 1])
    (save / "latest").write_text("global_step30")
    report = find_latest([save])
    assert report.resume_from == good
    r30 = _reason(report, "global_step30")
    assert "missing 2 of 4 ZeRO optimizer shards (bf16_zero_pp_rank_2_mp_rank_00_optim_states.pt" in r30
    assert any("latest" in x and "global_step30" in x and "incomplete" in x for x in report.disagreements)
    assert "tag='global_step20'" in report.resume_command and "`latest` does not name it" in report.resume_command
    assert any(x.startswith("no sampler/dataloader state") for x in report.lacks)


def test_deepspeed_shards_on_node_local_disks(tmp_path):
    """Each node holds the shards of its own ranks: complete as a set, with a warning."""
    a, b = tmp_path / "node-a", tmp_path / "node-b"
    _deepspeed_tag(a, "global_step20", 20, 4, [0, 1])
    _deepspeed_tag(b, "global_step20", 20, 4, [2, 3])
    (a / "latest").write_text("global_step20")
    (b / "latest").write_text("global_step10")
    report = find_latest([a, b])
    assert report.chosen and report.chosen.step == 20 and report.chosen.paths == [a / "global_step20", b / "global_step20"]
    assert any("node-local disks" in w for w in report.chosen.warnings)
    assert any("nodes disagree on latest" in x for x in report.disagreements), report.disagreements
    only_a = find_latest([a])
    assert only_a.resume_from is None
    assert "missing 2 of 4 ZeRO optimizer shards" in _reason(only_a, "global_step20")


# --- Megatron ------------------------------------------------------------------------------

def _megatron_iter(save: Path, it: int, ranks) -> Path:
    d = save / f"iter_{it:07d}"
    args = argparse.Namespace(tensor_model_parallel_size=2, pipeline_model_parallel_size=1, seed=1234)
    for tp in ranks:
        state = training_state(it, ddp_prefix=False)
        _save({"args": args, "checkpoint_version": 3.0, "iteration": it, "model": state["model"],
               "optimizer": state["optimizer"], "opt_param_scheduler": {"num_steps": it},
               "rng_state": [{"random_rng_state": state["rng_state"]["python"], "np_rng_state": state["rng_state"]["numpy"],
                              "torch_rng_state": state["rng_state"]["cpu"], "cuda_rng_state": state["rng_state"]["cpu"]}]},
              d / f"mp_rank_{tp:02d}" / "model_optim_rng.pt")
    return d


def test_megatron_tracker_points_at_partial_iteration(tmp_path):
    save = tmp_path / "save"
    good = _megatron_iter(save, 100, [0, 1])
    _megatron_iter(save, 200, [0])
    (save / "latest_checkpointed_iteration.txt").write_text("200")
    report = find_latest([save])
    assert report.resume_from == good and report.chosen.layout == "megatron"
    assert "missing 1 of 2 model-parallel dirs (TP=2, PP=1): mp_rank_01" in _reason(report, "iter_0000200")
    assert "--load" in report.resume_command and "--ckpt-step 100" in report.resume_command
    assert any("argparse.Namespace" in f.message for r in report.chosen.reports for f in r.findings
               if f.severity == "needs_allowlist")


def test_megatron_torch_dist_without_metadata_json(tmp_path):
    save = tmp_path / "save"
    state = training_state(300, ddp_prefix=False)
    done = _dcp({"model": state["model"]}, save / "iter_0000300")
    (done / "metadata.json").write_text('{"sharded_backend": "torch_dist"}')
    _dcp({"model": state["model"]}, save / "iter_0000400")
    report = find_latest([save])
    assert report.resume_from == done
    assert "no metadata.json" in _reason(report, "iter_0000400")


# --- torchtitan / DCP ----------------------------------------------------------------------

def test_torchtitan_newest_step_without_metadata(tmp_path):
    folder = tmp_path / "outputs" / "checkpoint"
    state = training_state(10, ddp_prefix=False)
    full = {"model": state["model"], "optimizer": state["optimizer"]["state"], "lr_scheduler": {"last_epoch": 10},
            "dataloader": {"index": 80}, "train_state": {"step": 10}}
    good = _dcp(full, folder / "step-10")
    broken = _dcp({**full, "train_state": {"step": 20}}, folder / "step-20")
    (broken / ".metadata").rename(broken / ".metadata.tmp")
    report = find_latest([tmp_path])
    assert report.resume_from == good and report.chosen.step == 10
    r20 = _reason(report, "step-20")
    assert ".metadata.tmp left behind" in r20
    assert report.lacks == [] or all("RNG" in x for x in report.lacks)
    assert "--checkpoint.load_step 10" in report.resume_command
    assert any(x.endswith("step-20/.metadata.tmp") for x in report.leftovers)


def test_dcp_metadata_on_one_node_shards_on_another(tmp_path, dcp_ckpt):
    a, b = tmp_path / "node-a" / "ck", tmp_path / "node-b" / "ck"
    shutil.copytree(dcp_ckpt, a)
    b.mkdir(parents=True)
    for shard in a.glob("*.distcp"):
        shard.rename(b / shard.name)
    report = find_latest([a.parent, b.parent])
    assert report.chosen and report.chosen.layout == "dcp", report.to_text()
    assert find_latest([a.parent]).resume_from is None


# --- accelerate ----------------------------------------------------------------------------

def test_accelerate_checkpoint_without_weights(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    base = tmp_path / "project" / "checkpoints"
    for i in (0, 1):
        d = base / f"checkpoint_{i}"
        state = training_state(50 * (i + 1), ddp_prefix=False)
        d.mkdir(parents=True)
        st.save_file({k: v.contiguous() for k, v in state["model"].items()}, str(d / "model.safetensors"))
        _save(state["optimizer"], d / "optimizer.bin")
        _save(state["lr_scheduler"], d / "scheduler.bin")
        for r in (0, 1):
            _save({"step": 50 * (i + 1), "random_state": state["rng_state"]["python"],
                   "numpy_random_seed": state["rng_state"]["numpy"], "torch_manual_seed": state["rng_state"]["cpu"]},
                  d / f"random_states_{r}.pkl")
    (base / "checkpoint_1" / "model.safetensors").unlink()
    report = find_latest([tmp_path])
    assert report.resume_from == base / "checkpoint_0" and report.chosen.step == 0  # the folder number: accelerate counts saves
    assert "no model weights" in _reason(report, "checkpoint_1")
    assert any(x.startswith("no sampler/dataloader state") for x in report.lacks)
    assert "accelerator.load_state" in report.resume_command


# --- plain torch files with sidecar manifests ----------------------------------------------

def test_case06_incident_in_place(incidents):
    ckpts = incidents / "case-06-ecc-dbe-truncated-ckpt" / "input" / "checkpoints"
    report = find_latest([ckpts])
    assert report.resume_from == ckpts / "ckpt_step_004000.pt"
    reason = _reason(report, "ckpt_step_006000.pt")
    assert "truncated: no zip end record" in reason and "ckpt_step_006000.json.tmp left behind" in reason
    assert [p.name for p, _ in report.rejected] == ["ckpt_step_006000.pt"]
    assert report.chosen.model_prefix == "module."
    assert "--resume" in report.resume_command and "--max-restarts=3" in report.resume_command
    assert report.to_dict()["resume_from"].endswith("checkpoints/ckpt_step_004000.pt")
    assert find_latest([ckpts.parent]).resume_from == ckpts / "ckpt_step_004000.pt"  # found from the incident folder too


def test_sidecar_sha256_mismatch_rejects_newest(tmp_path, full_ckpt):
    import hashlib
    for step in (100, 200):
        p = tmp_path / f"ckpt_step_{step:06d}.pt"
        shutil.copy(full_ckpt, p)
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        (tmp_path / f"ckpt_step_{step:06d}.json").write_text(json.dumps(
            {"step": step, "file": p.name, "bytes": p.stat().st_size, "sha256": digest, "status": "complete"}))
    newest = tmp_path / "ckpt_step_000200.pt"
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    report = find_latest([tmp_path])
    assert report.resume_from == tmp_path / "ckpt_step_000100.pt"
    assert "its manifest says" in _reason(report, "ckpt_step_000200.pt")


def test_empty_and_missing_roots(tmp_path):
    from gpulib.cli import main
    report = find_latest([tmp_path, tmp_path / "nope"])
    assert report.resume_from is None and report.to_dict()["resume_from"] is None
    assert any("does not exist" in p for p in report.problems)
    assert main(["ckpt", "latest", str(tmp_path)]) == 1


def test_latest_cli_json(tmp_path, full_ckpt, capsys):
    from gpulib.cli import main
    shutil.copy(full_ckpt, tmp_path / "model_step_7.pt")
    assert main(["ckpt", "latest", "--deep", "--format", "json", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["resume_from"] == str(tmp_path / "model_step_7.pt") and doc["step"] == 120
    assert any("name says step 7" in w for c in doc["checkpoints"] for w in c["warnings"])


def test_unrelated_bin_files_are_not_candidates(tmp_path, full_ckpt):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "ipmi_sel.bin").write_bytes(b"\x01\x02 raw sensor dump")
    shutil.copy(full_ckpt, tmp_path / "weights.bin")  # a nameless .bin that *is* torch.save: kept
    report = find_latest([tmp_path])
    assert [c.name for c in report.candidates] == ["weights.bin"] and report.rejected == []


def test_replicas_that_differ_across_nodes(tmp_path, full_ckpt):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    shutil.copy(full_ckpt, a / "ckpt_step_5.pt")
    torch.save(training_state(), b / "ckpt_step_5.pt")  # same name, a different save
    report = find_latest([a, b])
    assert any("differ" in w for w in report.chosen.warnings), report.chosen.warnings


def test_hf_sharded_safetensors_with_a_missing_shard(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    d = _hf_checkpoint(tmp_path / "out" / "checkpoint-300", 300)
    (d / "model.safetensors").unlink()
    st.save_file({"a": torch.zeros(4)}, str(d / "model-00001-of-00002.safetensors"))
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 32}, "weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    report = find_latest([tmp_path])
    assert ("shard model-00002-of-00002.safetensors named in model.safetensors.index.json is missing"
            in _reason(report, "checkpoint-300"))


def _dcp_rank(rank: int, world: int, port: int, path: str) -> None:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        dcp.save({"model": {f"rank{rank}.weight": torch.full((64, 64), float(rank))}, "step": 7}, checkpoint_id=path)
    finally:
        dist.destroy_process_group()


@pytest.mark.torchrun
@pytest.mark.timeout(120)
def test_dcp_two_ranks_one_shard_lost(tmp_path):
    """A real 2-process gloo DCP save; then rank 1's shard is lost (node-local disk)."""
    import socket

    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ck = tmp_path / "run" / "dcp-step-7"
    mp.spawn(_dcp_rank, args=(2, port, str(ck)), nprocs=2, join=True)
    shards = sorted(p.name for p in ck.glob("*.distcp"))
    assert shards == ["__0_0.distcp", "__1_0.distcp"]
    assert find_latest([tmp_path]).chosen.step == 7
    (ck / "__1_0.distcp").unlink()
    report = find_latest([tmp_path])
    assert report.resume_from is None
    assert "shard __1_0.distcp is missing (2 items: model.rank1.weight, step)" in _reason(report, "dcp-step-7")


def test_a_root_that_is_itself_one_checkpoint(tmp_path, dcp_ckpt):
    report = find_latest([dcp_ckpt])
    assert report.resume_from == dcp_ckpt and report.chosen.layout == "dcp" and report.chosen.step == 40


def test_deepspeed_zero3_model_states_per_rank(tmp_path):
    d = _deepspeed_tag(tmp_path / "save", "global_step9", 9, 2, range(2))
    (d / "mp_rank_00_model_states.pt").rename(d / "zero_pp_rank_0_mp_rank_00_model_states.pt")
    report = find_latest([tmp_path / "save"])
    assert ("missing 1 of 2 ZeRO-3 model-states files (zero_pp_rank_1_mp_rank_00_model_states.pt)"
            in _reason(report, "global_step9"))
