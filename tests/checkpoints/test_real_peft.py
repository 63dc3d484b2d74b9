"""HF Trainer with a PEFT/LoRA model writes adapter-only checkpoints (``adapter_model.safetensors``
+ ``adapter_config.json``, no ``model.safetensors``); tests damage the newest and the Trainer's own
``resume_from_checkpoint`` with the same PEFT model judges ``ckpt latest``. CPU, a tiny GPT-2 built
in code, no downloads. Skipped (with the reason) where the ``frameworks`` extra is not installed."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from gpulib.checkpoints.latest import find_latest

pytestmark = pytest.mark.frameworks
torch = pytest.importorskip("torch")


def _train(transformers, peft, out: Path, max_steps: int, resume: str | None) -> None:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=32, n_positions=16)
    lora = peft.LoraConfig(r=2, target_modules=["c_attn"], fan_in_fan_out=True)
    model = peft.get_peft_model(transformers.GPT2LMHeadModel(cfg), lora)
    data = [{"input_ids": torch.arange(i, i + 8) % 32, "labels": torch.arange(i, i + 8) % 32} for i in range(16)]
    args = transformers.TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=2,
                                          per_device_train_batch_size=2, report_to=[], use_cpu=True,
                                          disable_tqdm=True, logging_strategy="no")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.Trainer(model=model, args=args, train_dataset=data).train(resume_from_checkpoint=resume)


@pytest.fixture(scope="module")
def peft_run(tmp_path_factory):
    transformers = pytest.importorskip("transformers", reason="the 'frameworks' extra (transformers) is not installed")
    peft = pytest.importorskip("peft", reason="the 'frameworks' extra (peft) is not installed")
    out = tmp_path_factory.mktemp("peft") / "out"
    _train(transformers, peft, out, 6, None)
    names = {p.name for p in (out / "checkpoint-6").iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json"} <= names and "model.safetensors" not in names
    return transformers, peft, out


@pytest.mark.parametrize(("damage", "expect", "warning"), [
    ("none", "checkpoint-6", None),
    ("cut adapter_model.safetensors", "checkpoint-4", None),  # SafetensorError on resume
    ("delete adapter_model.safetensors", "checkpoint-4", None),  # "Can't find a valid checkpoint"
    # load_adapter(dir, "default") takes the config from the model already built: still resumes, but
    # the adapter can no longer be loaded on its own - said as a warning, not a refusal
    ("delete adapter_config.json", "checkpoint-6", "no adapter_config.json"),
    ("write adapter_config.json {", "checkpoint-6", "adapter_config.json unreadable"),
])
def test_peft_adapter_latest_resumes(peft_run, tmp_path, damage, expect, warning):
    transformers, peft, src = peft_run
    out = tmp_path / "out"
    shutil.copytree(src, out)
    newest = out / "checkpoint-6"
    verb, _, rest = damage.partition(" ")
    name, _, text = rest.partition(" ")
    if verb == "cut":
        with open(newest / name, "r+b") as fh:
            fh.truncate((newest / name).stat().st_size // 2)
    elif verb == "delete":
        (newest / name).unlink()
    elif verb == "write":
        (newest / name).write_text(text)
    report = find_latest([out])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    assert any("adapter-only (PEFT/LoRA)" in a for a in report.advice), report.to_text()
    assert "resume_from_checkpoint" in report.resume_command
    if warning:
        assert any(warning in w for w in report.chosen.warnings), report.to_text()
    else:
        assert not any("adapter_config" in w for w in report.chosen.warnings), report.to_text()
    if expect != "checkpoint-6":  # the rejected newest really does not resume
        with pytest.raises(Exception):  # noqa: B017 - whatever the Trainer raises
            _train(transformers, peft, tmp_path / "broken", 8, str(newest))
    _train(transformers, peft, out, 8, str(report.resume_from))
    assert (out / "checkpoint-8" / "adapter_model.safetensors").is_file()
