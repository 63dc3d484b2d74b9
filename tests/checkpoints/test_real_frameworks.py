"""Real frameworks write the checkpoints (CPU, tiny models built in code, no downloads), tests
damage them, and the framework's own resume call judges ``latest``: whenever it names one, that
resume succeeds, and it is the newest checkpoint that does. Skipped (with the reason) where the
``frameworks`` extra is not installed."""

from __future__ import annotations

import os
import pickle
import shutil
import warnings
from pathlib import Path

import pytest

from gpulib.checkpoints.latest import find_latest
from tests.checkpoints.lightning_tiny import fit_tiny

pytestmark = pytest.mark.frameworks
torch = pytest.importorskip("torch")


def _truncate(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


class _Run:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _poison(path: Path, marker: Path) -> None:
    with open(path, "wb") as fh:
        pickle.dump({"python": _Run(marker)}, fh, protocol=2)


def _damage(root: Path, damage: str, marker: Path) -> None:
    """Apply parametrized damage below ``root``, several joined by `` & ``: ``none``, ``truncate REL``,
    ``zero REL`` (0 bytes), ``delete REL``, ``poison REL``, ``write REL TEXT``, ``dropkey REL KEY`` (a torch
    file re-saved without one top-level key), ``fifo REL`` (replaced by a named pipe)."""
    for one in damage.split(" & "):
        verb, _, rest = one.partition(" ")
        rel, _, arg = rest.partition(" ")
        if verb == "truncate":
            _truncate(root / rel)
        elif verb == "zero":
            (root / rel).write_bytes(b"")
        elif verb == "delete":
            (root / rel).unlink()
        elif verb == "poison":
            _poison(root / rel, marker)
        elif verb == "write":
            (root / rel).write_text(arg)
        elif verb == "dropkey":
            ck = torch.load(root / rel, weights_only=False)
            del ck[arg]
            torch.save(ck, root / rel)
        elif verb == "fifo":
            (root / rel).unlink()
            os.mkfifo(root / rel)
        else:
            assert verb == "none", damage


# --- HF Trainer -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    transformers = pytest.importorskip("transformers", reason="the 'frameworks' extra (transformers) is not installed")
    out = tmp_path_factory.mktemp("hf") / "out"
    _hf_train(transformers, out, max_steps=6, resume=None)
    return transformers, out


def _hf_train(transformers, out: Path, max_steps: int, resume: str | None) -> None:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=32, n_positions=16)
    model = transformers.GPT2LMHeadModel(cfg)
    data = [{"input_ids": torch.arange(i, i + 8) % 32, "labels": torch.arange(i, i + 8) % 32} for i in range(16)]
    args = transformers.TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=2,
                                          per_device_train_batch_size=2, report_to=[], use_cpu=True,
                                          disable_tqdm=True, logging_strategy="no")
    transformers.Trainer(model=model, args=args, train_dataset=data).train(resume_from_checkpoint=resume)


@pytest.mark.parametrize(("damage", "expect"), [
    ("none", "checkpoint-6"),
    ("truncate checkpoint-6/optimizer.pt", "checkpoint-4"),
    ("delete checkpoint-6/model.safetensors", "checkpoint-4"),
    ("truncate checkpoint-6/rng_state.pth", "checkpoint-4"),
    ("poison checkpoint-6/rng_state.pth", "checkpoint-4"),
    ("delete checkpoint-6/trainer_state.json", "checkpoint-4"),
    ("write checkpoint-6/trainer_state.json []", "checkpoint-4"),  # TrainerState(**[]) raises; latest crashed
    ("truncate checkpoint-6/config.json", "checkpoint-4"),  # opened whenever present
    ("zero checkpoint-6/scheduler.pt", "checkpoint-4"),
    ("delete checkpoint-6/scheduler.pt & truncate checkpoint-6/optimizer.pt", "checkpoint-6"),  # the pair is not loaded
    ("fifo checkpoint-6/scheduler.pt", "checkpoint-6"),  # isfile() is False: neither is loaded; latest hung
])
def test_hf_trainer_latest_resumes(hf_run, tmp_path, damage, expect):
    transformers, src = hf_run
    out = tmp_path / "out"
    shutil.copytree(src, out)
    marker = tmp_path / "PWNED"
    _damage(out, damage, marker)
    report = find_latest([out])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    _hf_train(transformers, out, max_steps=8, resume=str(report.resume_from))
    assert not marker.exists()


# --- accelerate -----------------------------------------------------------------------------

def _accelerate_objects(accelerate, project: Path, auto: bool = True):
    from accelerate.utils import ProjectConfiguration

    torch.manual_seed(0)
    acc = accelerate.Accelerator(cpu=True, project_config=ProjectConfiguration(str(project), automatic_checkpoint_naming=auto))
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    model, opt, sched = acc.prepare(model, opt, sched)
    return acc, model, opt, sched


@pytest.fixture(scope="module")
def accelerate_run(tmp_path_factory):
    accelerate = pytest.importorskip("accelerate", reason="the 'frameworks' extra (accelerate) is not installed")
    project = tmp_path_factory.mktemp("acc") / "project"
    acc, model, opt, sched = _accelerate_objects(accelerate, project)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(11):  # checkpoint_0 .. checkpoint_10: text order would pick checkpoint_9
            model(torch.ones(2, 4)).sum().backward()
            opt.step()
            sched.step()
            opt.zero_grad()
            acc.save_state()
    return accelerate, project


@pytest.mark.parametrize(("damage", "expect"), [
    ("none", "checkpoint_10"),
    ("delete checkpoint_10/optimizer.bin", "checkpoint_9"),
    ("delete checkpoint_10/scheduler.bin", "checkpoint_9"),
    ("truncate checkpoint_10/model.safetensors", "checkpoint_9"),
    ("poison checkpoint_10/random_states_0.pkl", "checkpoint_9"),
    ("truncate checkpoint_10/random_states_0.pkl", "checkpoint_10"),  # load_state only logs a failed RNG restore
    ("zero checkpoint_10/optimizer.bin", "checkpoint_9"),
])
def test_accelerate_latest_resumes(accelerate_run, tmp_path, damage, expect):
    accelerate, src = accelerate_run
    project = tmp_path / "project"
    shutil.copytree(src, project)
    marker = tmp_path / "PWNED"
    _damage(project / "checkpoints", damage, marker)
    report = find_latest([project])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    acc, *_ = _accelerate_objects(accelerate, tmp_path / "fresh")
    acc.load_state(str(report.resume_from))
    if expect != "checkpoint_10" and not damage.startswith("poison"):  # the rejected one really does not resume
        acc, *_ = _accelerate_objects(accelerate, tmp_path / "fresh2")
        with pytest.raises(Exception):  # noqa: B017 - whatever the loader raises
            acc.load_state(str(project / "checkpoints" / "checkpoint_10"))
    assert not marker.exists()


def test_accelerate_named_folders_and_lone_checkpoint(tmp_path):
    """save_state("out/step_N") (no automatic naming): newest by the number in the name, not text order;
    and a lone checkpoint without scheduler.bin (a prepared scheduler): load_state raises, never named."""
    accelerate = pytest.importorskip("accelerate", reason="the 'frameworks' extra (accelerate) is not installed")
    out = tmp_path / "out"
    acc, model, opt, sched = _accelerate_objects(accelerate, tmp_path / "p", auto=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (99, 100):
            model(torch.ones(2, 4)).sum().backward()
            opt.step()
            sched.step()
            acc.save_state(str(out / f"step_{n}"))
    report = find_latest([out])
    assert report.chosen is not None and report.chosen.name == "step_100", report.to_text()
    acc, *_ = _accelerate_objects(accelerate, tmp_path / "fresh")
    acc.load_state(str(report.resume_from))
    lone = tmp_path / "lone"
    shutil.copytree(out / "step_100", lone / "step_100")
    (lone / "step_100" / "scheduler.bin").unlink()
    report = find_latest([lone])
    assert report.chosen is None, report.to_text()
    acc, *_ = _accelerate_objects(accelerate, tmp_path / "fresh2")
    with pytest.raises(Exception):  # noqa: B017 - whatever the loader raises
        acc.load_state(str(lone / "step_100"))


# --- Lightning ------------------------------------------------------------------------------

def _lightning_fit(L, dirpath: Path, max_steps: int, ckpt_path: str | None) -> None:
    cb = L.pytorch.callbacks.ModelCheckpoint(dirpath=str(dirpath), every_n_train_steps=2, save_top_k=-1)
    fit_tiny(L, max_steps, ckpt_path, [cb])


@pytest.fixture(scope="module")
def lightning_run(tmp_path_factory):
    L = pytest.importorskip("lightning", reason="the 'frameworks' extra (lightning) is not installed")
    d = tmp_path_factory.mktemp("pl") / "ckpts"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _lightning_fit(L, d, 6, None)
    return L, d


@pytest.mark.parametrize(("damage", "expect"), [
    ("none", "epoch=0-step=6.ckpt"),
    ("truncate epoch=0-step=6.ckpt", "epoch=0-step=4.ckpt"),
    ("poison epoch=0-step=6.ckpt", "epoch=0-step=4.ckpt"),
    ("zero epoch=0-step=6.ckpt", "epoch=0-step=4.ckpt"),
    ("dropkey epoch=0-step=6.ckpt state_dict", "epoch=0-step=4.ckpt"),
    ("dropkey epoch=0-step=6.ckpt optimizer_states", "epoch=0-step=4.ckpt"),  # what save_weights_only writes
    ("dropkey epoch=0-step=6.ckpt pytorch-lightning_version", "epoch=0-step=4.ckpt"),
    ("dropkey epoch=0-step=6.ckpt loops", "epoch=0-step=6.ckpt"),  # read with .get: still resumes
])
def test_lightning_latest_resumes(lightning_run, tmp_path, damage, expect):
    L, src = lightning_run
    d = tmp_path / "ckpts"
    shutil.copytree(src, d)
    marker = tmp_path / "PWNED"
    _damage(d, damage, marker)
    report = find_latest([d])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _lightning_fit(L, tmp_path / "resumed", 8, str(report.resume_from))
    assert not marker.exists()


# --- DeepSpeed ZeRO-2 (CPU, gloo, one rank; in a child so its process group stays there) ----

DS_SCRIPT = r"""
import os, sys, torch, deepspeed
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[3], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
cfg = {"train_batch_size": 2, "zero_optimization": {"stage": 2}, "zero_allow_untested_optimizer": True}
eng, *_ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
if sys.argv[1] == "save":
    for s in range(6):
        loss = eng(torch.ones(2, 4)).sum(); eng.backward(loss); eng.step()
        if s % 2 == 1:
            eng.save_checkpoint(sys.argv[2])
else:
    path, _ = eng.load_checkpoint(os.path.dirname(sys.argv[2]), tag=os.path.basename(sys.argv[2]))
    assert path is not None, "load_checkpoint returned None"
print("DS-OK")
"""


def _ds(mode: str, path: Path, tmp: Path) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # a free loopback port for the one-rank gloo group
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "DS_BUILD_OPS": "0", "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-c", DS_SCRIPT, mode, str(path), port], capture_output=True, text=True,
                         env=env, cwd=tmp, timeout=240)
    assert "DS-OK" in out.stdout, (out.stdout + out.stderr)[-3000:]


@pytest.fixture(scope="module")
def deepspeed_run(tmp_path_factory):
    pytest.importorskip("deepspeed", reason="the 'frameworks' extra (deepspeed) is not installed")
    tmp = tmp_path_factory.mktemp("ds")
    _ds("save", tmp / "ck", tmp)
    return tmp / "ck"


@pytest.mark.parametrize(("damage", "expect"), [
    ("none", "global_step6"),
    ("delete global_step6/zero_pp_rank_0_mp_rank_00_optim_states.pt", "global_step4"),
    ("truncate global_step6/mp_rank_00_model_states.pt", "global_step4"),
    ("poison global_step6/zero_pp_rank_0_mp_rank_00_optim_states.pt", "global_step4"),
    ("zero global_step6/zero_pp_rank_0_mp_rank_00_optim_states.pt", "global_step4"),
])
def test_deepspeed_latest_resumes(deepspeed_run, tmp_path, damage, expect):
    ck = tmp_path / "ck"
    shutil.copytree(deepspeed_run, ck)
    marker = tmp_path / "PWNED"
    _damage(ck, damage, marker)
    report = find_latest([ck])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    _ds("load", report.resume_from, tmp_path)
    assert not marker.exists()


# --- torch DCP (one process, two writer threads: two .distcp files per step) ----------------

def _dcp_state(step: int) -> dict:
    torch.manual_seed(step)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    return {"model": model.state_dict(), "train_state": {"step": step}}


@pytest.fixture(scope="module")
def dcp_run(tmp_path_factory):
    import torch.distributed.checkpoint as dcp

    root = tmp_path_factory.mktemp("dcp") / "ckpt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in (2, 4, 6):
            dcp.save(_dcp_state(step), storage_writer=dcp.FileSystemWriter(str(root / f"step-{step}"), thread_count=2))
    return root


def _dcp_item(path: Path, fqn: str):
    import torch.distributed.checkpoint as dcp

    return next(v for k, v in dcp.FileSystemReader(str(path)).read_metadata().storage_data.items() if k.fqn == fqn)


@pytest.mark.parametrize(("damage", "expect"), [
    ("none", "step-6"),
    ("delete step-6/__0_1.distcp", "step-4"),
    ("truncate step-6/.metadata", "step-4"),
    ("zero step-6/__0_0.distcp", "step-4"),
    ("item-head step-6 train_state.step", "step-4"),  # torch.save bytes of a non-tensor item overwritten
])
def test_dcp_latest_resumes(dcp_run, tmp_path, damage, expect):
    import torch.distributed.checkpoint as dcp

    root = tmp_path / "ckpt"
    shutil.copytree(dcp_run, root)
    if damage.startswith("item-head"):
        _verb, rel, fqn = damage.split(" ")
        info = _dcp_item(root / rel, fqn)
        with open(root / rel / info.relative_path, "r+b") as fh:
            fh.seek(info.offset)
            fh.write(b"XXXX")
    else:
        _damage(root, damage, tmp_path / "PWNED")
    report = find_latest([root])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    state = _dcp_state(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load(state, checkpoint_id=str(report.resume_from))
        assert state["train_state"]["step"] == int(expect.split("-")[1])
        if expect != "step-6":  # the rejected one really does not load
            with pytest.raises(BaseException):  # noqa: B017 - DCP's CheckpointException is a BaseException
                dcp.load(_dcp_state(0), checkpoint_id=str(root / "step-6"))
