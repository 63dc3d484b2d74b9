"""FSDP2 (``fully_shard``), and FSDP1 with a sharded state dict, on two CPU ranks (torchrun, gloo
on loopback) save through torch.distributed.checkpoint; tests damage the newest save the way a
crash does, and ``dcp.load`` into the same sharded model on two ranks (then ``set_state_dict``)
judges ``ckpt latest``: the one it names loads, and the newest one it rejects does not. Every rank
writes its own ``__<rank>_0.distcp``; the coordinator writes ``.metadata`` last, so a rank's shard
lost or cut short, or ``.metadata`` never written, are the states a crash leaves."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpulib.checkpoints.latest import find_latest
from tests.checkpoints.two_ranks import torchrun_two

pytestmark = pytest.mark.frameworks
torch = pytest.importorskip("torch")

FSDP2_SCRIPT = r"""
import os, sys, warnings
warnings.simplefilter("ignore")
import torch, torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
from torch.distributed.tensor import DTensor

dist.init_process_group("gloo")
rank = dist.get_rank()
wrapper = sys.argv.pop(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
if wrapper == "fsdp2":
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    assert all(isinstance(p, DTensor) for p in model.parameters())  # really sharded across the two ranks
else:  # FSDP1: flat parameters; get_state_dict gives ShardedTensors
    model = FullyShardedDataParallel(model, device_id=torch.device("cpu"))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

def state(step):
    msd, osd = get_state_dict(model, opt)
    return {"model": msd, "optim": osd, "train": {"step": step}}

if sys.argv[1] == "save":
    for step in range(1, 7):
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
        opt.zero_grad()
        if step % 2 == 0:
            dcp.save(state(step), checkpoint_id=os.path.join(sys.argv[2], f"step-{step}"))
else:
    for path in sys.argv[2:]:
        st = state(-1)
        try:
            dcp.load(st, checkpoint_id=path)
            set_state_dict(model, opt, model_state_dict=st["model"], optim_state_dict=st["optim"])
            verdict = f"LOADED step {st['train']['step']}"
        except BaseException as exc:  # DCP's CheckpointException is a BaseException
            verdict = f"FAILED {type(exc).__name__}"
        dist.barrier()
        os.write(1, f"RANK {rank} {os.path.basename(path)} {verdict}\n".encode())
os.write(1, f"FSDP2-OK {rank}\n".encode())
dist.destroy_process_group()
"""


def _torchrun(tmp: Path, wrapper: str, *args: str) -> str:
    run = torchrun_two(tmp, "fsdp2_train.py", FSDP2_SCRIPT, wrapper, *args)
    assert "FSDP2-OK 0" in run.stdout and "FSDP2-OK 1" in run.stdout, (run.stdout + run.stderr)[-4000:]
    return run.stdout


def _save_run(tmp_path_factory, wrapper: str) -> Path:
    fsdp = pytest.importorskip("torch.distributed.fsdp", reason="this torch has no FSDP")
    if not hasattr(fsdp, "fully_shard"):
        pytest.skip("this torch has no FSDP2 (fully_shard)")
    tmp = tmp_path_factory.mktemp(wrapper)
    _torchrun(tmp, wrapper, "save", str(tmp / "ck"))
    assert sorted(p.name for p in (tmp / "ck" / "step-6").iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    return tmp / "ck"


@pytest.fixture(scope="module")
def fsdp2_run(tmp_path_factory):
    return _save_run(tmp_path_factory, "fsdp2")


@pytest.fixture(scope="module")
def fsdp1_run(tmp_path_factory):
    return _save_run(tmp_path_factory, "fsdp1")


@pytest.mark.parametrize(("damage", "expect", "warning"), [
    ("none", "step-6", None),
    ("delete __1_0.distcp", "step-4", None),  # rank 1 died before its shard was written
    ("cut __1_0.distcp", "step-4", None),  # rank 1's shard cut short (node lost mid-write)
    ("cut __0_0.distcp", "step-4", None),
    ("delete .metadata", "step-4", None),  # the save died before finish()
    ("stale __2_0.distcp", "step-6", "not referenced by .metadata"),  # a 3-rank run's shard left in the folder
])
def test_fsdp2_dcp_latest_resumes(fsdp2_run, tmp_path, damage, expect, warning):
    _damage_latest_resume(fsdp2_run, "fsdp2", tmp_path, damage, expect, warning)


@pytest.mark.parametrize(("damage", "expect"), [
    ("none", "step-6"),
    ("cut __1_0.distcp", "step-4"),
    ("delete .metadata", "step-4"),
])
def test_fsdp1_sharded_state_dict_latest_resumes(fsdp1_run, tmp_path, damage, expect):
    """FSDP1 (``FullyShardedDataParallel``) shards as ShardedTensors: the same files, the same rules."""
    _damage_latest_resume(fsdp1_run, "fsdp1", tmp_path, damage, expect, None)


def _damage_latest_resume(src: Path, wrapper: str, tmp_path: Path, damage: str, expect: str, warning: str | None) -> None:
    ck = tmp_path / "ck"
    shutil.copytree(src, ck)
    verb, name = damage.split(" ") if damage != "none" else ("none", "")
    newest = ck / "step-6"
    if verb == "delete":
        (newest / name).unlink()
    elif verb == "cut":
        with open(newest / name, "r+b") as fh:
            fh.truncate((newest / name).stat().st_size * 2 // 3)
    elif verb == "stale":
        shutil.copy(newest / "__1_0.distcp", newest / name)
    report = find_latest([ck])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    assert report.chosen.layout == "dcp" and "dcp.load(" in report.resume_command, report.to_text()
    if warning:
        assert any(warning in w for w in report.chosen.warnings), report.to_text()
    paths = [str(report.resume_from)] + ([str(newest)] if expect != "step-6" else [])
    out = _torchrun(tmp_path, wrapper, "load", *paths)
    for rank in (0, 1):
        assert f"RANK {rank} {expect} LOADED step {expect.split('-')[1]}" in out, out
        if expect != "step-6":  # the rejected newest really does not load
            assert f"RANK {rank} step-6 FAILED" in out, out
