"""A tiny LightningModule fitted on CPU: the run the Lightning checkpoint tests damage and resume."""

from __future__ import annotations

import warnings

import torch


def fit_tiny(L, max_steps: int, ckpt_path: str | None, callbacks: list) -> None:
    """Fit a one-layer model for ``max_steps`` (resuming from ``ckpt_path``) with ``callbacks``."""
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
    trainer = L.Trainer(max_steps=max_steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=callbacks,
                        enable_checkpointing=bool(callbacks))  # a resume-only fit writes nothing (no ./checkpoints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Tiny(), ckpt_path=ckpt_path)
