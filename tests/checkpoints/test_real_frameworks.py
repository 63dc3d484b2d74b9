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
    """Apply one parametrized damage (``none``, ``truncate REL``, ``delete REL``, ``poison REL``) below ``root``."""
    verb, _, rel = damage.partition(" ")
    if verb == "truncate":
        _truncate(root / rel)
    elif verb == "delete":
        (root / rel).unlink()
    elif verb == "poison":
        _poison(root / rel, marker)
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

def _accelerate_objects(accelerate, project: Path):
    from accelerate.utils import ProjectConfiguration

    torch.manual_seed(0)
    acc = accelerate.Accelerator(cpu=True, project_config=ProjectConfiguration(str(project), automatic_checkpoint_naming=True))
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
    if damage.split(" ")[0] in ("delete", "truncate"):  # the rejected one really does not resume
        acc, *_ = _accelerate_objects(accelerate, tmp_path / "fresh2")
        with pytest.raises(Exception):  # noqa: B017 - whatever the loader raises
            acc.load_state(str(project / "checkpoints" / "checkpoint_10"))
    assert not marker.exists()


# --- Lightning ------------------------------------------------------------------------------

def _lightning_fit(L, dirpath: Path, max_steps: int, ckpt_path: str | None) -> None:
    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, _idx):
            return self.layer(batch).sum()

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=1e-3)
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=2)]

        def train_dataloader(self):
            return torch.utils.data.DataLoader(torch.randn(64, 4), batch_size=4)

    torch.manual_seed(0)
    cb = L.pytorch.callbacks.ModelCheckpoint(dirpath=str(dirpath), every_n_train_steps=2, save_top_k=-1)
    trainer = L.Trainer(max_steps=max_steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb])
    trainer.fit(Tiny(), ckpt_path=ckpt_path)


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
