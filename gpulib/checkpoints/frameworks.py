"""Resumable = what the framework's own loader opens. One row per layout, read by ``layouts``.

A checkpoint is worth recommending only if the call that resumes it will succeed, so the rule
is the loader's, not ours: ``required`` are the files the resume call opens unconditionally (a
missing or damaged one makes it raise); ``optional`` are files it opens only when present (a
damaged one still makes it raise, so every present file must verify); ``step_from`` says where
the training step comes from. Ties and ordering are numeric, never text order
(``checkpoint_10`` is newer than ``checkpoint_9``).

| layout | resume call | required | optional (verified when present) | step from |
|---|---|---|---|---|
| hf_trainer | ``Trainer.train(resume_from_checkpoint=dir)`` | the weights it opens (``model.safetensors``, else ``pytorch_model.bin``, else the PEFT adapter ``adapter_model.safetensors`` - its ``adapter_config.json`` is not read, the model's own LoRA config is - else the safetensors index - else the .bin index - and every shard it names; the others are never opened), ``trainer_state.json`` (written last; a JSON object) | ``config.json``, ``optimizer.pt`` + ``scheduler.pt`` (opened only as a pair: with one missing neither is loaded), ``scaler.pt``, ``rng_state.pth`` / ``rng_state_<rank>.pth`` (a missing one only restarts that rank's streams) | ``global_step`` in trainer_state.json, else ``checkpoint-N`` |
| accelerate | ``accelerator.load_state(dir)`` | ``model[_i].safetensors`` (else ``pytorch_model[_i].bin``), ``optimizer[_i].bin``, every ``scheduler``/``sampler``/``scaler``/``custom_checkpoint`` file the series' other checkpoints have (a lone checkpoint: ``scheduler.bin`` when the optimizer state shows a scheduler, ``initial_lr``) | ``random_states_<rank>.pkl`` (a failure is only logged) | the folder number (``load_state`` does not restore ``project_configuration.iteration``: the command sets it; a series whose numbering restarted - ``scheduler.bin``'s ``last_epoch`` going down as the number goes up - is ordered by ``last_epoch``) (``checkpoint_N`` counts saves, ``step_100`` of ``save_state(dir)``); ``random_states`` ``step`` is the gradient-accumulation counter, never used |
| deepspeed | ``engine.load_checkpoint(dir, tag)`` | ``mp_rank_XX_model_states.pt`` (every MP rank; ZeRO-3: every DP rank), ZeRO-1/2/3: every ``zero_pp_rank_D_mp_rank_XX_optim_states.pt`` | ``latest`` (names the tag) | ``global_steps`` in model states, else ``global_stepN`` |
| lightning | ``trainer.fit(model, ckpt_path=file)`` | the ``.ckpt`` file with ``pytorch-lightning_version``, ``state_dict``, ``optimizer_states``, ``lr_schedulers`` (a ``save_weights_only`` file has none: KeyError) | | ``global_step`` in it, else ``step=N`` in the name |
| dcp / torchtitan | ``dcp.load(state_dict, checkpoint_id=dir)`` | ``.metadata`` and every ``.distcp`` it names, long enough; every non-tensor item starts as torch.save bytes; a leftover ``.metadata.tmp`` (a later save into the folder died in ``finish()``) indexing the shards the same way | | ``step`` in the state, else ``step-N`` (torchtitan's ``--checkpoint.load_step`` is always the folder's N; a ``step-N`` folder without a ``train_state`` item is a plain ``dcp.save``, e.g. an FSDP2 loop, not torchtitan) |
| megatron | ``--load dir`` | ``mp_rank_*/model_optim_rng.pt`` for every TP x PP rank (or DCP + ``metadata.json``) | ``distrib_optim.pt`` | ``iteration``, else ``iter_NNNNNNN`` |
| torch_file | your ``torch.load(file)`` | the file | ``<stem>.json`` manifest, seal manifest (a ``<stem>.json.tmp`` refuses it; a ``<name>.tmp`` is only the next save that died) | ``global_step``/``step``/``iteration`` in it, else the number in the name, else ``epoch`` in it (``last.pt`` / ``best.pt`` loops; then called epoch, never compared with steps) |

In every layout a file that names a dangerous global (UNSAFE) or one gpulib does not know as safe
(needs review) makes the whole checkpoint unrecommendable: resuming runs that pickle. A file the
loader does not open (a shadowed ``pytorch_model.bin``, an unpaired ``optimizer.pt``) is still
inspected, and its damage is a warning. A FIFO or device is never opened (it would block): the
frameworks' ``os.path.isfile`` calls it absent. Order is numeric: the step, then the name with its
digits compared as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Framework:
    layout: str
    resume_call: str
    required: tuple[str, ...]  # human-readable names of what the resume call opens unconditionally
    optional: tuple[str, ...]  # opened when present: verified when present
    step_from: str  # "content" (a counter in the state) or "name" (the folder / file number)


FRAMEWORKS = {
    f.layout: f for f in (
        Framework("hf_trainer", "Trainer.train(resume_from_checkpoint=...)",
                  ("model weights", "trainer_state.json"),
                  ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state.pth", "rng_state_<rank>.pth"), "content"),
        Framework("accelerate", "accelerator.load_state(...)",
                  ("model[_i].safetensors | pytorch_model[_i].bin", "optimizer[_i].bin",
                   "scheduler/sampler/scaler files the series' other checkpoints have"),
                  ("random_states_<rank>.pkl",), "name"),
        Framework("deepspeed", "engine.load_checkpoint(dir, tag=...)",
                  ("mp_rank_XX_model_states.pt", "zero_pp_rank_D_mp_rank_XX_optim_states.pt (ZeRO)"),
                  ("latest",), "content"),
        Framework("lightning", "trainer.fit(model, ckpt_path=...)", ("the .ckpt file",), (), "content"),
        Framework("dcp", "dcp.load(state_dict, checkpoint_id=...)", (".metadata", "every .distcp it names"), (), "content"),
        Framework("torchtitan", "dcp.load via --checkpoint.load_step", (".metadata", "every .distcp it names"), (), "content"),
        Framework("megatron", "--load DIR", ("mp_rank_*/model_optim_rng.pt or DCP + metadata.json",),
                  ("distrib_optim.pt",), "content"),
        Framework("torch_file", "torch.load(file)", ("the file",), ("<stem>.json", "seal manifest"), "content"),
    )
}


def step_of(layout: str, step_name: int | None, step_content: int | None) -> int | None:
    """The step used to order checkpoints: per the table, never text order."""
    if FRAMEWORKS[layout].step_from == "name" and step_name is not None:
        return step_name
    return step_content if step_content is not None else step_name
