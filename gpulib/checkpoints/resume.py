"""What a checkpoint lacks, what resuming without it costs, and the command that resumes it.

Resuming from weights alone "works" and silently changes the run: Adam moments restart from
zero, the LR schedule jumps back to warmup, the data order restarts. The operator should decide
that knowingly, so every missing piece is spelled out with its cost.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from gpulib.checkpoints.contents import category_of
from gpulib.checkpoints.layouts import Candidate

COSTS = {
    "optimizer": "no optimizer state: Adam moments restart from zero (expect a loss spike; effectively a warm restart)",
    "scheduler": "no LR-scheduler state: the schedule restarts at warmup unless the step is restored by hand",
    "rng": "no RNG state: data order, dropout and augmentation streams restart (the run is no longer reproducible)",
    "dataloader": "no sampler/dataloader state: the epoch restarts from its first batch (some samples seen twice, others "
                  "skipped)",
    "scaler": "no grad-scaler state: the fp16 loss scale restarts at its initial value (a few skipped steps)",
}
ALWAYS_EXPECTED = ("optimizer", "scheduler", "rng", "dataloader")
GPUS = "<gpus-per-node>"
ARGS = "<your usual args>"


def lacks(c: Candidate, siblings: list[Candidate]) -> list[str]:
    """Missing pieces with their cost. The grad scaler only counts when a sibling checkpoint of the
    same series has one (fp16 runs save it; bf16/fp32 runs have none to lose)."""
    out = [COSTS[cat] for cat in ALWAYS_EXPECTED if cat not in c.categories]
    if "scaler" not in c.categories and any("scaler" in s.categories for s in siblings if s.series == c.series):
        out.append(COSTS["scaler"])
    if "rng" in c.categories and c.rng_ranks and c.world_size and c.rng_ranks < c.world_size:
        out.append(f"RNG state for only {c.rng_ranks} of {c.world_size} ranks: the other ranks restart their streams")
    if c.step is None:
        out.append("no step counter: logging, LR schedule and checkpoint names restart from 0")
    elif c.counter == "epoch":
        out.append(f"no step counter, only the epoch ({c.step}): restart at epoch {c.step + 1}; a per-batch LR schedule "
                   "or step-based logging restarts from 0 unless you recompute the step from the epoch")
    return out


#: what an older checkpoint can give back that the chosen one lacks, in the operator's words
KEPT = {"optimizer": "optimizer state", "scheduler": "LR-scheduler state", "rng": "RNG state",
        "dataloader": "sampler/dataloader state", "scaler": "grad-scaler state"}


def older_with_more(c: Candidate, candidates: list[Candidate]) -> str | None:
    """The newest older checkpoint of the same run that holds state the chosen one lacks (a run
    switched to ``save_only_model`` / ``save_weights_only``, a save that dropped a file the loader
    skips silently). Why: the newest resumable one is not always the best one to resume - giving
    up a few steps may keep the optimizer moments - and only the operator can weigh that."""
    missing = [k for k in KEPT if k not in c.categories]
    for o in sorted(candidates, key=lambda x: x.step if x.step is not None else -1, reverse=True):
        if o is c or o.series != c.series or o.layout != c.layout or not o.complete or o.step is None \
                or c.step is None or o.step >= c.step:
            continue
        kept = [KEPT[k] for k in missing if k in o.categories]
        if kept:
            return (f"{o.name} (step {o.step}, {c.step - o.step} steps older) has the {', '.join(kept)} that "
                    f"{c.name} lacks: resume from {o.path} instead to keep {'them' if len(kept) > 1 else 'it'}")
    return None


def advice(c: Candidate) -> list[str]:
    out = []
    if c.layout == "hf_trainer" and "optimizer" not in c.categories:
        out.append("Trainer.train(resume_from_checkpoint=...) resumes it WITHOUT a warning: it loads the weights and "
                   "silently starts a fresh optimizer and LR schedule (a save_only_model=True save, or optimizer.pt / "
                   "scheduler.pt missing)")
    if c.layout == "torch_file":
        out.append(f"no framework resumes a plain torch.save file - your loader, with the keys in it: {torch_file_loader(c)}")
    if "adapter" in c.categories:
        out.append("adapter-only (PEFT/LoRA): it holds the adapter weights, not the base model - resume with the same "
                   "base model wrapped by get_peft_model(base, <the same LoraConfig>); Trainer loads the adapter into it")
    if c.model_prefix:
        why = "DDP/DataParallel" if c.model_prefix == "module." else "torch.compile"
        out.append(f"model keys carry the {why} prefix '{c.model_prefix}': load into the same wrapper, or strip it with "
                   f"torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, '{c.model_prefix}')")
    if any("needs_allowlist" == f.severity for r in c.reports for f in r.findings):
        out.append("torch.load(weights_only=True) refuses some objects in it (numpy RNG, argparse, ...): see `gpulib ckpt "
                   "inspect` for the add_safe_globals list")
    return out


AUTOMATIC_NAME = re.compile(r"^checkpoint_(\d+)$")


def accelerate_next_iteration(c: Candidate, candidates: list[Candidate]) -> int | None:
    """accelerate's ``automatic_checkpoint_naming`` numbers saves with
    ``project_configuration.iteration``, which ``load_state`` does NOT restore: a resumed run
    starts at 0 again, so its next ``save_state`` raises "Checkpoint directory ... already exists"
    - or, with ``total_limit`` having deleted ``checkpoint_0``, silently writes the newest state
    under the OLDEST number, where every "highest number wins" rule (accelerate's own
    ``load_state()``, this one) will never find it. The safe value is one past every folder there,
    the rejected ones included (they still block their names)."""
    if c.layout != "accelerate" or not AUTOMATIC_NAME.match(c.name):
        return None
    numbers = [int(m.group(1)) for o in candidates if o.layout == "accelerate" and o.series == c.series
               and (m := AUTOMATIC_NAME.match(o.name))]
    return max(numbers) + 1


def command(c: Candidate, series_dir: Path, pointer_targets: list[str], next_iteration: int | None = None) -> str:
    p = shlex.quote(str(c.path))  # shell words
    py = repr(str(c.path))  # Python literals in the "# then call ..." hints
    torchrun = f"torchrun --nproc-per-node={GPUS} --max-restarts=3"
    if c.layout == "hf_trainer":
        return f"{torchrun} <train.py> {ARGS} --resume_from_checkpoint {p}   # Trainer.train(resume_from_checkpoint={py})"
    if c.layout == "accelerate":
        then = "" if next_iteration is None else f", then accelerator.project_configuration.iteration = {next_iteration}"
        return f"accelerate launch <train.py> {ARGS}   # with accelerator.load_state({py}){then} before the loop"
    if c.layout == "lightning":
        return f"python <train.py> fit {ARGS} --ckpt_path {p}   # or trainer.fit(model, ckpt_path={py})"
    if c.layout == "deepspeed":
        tag_note = ("" if c.name in pointer_targets
                    else f" (`latest` does not name it: pass the tag, or write {c.name} into latest)")
        return f"deepspeed <train.py> {ARGS}   # engine.load_checkpoint({str(series_dir)!r}, tag={c.name!r}){tag_note}"
    if c.layout == "megatron":
        step_flag = "" if str(c.step) in pointer_targets else f" --ckpt-step {c.step}"
        return f"{torchrun} pretrain_gpt.py {ARGS} --load {shlex.quote(str(series_dir))}{step_flag}"
    if c.layout == "torchtitan":  # load_step N opens the folder step-N: the number in the name, whatever the content says
        load_step = c.step_name if c.step_name is not None else c.step
        return (f"{torchrun} -m torchtitan.train --job.config_file <config.toml> --job.dump_folder "
                f"{shlex.quote(str(series_dir.parent))} --checkpoint.enable --checkpoint.folder "
                f"{shlex.quote(series_dir.name)} --checkpoint.load_step {load_step}")
    if c.layout == "dcp":
        return f"{torchrun} <train.py> {ARGS} --resume {p}   # dcp.load(state_dict, checkpoint_id={py})"
    return f"{torchrun} <train.py> {ARGS} --resume {p}"


def torch_file_loader(c: Candidate) -> str:
    """A plain torch.save file has no framework to resume it: the user's own loader does. Spell
    that loader with the keys really in the file (``model_state_dict``, ``optimizer_state_dict``,
    ``epoch`` ...), ``weights_only=True`` always (a checkpoint that needs more is flagged, never
    unpickled), so the template is filled in, not guessed."""
    report = next((r for r in c.reports if r.summary), None)
    if report is None:
        return f"ck = torch.load({str(c.path)!r}, map_location='cpu', weights_only=True)"
    tops = report.summary.top_keys
    model_tops = [t.name.split(".")[0].split("[")[0] for t in report.tensors if category_of(t.name) == "model_or_other"]
    model_tensors = [t for t in report.tensors if category_of(t.name) == "model_or_other"]
    best = max(set(model_tops), key=model_tops.count) if model_tops else None
    nested = best is not None and 2 * model_tops.count(best) > len(model_tops) and any(
        t.name.startswith((best + ".", best + "[")) for t in model_tensors)
    steps = [f"ck = torch.load({str(c.path)!r}, map_location='cpu', weights_only=True)"]
    if any(f.severity == "needs_allowlist" for f in report.findings):  # numpy RNG state and the like
        steps[0] = f"with torch.serialization.safe_globals(<the list `gpulib ckpt inspect` prints>): {steps[0]}"
    if model_tops:
        steps.append(f"model.load_state_dict(ck[{best!r}])" if nested else "model.load_state_dict(ck)")
    for cat, obj in (("optimizer", "optimizer"), ("scheduler", "scheduler"), ("scaler", "scaler")):
        key = next((k for k in tops if category_of(k) == cat), None)
        if key and nested:
            steps.append(f"{obj}.load_state_dict(ck[{key!r}])")
    counter = report.summary.step_key or ("epoch" if report.summary.epoch is not None else None)
    if counter and nested and "." not in counter:
        steps.append(f"start_{'epoch' if counter == 'epoch' else 'step'} = ck[{counter!r}] + 1")
    return "; ".join(steps)
