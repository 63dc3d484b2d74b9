"""Configurations and crash states real users hit, beyond the default saves of
``test_real_frameworks``: HF Trainer ``save_only_model`` and sharded weights, Lightning
``save_weights_only`` and ``save_last="link"``, DeepSpeed ZeRO-3 / ``save_latest=False`` / a
``latest`` that names an unfinished tag, a DCP re-save that died in ``finish()``, accelerate
custom registered objects with ``total_limit``. A real framework run writes each one (CPU, tiny
models built in code, no downloads), the test damages it where the case needs, ``find_latest``
chooses, and the framework's own resume call proves the choice - and, where a newer checkpoint
was rejected, that it really does not resume."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from gpulib.checkpoints.latest import find_latest
from tests.checkpoints.lightning_tiny import fit_tiny
from tests.checkpoints.test_real_frameworks import _damage
from tests.checkpoints.two_ranks import torchrun_two

pytestmark = pytest.mark.frameworks
torch = pytest.importorskip("torch")


# --- HF Trainer -----------------------------------------------------------------------------

def _hf_trainer(transformers, out: Path, max_steps: int, **args):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=32, n_positions=16)
    data = [{"input_ids": torch.arange(i, i + 8) % 32, "labels": torch.arange(i, i + 8) % 32} for i in range(16)]
    targs = transformers.TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=2,
                                           per_device_train_batch_size=2, report_to=[], use_cpu=True,
                                           disable_tqdm=True, logging_strategy="no", **args)
    return transformers.Trainer(model=transformers.GPT2LMHeadModel(cfg), args=targs, train_dataset=data)


def test_hf_save_only_model_resumes_weights_only_and_says_so(tmp_path):
    """``save_only_model=True`` writes no optimizer.pt / scheduler.pt / rng_state.pth, and
    ``Trainer.train(resume_from_checkpoint=...)`` does NOT refuse it: it loads the weights and
    silently starts a fresh optimizer and schedule. So it is chosen, with what it lacks spelled out,
    and the older full checkpoint of the same run is named as the one that keeps the optimizer."""
    transformers = pytest.importorskip("transformers", reason="the 'frameworks' extra (transformers) is not installed")
    out = tmp_path / "out"
    _hf_trainer(transformers, out, 4).train()  # full checkpoints 2 and 4
    _hf_trainer(transformers, out, 6, save_only_model=True).train(resume_from_checkpoint=str(out / "checkpoint-4"))
    assert not (out / "checkpoint-6" / "optimizer.pt").exists()
    report = find_latest([out])
    assert report.chosen is not None and report.chosen.name == "checkpoint-6", report.to_text()
    lacks = " | ".join(report.lacks)
    assert "no optimizer state" in lacks and "no LR-scheduler state" in lacks and "no RNG state" in lacks, lacks
    assert any("checkpoint-4" in a and "optimizer" in a for a in report.advice), report.to_text()
    assert any("WITHOUT a warning" in a for a in report.advice), report.to_text()
    assert "checkpoint-4" in report.to_text() and "optimizer" in report.to_dict()["advice"][-1]
    trainer = _hf_trainer(transformers, out, 8)
    trainer.train(resume_from_checkpoint=str(report.resume_from))
    adam_steps = {int(s["step"]) for s in trainer.optimizer.state_dict()["state"].values()}
    assert adam_steps == {2}, adam_steps  # the optimizer restarted at step 6: it ran 2 steps, not 8


@pytest.fixture(scope="module")
def hf_sharded_run(tmp_path_factory):
    """The default run, then checkpoint-6's weights re-written by ``save_pretrained`` in shards
    (what a model over ``max_shard_size`` gets): model-0000i-of-0000N.safetensors + the index."""
    transformers = pytest.importorskip("transformers", reason="the 'frameworks' extra (transformers) is not installed")
    out = tmp_path_factory.mktemp("hf_sharded") / "out"
    _hf_trainer(transformers, out, 6).train()
    ck = out / "checkpoint-6"
    model = transformers.GPT2LMHeadModel.from_pretrained(str(ck))
    (ck / "model.safetensors").unlink()
    model.save_pretrained(str(ck), max_shard_size="2KB")
    shards = sorted(p.name for p in ck.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 3 and (ck / "model.safetensors.index.json").is_file(), shards
    return transformers, out, shards


@pytest.mark.parametrize(("damage", "expect"), [
    ("none", "checkpoint-6"),
    ("delete checkpoint-6/{shard}", "checkpoint-4"),
    ("truncate checkpoint-6/{shard}", "checkpoint-4"),
    ("truncate checkpoint-6/model.safetensors.index.json", "checkpoint-4"),
])
def test_hf_sharded_weights(hf_sharded_run, tmp_path, damage, expect):
    transformers, src, shards = hf_sharded_run
    out = tmp_path / "out"
    shutil.copytree(src, out)
    _damage(out, damage.format(shard=shards[1]), tmp_path / "PWNED")
    report = find_latest([out])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    _hf_trainer(transformers, out, 8).train(resume_from_checkpoint=str(report.resume_from))
    if expect != "checkpoint-6":  # the rejected one really does not resume
        shutil.rmtree(out)
        shutil.copytree(src, out)
        _damage(out, damage.format(shard=shards[1]), tmp_path / "PWNED")
        with pytest.raises(Exception):  # noqa: B017 - whatever the loader raises
            _hf_trainer(transformers, out, 8).train(resume_from_checkpoint=str(out / "checkpoint-6"))


HF_DDP_SCRIPT = r"""
import os, sys, torch, transformers
out, max_steps, resume = sys.argv[1], int(sys.argv[2]), (sys.argv[3] if sys.argv[3] != "-" else None)
torch.manual_seed(0)
cfg = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=32, n_positions=16)
data = [{"input_ids": torch.arange(i, i + 8) % 32, "labels": torch.arange(i, i + 8) % 32} for i in range(32)]
args = transformers.TrainingArguments(output_dir=out, max_steps=max_steps, save_steps=2, per_device_train_batch_size=2,
                                      report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no",
                                      ddp_backend="gloo")
trainer = transformers.Trainer(model=transformers.GPT2LMHeadModel(cfg), args=args, train_dataset=data)
trainer.train(resume_from_checkpoint=resume)
# one write(2) below PIPE_BUF: the two ranks share torchrun's stdout and must not interleave
os.write(1, f"HF-OK {trainer.args.process_index} {trainer.args.world_size} {trainer.state.global_step}\n".encode())
"""


def _hf_two_ranks(tmp: Path, out: Path, max_steps: int, resume: Path | None) -> None:
    """Two Trainer ranks (torchrun, gloo on loopback): each writes and reads its own rng_state_<rank>.pth."""
    run = torchrun_two(tmp, "hf_ddp.py", HF_DDP_SCRIPT, str(out), str(max_steps), str(resume or "-"))
    assert f"HF-OK 0 2 {max_steps}" in run.stdout and f"HF-OK 1 2 {max_steps}" in run.stdout, \
        "\n".join(x for x in (run.stdout + run.stderr).splitlines() if x.startswith("[rank"))[-6000:]


@pytest.fixture(scope="module")
def hf_two_rank_run(tmp_path_factory):
    pytest.importorskip("transformers", reason="the 'frameworks' extra (transformers) is not installed")
    tmp = tmp_path_factory.mktemp("hf_ddp")
    _hf_two_ranks(tmp, tmp / "out", 4, None)
    assert sorted(p.name for p in (tmp / "out" / "checkpoint-4").glob("rng_state*")) == ["rng_state_0.pth", "rng_state_1.pth"]
    return tmp / "out"


@pytest.mark.parametrize(("damage", "expect", "lacks"), [
    ("delete checkpoint-4/rng_state_1.pth", "checkpoint-4", "RNG state for only 1 of 2 ranks"),
    ("delete checkpoint-4/rng_state_0.pth", "checkpoint-4", "RNG state for only 1 of 2 ranks"),
    ("truncate checkpoint-4/rng_state_1.pth", "checkpoint-2", None),
])
def test_hf_two_ranks_rng_file_lost(hf_two_rank_run, tmp_path, damage, expect, lacks):
    """A rank's rng_state_<rank>.pth lost does not stop the Trainer: that rank logs "Didn't find an
    RNG file for process N" and restarts its streams - gpulib refused such a checkpoint (a gap in the
    ranks) or, with the last rank's file gone, did not notice. A damaged one does stop it."""
    out = tmp_path / "out"
    shutil.copytree(hf_two_rank_run, out)
    _damage(out, damage, tmp_path / "PWNED")
    report = find_latest([out])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    assert (lacks is None) == (not any("RNG state for only" in x for x in report.lacks)), report.to_text()
    assert lacks is None or any(lacks in x for x in report.lacks), report.to_text()
    if expect != "checkpoint-4":  # the rejected one really does not resume (before the resume below re-saves it)
        broken = tmp_path / "broken"
        shutil.copytree(out, broken)
        with pytest.raises(AssertionError, match=r"\[rank1\]:.*in _load_rng_state"):  # rank 1 raises reading its file
            _hf_two_ranks(tmp_path, broken, 8, broken / "checkpoint-4")
    _hf_two_ranks(tmp_path, out, 6, report.resume_from)


# --- Lightning ------------------------------------------------------------------------------

def test_lightning_weights_every_2_full_every_4(tmp_path):
    """Two ModelCheckpoint callbacks in one folder, a common setup: light ``save_weights_only``
    files often, full ones rarely. The newest file is weights-only: ``trainer.fit(ckpt_path=...)``
    raises KeyError on it, so the newest FULL one is chosen, and the rejected one says why."""
    L = pytest.importorskip("lightning", reason="the 'frameworks' extra (lightning) is not installed")
    d = tmp_path / "ckpts"
    mc = L.pytorch.callbacks.ModelCheckpoint
    fit_tiny(L, 6, None, [mc(dirpath=str(d), filename="weights-{step}", every_n_train_steps=2, save_top_k=-1,
                                   save_weights_only=True),
                                mc(dirpath=str(d), filename="full-{step}", every_n_train_steps=4, save_top_k=-1)])
    report = find_latest([d])
    assert report.chosen is not None and report.chosen.name == "full-step=4.ckpt", report.to_text()
    rejected = dict((p.name, why) for p, why in report.rejected)
    assert "save_weights_only" in rejected["weights-step=6.ckpt"] and "optimizer_states" in rejected["weights-step=6.ckpt"]
    fit_tiny(L, 8, str(report.resume_from), [])
    with pytest.raises(KeyError, match="save_weights_only"):  # the rejected one really does not resume
        fit_tiny(L, 8, str(d / "weights-step=6.ckpt"), [])
    only_weights = tmp_path / "only_weights"
    only_weights.mkdir()
    for p in d.glob("weights-*.ckpt"):
        shutil.copy(p, only_weights / p.name)
    report = find_latest([only_weights])
    assert report.chosen is None and "weights-step=6.ckpt: no optimizer_states" in report.why_none(), report.to_text()
    assert "save_weights_only=True" in report.why_none()


@pytest.mark.parametrize(("save_last", "damage", "expect"), [
    ("link", "none", "epoch=0-step=6.ckpt"),
    ("link", "truncate epoch=0-step=6.ckpt", "epoch=0-step=4.ckpt"),  # a cross-device move of the temp file cut short
    (True, "truncate epoch=0-step=6.ckpt", "last.ckpt"),  # save_last=True: a second full save of step 6
    (True, "truncate epoch=0-step=6.ckpt & truncate last.ckpt", "epoch=0-step=4.ckpt"),
])
def test_lightning_save_last(tmp_path, save_last, damage, expect):
    """``save_last="link"``: last.ckpt is a relative symlink to the newest file, a pointer - never a
    second candidate; when its target is damaged the report says the pointer names a broken file.
    ``save_last=True``: last.ckpt is its own full save, a candidate like the others (its step is
    in its content), and the named file wins a tie."""
    L = pytest.importorskip("lightning", reason="the 'frameworks' extra (lightning) is not installed")
    d = tmp_path / "ckpts"
    fit_tiny(L, 6, None, [L.pytorch.callbacks.ModelCheckpoint(dirpath=str(d), every_n_train_steps=2,
                                                                     save_top_k=-1, save_last=save_last)])
    assert (d / "last.ckpt").is_symlink() == (save_last == "link")
    _damage(d, damage, tmp_path / "PWNED")
    report = find_latest([d])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    if save_last == "link":
        assert [c.name for c in report.candidates].count("last.ckpt") == 0, report.to_text()
    fit_tiny(L, 8, str(report.resume_from), [])
    if expect == "epoch=0-step=4.ckpt":
        if save_last == "link":
            assert any("last.ckpt" in x and "incomplete" in x for x in report.disagreements), report.to_text()
        with pytest.raises(Exception):  # noqa: B017 - the rejected one (what ckpt_path="last" opens) does not resume
            fit_tiny(L, 8, str(d / "last.ckpt"), [])

# --- accelerate: a custom registered object, total_limit, automatic naming ----------------------

class _Seen:
    """A custom object a script registers with ``accelerator.register_for_checkpointing``."""

    def __init__(self):
        self.seen = 0

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, sd):
        self.seen = sd["seen"]


def _accelerate(accelerate, project: Path):
    from accelerate.utils import ProjectConfiguration

    torch.manual_seed(0)
    acc = accelerate.Accelerator(cpu=True, project_config=ProjectConfiguration(
        str(project), automatic_checkpoint_naming=True, total_limit=3))
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = acc.prepare(model, opt)
    seen = _Seen()
    acc.register_for_checkpointing(seen)
    return acc, model, opt, seen


@pytest.fixture(scope="module")
def accelerate_custom_run(tmp_path_factory):
    accelerate = pytest.importorskip("accelerate", reason="the 'frameworks' extra (accelerate) is not installed")
    project = tmp_path_factory.mktemp("acc_custom") / "project"
    acc, model, opt, seen = _accelerate(accelerate, project)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(5):  # total_limit=3 deletes the oldest before each save: checkpoint_2..4 remain
            model(torch.ones(2, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
            seen.seen += 1
            acc.save_state()
    assert sorted(p.name for p in (project / "checkpoints").iterdir()) == ["checkpoint_2", "checkpoint_3", "checkpoint_4"]
    return accelerate, project


@pytest.mark.parametrize(("damage", "expect"), [
    ("none", "checkpoint_4"),
    ("delete checkpoint_4/custom_checkpoint_0.pkl", "checkpoint_3"),
    ("truncate checkpoint_4/custom_checkpoint_0.pkl", "checkpoint_3"),
])
def test_accelerate_custom_object_total_limit(accelerate_custom_run, tmp_path, damage, expect):
    """``load_state`` opens ``custom_checkpoint_<i>.pkl`` for every registered object (and raises
    without it). After the resume the next ``save_state`` must not restart the numbering: the
    command sets ``project_configuration.iteration``, and following it the next save lands after
    every folder there, where without it it lands in ``checkpoint_0`` - the oldest number."""
    accelerate, src = accelerate_custom_run
    project = tmp_path / "project"
    shutil.copytree(src, project)
    _damage(project / "checkpoints", damage, tmp_path / "PWNED")
    report = find_latest([project])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    assert "project_configuration.iteration = 5" in report.resume_command, report.resume_command
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc, _model, _opt, seen = _accelerate(accelerate, project)
        acc.load_state(str(report.resume_from))
        assert seen.seen == int(expect.removeprefix("checkpoint_")) + 1
        acc.project_configuration.iteration = 5  # what the command says
        acc.save_state()
        assert (project / "checkpoints" / "checkpoint_5").is_dir() and not (project / "checkpoints" / "checkpoint_0").exists()
        acc, *_ = _accelerate(accelerate, tmp_path / "fresh")
        shutil.copytree(src, tmp_path / "fresh", dirs_exist_ok=True)
        acc.load_state(str(tmp_path / "fresh" / "checkpoints" / "checkpoint_4"))
        acc.save_state()  # without it: the newest state goes to the oldest number
        assert (tmp_path / "fresh" / "checkpoints" / "checkpoint_0").is_dir()
        if expect != "checkpoint_4":  # the rejected one really does not resume
            acc, *_ = _accelerate(accelerate, tmp_path / "fresh2")
            with pytest.raises(Exception):  # noqa: B017 - whatever the loader raises
                acc.load_state(str(project / "checkpoints" / "checkpoint_4"))


def test_accelerate_numbering_restarted_after_resume(tmp_path):
    """The trap of accelerate#1601/#3306: a run resumed with ``load_state`` (which does not restore
    ``project_configuration.iteration``) saves again from ``checkpoint_0`` - with ``total_limit``
    that folder was deleted, so the newest state silently lands under the OLDEST number, and
    "highest number" (accelerate's own ``load_state()`` without a folder) resumes an older one.
    The LR scheduler's step tells them apart: the newest state is chosen, and the resume proves it."""
    accelerate = pytest.importorskip("accelerate", reason="the 'frameworks' extra (accelerate) is not installed")
    from accelerate.utils import ProjectConfiguration

    project = tmp_path / "project"

    def prepared():
        torch.manual_seed(0)
        acc = accelerate.Accelerator(cpu=True, project_config=ProjectConfiguration(
            str(project), automatic_checkpoint_naming=True, total_limit=3))
        model = torch.nn.Linear(4, 4)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        return (acc, *acc.prepare(model, opt, torch.optim.lr_scheduler.StepLR(opt, step_size=2)))

    def train_and_save(acc, model, opt, sched, n):
        for _ in range(n):
            model(torch.ones(2, 4)).sum().backward()
            opt.step()
            sched.step()
            opt.zero_grad()
            acc.save_state()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train_and_save(*prepared(), 5)  # checkpoint_2..4 remain, the scheduler at 3..5
        acc, model, opt, sched = prepared()
        acc.load_state()  # no folder: the highest number, checkpoint_4
        train_and_save(acc, model, opt, sched, 1)  # iteration was not restored: saved as checkpoint_0
    assert sorted(p.name for p in (project / "checkpoints").iterdir()) == ["checkpoint_0", "checkpoint_3", "checkpoint_4"]
    report = find_latest([project])
    assert report.chosen is not None and report.chosen.name == "checkpoint_0", report.to_text()
    assert any("numbering restarted" in w for w in report.chosen.warnings), report.to_text()
    assert "project_configuration.iteration = 5" in report.resume_command
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc, _model, _opt, sched = prepared()
        acc.load_state(str(report.resume_from))
        assert sched.scheduler.last_epoch == 6  # the newest state: 5 steps, resumed, 1 more
        acc, _model, _opt, sched = prepared()
        acc.load_state()  # what "highest number" resumes: one step older
        assert sched.scheduler.last_epoch == 5


# --- torch DCP: a later save into the same folder died in finish() ---------------------------

def _dcp_model_state(step: int, width: int = 8) -> dict:
    torch.manual_seed(step)
    model = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.Linear(width, 8))
    return {"model": model.state_dict(), "train_state": {"step": step}}


class _Killed(BaseException):
    pass


def _die(*_args, **_kwargs):
    raise _Killed  # the process dies where torch deletes the old .metadata: the tmp is written and fsynced


@pytest.mark.parametrize(("later_width", "tmp_damage", "expect"), [
    (8, "none", "step-6"),  # same layout: the old index fits the new shards - loads the later save's data
    (8, "truncate", "step-6"),  # died while writing the tmp: cannot compare, dcp.load still reads .metadata
    (12, "none", "step-4"),  # another layout: the old offsets point into the wrong bytes
])
def test_dcp_resave_died_in_finish(tmp_path, later_width, tmp_damage, expect):
    """A fixed checkpoint folder re-saved (or an async save killed): torch writes ``.metadata.tmp``,
    fsyncs it, deletes ``.metadata``, renames. Killed before the delete, the folder holds the old
    ``.metadata``, the later save's shards and its complete ``.metadata.tmp``. gpulib refused every
    such folder; ``dcp.load`` reads ``.metadata`` only, and succeeds when the layouts agree."""
    import torch.distributed.checkpoint as dcp

    root = tmp_path / "ckpt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in (2, 4, 6):
            dcp.save(_dcp_model_state(step), storage_writer=dcp.FileSystemWriter(str(root / f"step-{step}"), thread_count=2))
        writer = dcp.FileSystemWriter(str(root / "step-6"), thread_count=2, overwrite=True)
        writer.fs.rm_file = _die
        with pytest.raises(BaseException):  # noqa: B017 - DCP wraps the death in its CheckpointException
            dcp.save(_dcp_model_state(8, later_width), storage_writer=writer)
    assert (root / "step-6" / ".metadata").is_file() and (root / "step-6" / ".metadata.tmp").is_file()
    _damage(root, f"{tmp_damage} step-6/.metadata.tmp" if tmp_damage != "none" else "none", tmp_path / "PWNED")
    report = find_latest([root])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    step6 = next(c for c in report.candidates if c.name == "step-6")
    assert any(".metadata.tmp left behind next to .metadata" in x for x in step6.warnings + step6.reasons), report.to_text()
    state = _dcp_model_state(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load(state, checkpoint_id=str(report.resume_from))
        assert state["train_state"]["step"] == report.chosen.step  # the step gpulib read is the one that loads
        if expect == "step-6":
            assert "--checkpoint.load_step 6" in report.resume_command  # the folder's number, not the content's 8
        else:  # the rejected one really does not load
            with pytest.raises(BaseException):  # noqa: B017 - DCP's CheckpointException is a BaseException
                dcp.load(_dcp_model_state(0), checkpoint_id=str(root / "step-6"))


# --- DeepSpeed: ZeRO stages, two gloo ranks, save_latest=False, a `latest` ahead of its data --

DS_SCRIPT = r"""
import os, sys, torch, deepspeed
mode, path, port, stage, rank, world, save_latest = sys.argv[1:8]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=rank, WORLD_SIZE=world, LOCAL_RANK=rank)
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
cfg = {"train_batch_size": 2 * int(world), "zero_optimization": {"stage": int(stage)}, "zero_allow_untested_optimizer": True}
eng, *_ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
if mode == "save":
    for s in range(6):
        loss = eng(torch.ones(2, 4)).sum(); eng.backward(loss); eng.step()
        if s % 2 == 1:
            eng.save_checkpoint(path, save_latest=save_latest == "1")
else:  # "load": path is the series folder plus a tag, or the series folder alone to follow `latest`
    folder, tag = (path, None) if mode == "load-latest" else (os.path.dirname(path), os.path.basename(path))
    got, _ = eng.load_checkpoint(folder, tag=tag)
    assert got is not None, "load_checkpoint returned None"
print("DS-OK", rank, eng.global_steps)
"""


def _ds(mode: str, path: Path, tmp: Path, stage: int, world: int = 1, save_latest: bool = True) -> int:
    """Run ``world`` gloo ranks of DS_SCRIPT; the global step every rank reports after it (all equal)."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # a free loopback port for the gloo group
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "DS_BUILD_OPS": "0", "PYTHONWARNINGS": "ignore"}
    procs = [subprocess.Popen([sys.executable, "-c", DS_SCRIPT, mode, str(path), port, str(stage), str(rank), str(world),
                               "1" if save_latest else "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env, cwd=tmp) for rank in range(world)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=300)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    steps = set()
    for rank, out in enumerate(outs):
        assert f"DS-OK {rank} " in out, out[-3000:]
        steps.add(int(out.split(f"DS-OK {rank} ")[1].split()[0]))
    assert len(steps) == 1, steps
    return steps.pop()


@pytest.fixture(scope="module")
def ds_runs(tmp_path_factory):
    """ZeRO-3 on one rank saved with save_latest=False; ZeRO-1 and ZeRO-2 on two gloo ranks."""
    pytest.importorskip("deepspeed", reason="the 'frameworks' extra (deepspeed) is not installed")
    runs = {}
    for stage, world, latest in ((3, 1, False), (1, 2, True), (2, 2, True)):
        tmp = tmp_path_factory.mktemp(f"ds_z{stage}_w{world}")
        _ds("save", tmp / "ck", tmp, stage, world, latest)
        runs[stage] = (tmp / "ck", world)
    return runs


@pytest.mark.parametrize(("stage", "damage", "expect"), [
    (3, "none", "global_step6"),
    (3, "delete global_step6/zero_pp_rank_0_mp_rank_00_optim_states.pt", "global_step4"),
    (3, "truncate global_step6/zero_pp_rank_0_mp_rank_00_model_states.pt", "global_step4"),
    (1, "delete global_step6/zero_pp_rank_1_mp_rank_00_optim_states.pt", "global_step4"),
    (2, "zero global_step6/zero_pp_rank_1_mp_rank_00_optim_states.pt", "global_step4"),
])
def test_deepspeed_zero_stages(ds_runs, tmp_path, stage, damage, expect):
    """One rank's optimizer shard lost (a node that died before its write landed) while rank 0
    already wrote ``latest``: the tag ``latest`` names is refused, the older one resumes on every
    rank, and following ``latest`` (``load_checkpoint(dir)``) really fails. Without a ``latest``
    (save_latest=False) the command passes the tag."""
    src, world = ds_runs[stage]
    ck = tmp_path / "ck"
    shutil.copytree(src, ck)
    _damage(ck, damage, tmp_path / "PWNED")
    report = find_latest([ck])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    assert _ds("load", report.resume_from, tmp_path, stage, world) == int(expect.removeprefix("global_step"))
    if stage == 3:
        assert not (ck / "latest").exists() and "`latest` does not name it: pass the tag" in report.resume_command
    if expect != "global_step6":
        rejected = dict((p.name, why) for p, why in report.rejected)["global_step6"]
        assert "zero_pp_rank" in rejected, rejected
        if (ck / "latest").exists():
            assert any("latest" in d and "global_step6" in d and "incomplete" in d for d in report.disagreements)
            with pytest.raises(AssertionError, match="Error"):  # following `latest` really fails (the rank raises)
                _ds("load-latest", ck, tmp_path, stage, world)
