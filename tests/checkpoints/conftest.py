"""Real checkpoints written by torch (torch is allowed in tests; gpulib.checkpoints never imports it)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(32, 8)
        self.proj = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.proj(self.emb(x)))


def training_state(step: int = 120, ddp_prefix: bool = True, world_size: int = 2) -> dict:
    """What a careful training script saves: model (DDP keys), AdamW, scheduler, scaler, RNG."""
    torch.manual_seed(0)
    model = TinyNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
    model(torch.arange(4)).sum().backward()
    opt.step()
    sched.step()
    sd = model.state_dict()
    if ddp_prefix:
        sd = {f"module.{k}": v for k, v in sd.items()}
    return {
        "model": sd, "optimizer": opt.state_dict(), "lr_scheduler": sched.state_dict(),
        "scaler": {"scale": 65536.0, "growth_factor": 2.0, "_growth_tracker": 3},
        "global_step": step, "epoch": 1,
        "rng_state": {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state(),
                      "cuda": [torch.get_rng_state()[:16] for _ in range(world_size)]},
        "sampler": {"epoch": 1, "index": 512},
    }


@pytest.fixture(scope="session")
def ckpt_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ckpts")


@pytest.fixture(scope="session")
def full_ckpt(ckpt_dir) -> Path:
    p = ckpt_dir / "full_step_120.pt"
    torch.save(training_state(), p)
    return p


@pytest.fixture(scope="session")
def legacy_ckpt(ckpt_dir) -> Path:
    p = ckpt_dir / "legacy.pt"
    torch.save(training_state(), p, _use_new_zipfile_serialization=False)
    return p


@pytest.fixture(scope="session")
def dcp_ckpt(ckpt_dir) -> Path:
    import warnings

    import torch.distributed.checkpoint as dcp

    p = ckpt_dir / "dcp_step_40"
    state = training_state(40, ddp_prefix=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"model": state["model"], "optimizer": state["optimizer"]["state"],
                  "train_state": {"step": 40}, "dataloader": {"index": 7}}, checkpoint_id=str(p))
    return p
