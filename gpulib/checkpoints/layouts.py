"""Framework layouts: find checkpoints under a root and judge each one complete or not.

Each framework writes a different set of files and a different "written last" marker (see
reference/checkpoints.md section 2): HF Trainer ``trainer_state.json``; DCP/torchtitan
``.metadata``; Megatron ``metadata.json`` and the tracker file; DeepSpeed ``latest`` (written
without a barrier, so it can point at a tag whose shards never landed); Lightning and accelerate
nothing at all. A checkpoint is complete when every expected file (per rank / shard) exists and
passes the file checks - computed as "expected set minus present set", over the union of the
roots given (one per node), so node-local disks show which node lacks which shard.

"Newest" comes from the step in the name or in the content (per :mod:`frameworks`' table),
never from mtime or text order. Which files each loader needs is that table too.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.checkpoints import dcp
from gpulib.checkpoints.files import inspect_path
from gpulib.checkpoints.frameworks import step_of
from gpulib.checkpoints.records import FileReport

MAX_SCAN_DIRS = 20_000
MAX_SCAN_DEPTH = 5
DIR_PATTERNS = (
    ("hf_trainer", re.compile(r"^checkpoint-(\d+)$")),
    ("accelerate", re.compile(r"^checkpoint_(\d+)$")),
    ("deepspeed", re.compile(r"^global_step(\d+)$")),
    ("megatron", re.compile(r"^iter_(\d{7})$")),
    ("torchtitan", re.compile(r"^step-(\d+)$")),
)
STEP_IN_NAME = re.compile(r"(?:step|iter|global_step|checkpoint|ckpt)[=_-]?(\d+)", re.I)
DS_OPTIM = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$")
DS_MODEL = re.compile(r"^(?:zero_pp_rank_(\d+)_)?mp_rank_(\d+)_model_states\.pt$")
CHECKPOINT_WORDS = re.compile(r"ckpt|checkpoint|model|step|optim|iter|epoch|state", re.I)
TRAINER_TMP = re.compile(r"^tmp-checkpoint-(\d+)$")
RANK_FILE = re.compile(r"^(?:rng_state|random_states)_(\d+)\.(?:pth|pkl)$")


@dataclass
class Candidate:
    """One checkpoint (one step) of one series, possibly spread over several roots."""

    layout: str
    series: str  # path of the series directory relative to its root ('' = the root itself)
    name: str  # dir or file name inside the series
    paths: list[Path] = field(default_factory=list)  # one per root that holds it
    step_name: int | None = None
    step_content: int | None = None
    complete: bool = False
    reasons: list[str] = field(default_factory=list)  # why incomplete / invalid
    warnings: list[str] = field(default_factory=list)
    categories: set[str] = field(default_factory=set)  # model optimizer scheduler rng dataloader scaler
    rng_ranks: int | None = None
    world_size: int | None = None
    model_prefix: str | None = None
    reports: list[FileReport] = field(default_factory=list)
    sidecar: dict | None = None
    #: a counter in the content that only grows with training, where the name's number counts saves
    #: (accelerate: the LR scheduler's ``last_epoch``); ordered by it only when the numbering restarted
    progress: int | None = None
    order_by_progress: bool = False
    #: what ``step`` counts: "step", or "epoch" for a plain torch.save loop that records only its epoch
    counter: str = "step"

    @property
    def step(self) -> int | None:
        if self.order_by_progress and self.progress is not None:
            return self.progress
        return step_of(self.layout, self.step_name, self.step_content)

    @property
    def path(self) -> Path:
        return self.paths[0]

    @property
    def untrusted(self) -> bool:
        """Refused because resuming (or loading a file in it) would unpickle code: UNSAFE / needs review."""
        return any(r.startswith(("UNSAFE", "needs review")) for r in self.reasons)

    def distrust(self, report: FileReport, what: str) -> None:
        for f in report.findings:
            if f.severity == "unsafe":
                self.reasons.append(f"UNSAFE: {what}: {f.message}")
            elif f.severity == "needs_review":
                self.reasons.append(f"needs review: {what}: {f.message}")

    def absorb(self, report: FileReport, what: str, blocking: bool = True) -> FileReport:
        """Take one file's verdict into this checkpoint's verdict. A file the loader only tries
        (``blocking=False``) cannot make it unresumable by being damaged - but an UNSAFE or
        unknown global in any file always does: resuming would unpickle it."""
        self.reports.append(report)
        for reason in report.reasons():
            (self.reasons if blocking else self.warnings).append(f"{what}: {reason}")
        self.distrust(report, what)
        if report.summary:
            self.categories.update(report.summary.categories)
            self.model_prefix = self.model_prefix or report.summary.model_prefix
        return report


class Files:
    """Lookup of names across the copies of one checkpoint directory (one per root)."""

    def __init__(self, dirs: list[Path]):
        self.dirs = dirs
        self.names: dict[str, list[Path]] = {}
        for d in dirs:
            try:
                entries = os.listdir(d)
            except OSError:
                continue
            for n in entries:
                self.names.setdefault(n, []).append(d)

    def get(self, name: str) -> Path | None:
        where = self.names.get(name)
        return where[0] / name if where else None

    def matching(self, pattern: re.Pattern) -> dict[str, re.Match]:
        return {n: m for n in self.names if (m := pattern.match(n))}


def _contiguous(ranks: set[int], what: str) -> str | None:
    missing = sorted(set(range(max(ranks) + 1)) - ranks)
    return f"{what} missing for ranks {_ranges(missing)} (present: {_ranges(sorted(ranks))})" if missing else None


def _ranges(nums: list[int]) -> str:
    out, start = [], None
    for i, n in enumerate(nums):
        if start is None:
            start = n
        if i + 1 == len(nums) or nums[i + 1] != n + 1:
            out.append(f"{start}" if start == n else f"{start}-{n}")
            start = None
    return ",".join(out) or "none"


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


MAX_JSON_BYTES = 64 << 20


WEIGHT_NAMES = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", "adapter_model.bin",
                "model.safetensors.index.json", "pytorch_model.bin.index.json")


def _kind(p: Path) -> str:
    """What a path that is not a regular file is, in words (a loader's isfile() calls it absent)."""
    try:
        mode = os.stat(p).st_mode
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device")


def _isfile(p: Path | None) -> bool:
    """What the frameworks test before opening an optional file (``os.path.isfile``): a regular file."""
    return p is not None and os.path.isfile(p)


def _json_object(p: Path) -> tuple[dict | None, str | None]:
    """A JSON file a loader reads with ``cls(**json.load(f))``: (the object, None) or (None, why not).
    A FIFO or device is never opened (it would block); anything but a JSON object is an error."""
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_size > MAX_JSON_BYTES:
            return None, f"{st.st_size:,} bytes (more than {MAX_JSON_BYTES:,})"
        data = json.loads(p.read_bytes().decode("utf-8"))
    except RecursionError:
        return None, "JSON nested too deeply to read (the loader's json.load fails the same way)"
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return None, str(exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)[:300]
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not an object"
    return data, None


# --- per-layout evaluation -------------------------------------------------------------------

def eval_hf_trainer(c: Candidate, deep: bool) -> None:
    f = Files(c.paths)
    state = f.get("trainer_state.json")
    if state is None:
        c.reasons.append("no trainer_state.json (HF writes it last: the save did not finish)")
    else:
        data, err = _json_object(state)
        if err:
            c.reasons.append(f"trainer_state.json unreadable: {err} (Trainer.train reads it with TrainerState(**json) and "
                             "fails)")
        else:
            c.step_content = _int(data.get("global_step"))
    if f.get("config.json"):  # opened whenever present (PreTrainedConfig.from_json_file, to compare versions)
        _data, err = _json_object(f.get("config.json"))
        if err:
            c.reasons.append(f"config.json unreadable: {err} (Trainer's resume opens it when present and raises)")
    # the weights Trainer._load_from_checkpoint opens: model.safetensors, else pytorch_model.bin, else an
    # adapter, else the safetensors index (else the .bin index) and every shard it names - never the others
    whole = [n for n in ("model.safetensors", "pytorch_model.bin") if _isfile(f.get(n))]
    adapters = [n for n in ("adapter_model.safetensors", "adapter_model.bin") if _isfile(f.get(n))]
    indexes = [n for n in ("model.safetensors.index.json", "pytorch_model.bin.index.json") if _isfile(f.get(n))]
    opened = whole[:1] or adapters or indexes[:1]
    weights = whole + adapters
    for index_name in indexes:
        weights.append(index_name)
        _check_index(c, f, index_name, deep, blocking=index_name in opened)
    weights += [n for n in f.names if n.startswith("pytorch_model_fsdp")]
    ds = [n for n in f.names if DIR_PATTERNS[2][1].match(n)]
    if ds:
        weights += ds
        sub = Candidate("deepspeed", c.series, ds[0], [d / ds[0] for d in f.names[ds[0]]])
        eval_deepspeed(sub, deep)
        for r in sub.reasons:  # an UNSAFE / needs review reason keeps its tag in front (Candidate.untrusted)
            tag, sep, rest = r.partition(": ")
            c.reasons.append(f"{tag}: {ds[0]}/{rest}" if sep and tag in ("UNSAFE", "needs review") else f"{ds[0]}/: {r}")
        c.reports += sub.reports
        c.categories |= sub.categories
    if not weights:
        odd = [f"{n} is {_kind(f.get(n))}" for n in WEIGHT_NAMES if f.get(n) and not _isfile(f.get(n))]
        c.reasons.append("no model weights (model.safetensors / pytorch_model.bin / index + shards / "
                         "adapter_model.safetensors of a PEFT run)"
                         + (f": {'; '.join(odd)}, not a file - the Trainer's os.path.isfile() skips it" if odd else ""))
    if adapters and not whole and not indexes:
        _adapter_config(c, f)
    for n in weights:
        if n.endswith((".safetensors", ".bin")):
            not_opened = bool(opened) and n not in opened and n in ("model.safetensors", "pytorch_model.bin")
            c.absorb(inspect_path(f.get(n), deep), n + (f" (not opened: {opened[0]} is)" if not_opened else ""),
                     blocking=not not_opened)
    if weights:
        c.categories.add("model")
    # Trainer._load_optimizer_and_scheduler opens optimizer.pt and scheduler.pt only as a pair: with one of
    # them missing it loads neither (silently), so the other cannot stop the resume - nor be restored
    pair = _isfile(f.get("optimizer.pt")) and _isfile(f.get("scheduler.pt"))
    for n, cat in (("optimizer.pt", "optimizer"), ("scheduler.pt", "scheduler")):
        if f.get(n):
            c.absorb(inspect_path(f.get(n), deep), n if pair else f"{n} (not loaded: Trainer restores it only together "
                     f"with {'scheduler.pt' if cat == 'optimizer' else 'optimizer.pt'})", blocking=pair)
            if pair:
                c.categories.add(cat)
            else:
                c.warnings.append(f"{n} is present but {'scheduler.pt' if cat == 'optimizer' else 'optimizer.pt'} is not: "
                                  "Trainer restores optimizer and scheduler only as a pair, so neither is restored")
    if f.get("scaler.pt"):
        c.absorb(inspect_path(f.get("scaler.pt"), deep), "scaler.pt")
        c.categories.add("scaler")
    _rank_files(c, f, "rng_state.pth", "RNG state (rng_state_<rank>.pth)", blocking=True, numbered_when_distributed=True)
    c.categories.add("dataloader")  # HF Trainer re-skips consumed batches on resume (no sampler file)


def _adapter_config(c: Candidate, f: Files) -> None:
    """A PEFT/LoRA checkpoint: adapter weights only. Trainer's resume loads them into the PEFT model
    the script built (``load_adapter(dir, "default")``: the config comes from that model, so
    ``adapter_config.json`` is not read) - but ``PeftModel.from_pretrained(base, dir)``, merging
    or serving the adapter elsewhere need it, and nothing else records the rank and target modules."""
    c.categories.add("adapter")
    cfg = f.get("adapter_config.json")
    if not cfg:
        c.warnings.append("no adapter_config.json: Trainer's resume still works (it takes the LoRA config from the "
                          "model your script builds), but PeftModel.from_pretrained / merge_and_unload elsewhere cannot "
                          "load this adapter - keep the LoraConfig that wrote it")
        return
    _data, err = _json_object(cfg)
    if err:
        c.warnings.append(f"adapter_config.json unreadable: {err} (Trainer's resume does not read it; "
                          "PeftModel.from_pretrained does and fails)")


def _rank_files(c: Candidate, f: Files, single: str, what: str, blocking: bool, numbered_when_distributed: bool = False) -> None:
    """Per-rank RNG files (and the single-process name): every one present is inspected - the
    loader of whichever rank opens it fails on a damaged one (``blocking``) or runs its pickle. A
    MISSING one never blocks: Trainer's ``_load_rng_state`` logs "Didn't find an RNG file for
    process N" and goes on, accelerate's ``load_state`` logs "Could not load random states"; that
    rank's streams restart (``lacks`` says so). ``numbered_when_distributed``: the Trainer writes
    ``rng_state_<rank>.pth`` only when the world is bigger than one, so a lone ``rng_state_0.pth``
    means at least one other rank's file is gone."""
    ranks = {int(m.group(1)) for m in f.matching(RANK_FILE).values()}
    numbered = bool(ranks)
    if f.get(single):
        ranks.add(0)
    if not ranks:
        return
    c.categories.add("rng")
    c.rng_ranks = len(ranks)
    c.world_size = max(c.world_size or 0, max(ranks) + 1, 2 if numbered and numbered_when_distributed else 1)
    gap = _contiguous(ranks, what)
    if gap:
        c.warnings.append(f"{gap}: the resume still runs (those ranks log that they found no RNG file and restart "
                          "their random streams)")
    for n in sorted(f.matching(RANK_FILE)) + ([single] if f.get(single) else []):
        c.absorb(inspect_path(f.get(n)), n, blocking)


def _check_index(c: Candidate, f: Files, index_name: str, deep: bool, blocking: bool = True) -> None:
    """A sharded-weights index and every shard it names. ``blocking=False``: the loader does not open
    this index (another weights file is preferred), so damage here is only a warning."""
    out = c.reasons if blocking else c.warnings
    note = "" if blocking else " (not opened: other weights are loaded instead)"
    index, err = _json_object(f.get(index_name))
    try:
        if err:
            raise ValueError(err)
        shards = sorted(set(index["weight_map"].values()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        out.append(f"{index_name} unreadable: {exc}{note}")
        return
    for shard in shards:
        if not isinstance(shard, str) or os.path.basename(shard) != shard or shard in ("", ".", ".."):
            c.reasons.append(f"UNSAFE: {index_name} names the shard {str(shard)[:200]!r}, outside the checkpoint folder: "
                             "the loader would open (and torch.load) whatever is there - not opened")
            continue
        p = f.get(shard)
        if p is None:
            out.append(f"shard {shard} named in {index_name} is missing{note or ' (loading the sharded weights raises)'}")
        else:
            c.absorb(inspect_path(p, deep), shard + note, blocking)


ACCELERATE_FILE = re.compile(r"^(model|pytorch_model|optimizer|scheduler|sampler|dl_state_dict|custom_checkpoint)(_\d+)?"
                             r"\.(safetensors|bin|pkl)$|^scaler\.pt$")
ACCELERATE_CATEGORY = {"optimizer": "optimizer", "scheduler": "scheduler", "sampler": "dataloader",
                       "dl_state_dict": "dataloader", "scaler": "scaler", "model": "model", "pytorch_model": "model"}


def eval_accelerate(c: Candidate, deep: bool) -> None:
    """``load_state`` opens one file per object the script registered (model, optimizer,
    scheduler, sampler, scaler, custom objects): each must be there and verify. Which ones a run
    registers is seen across the series (``require_series_files``). The step is the folder
    number: ``random_states``' ``step`` is the gradient-accumulation counter (0 at every save)."""
    f = Files(c.paths)
    weights = [n for n in f.names if re.match(r"^(model(_\d+)?\.safetensors|pytorch_model(_\d+)?\.bin)$", n)]
    if not weights:
        c.reasons.append("no model weights (model.safetensors / pytorch_model.bin): accelerator.load_state raises")
    if not f.get("optimizer.bin"):
        c.reasons.append("no optimizer.bin: accelerator.load_state opens it for the prepared optimizer and raises")
    for n in sorted(f.names):
        m = ACCELERATE_FILE.match(n)
        if m:
            # load_state opens model[_i].safetensors when it exists, pytorch_model[_i].bin only otherwise
            shadowed = m.group(1) == "pytorch_model" and _isfile(f.get(f"model{m.group(2) or ''}.safetensors"))
            c.absorb(inspect_path(f.get(n), deep), n + (" (not opened: the .safetensors is)" if shadowed else ""),
                     blocking=not shadowed)
            if cat := ACCELERATE_CATEGORY.get(m.group(1) or "scaler"):
                c.categories.add(cat)
    sched = next((r for r in c.reports if os.path.basename(r.path) == "scheduler.bin" and r.valid), None)
    c.progress = _int(sched.values.get("last_epoch")) if sched else None
    _rank_files(c, f, "random_states.pkl", "RNG state (random_states_<rank>.pkl)", blocking=False)
    c.warnings.append("accelerate writes no completion marker (and deletes old checkpoints before saving with total_limit): "
                      "completeness is inferred from the files")


def require_series_files(candidates: list[Candidate]) -> None:
    """accelerate: a file kind (``scheduler.bin``, ``sampler.bin``, ``scaler.pt``, ``optimizer_1.bin``,
    ...) that another checkpoint of the same series has is one the script registered, so
    ``load_state`` will open it here too: missing = unresumable."""
    by_series: dict[str, list[Candidate]] = {}
    for c in candidates:
        if c.layout == "accelerate":
            by_series.setdefault(c.series, []).append(c)
    for group in by_series.values():
        _numbering_restarted(group)
        names = {c.name: {n for n in Files(c.paths).names if ACCELERATE_FILE.match(n)} for c in group}
        if len(group) == 1:
            _lone_accelerate_scheduler(group[0], names[group[0].name])
        for c in group:
            others = set().union(*(v for k, v in names.items() if k != c.name)) if len(group) > 1 else set()
            missing = sorted(n for n in others - names[c.name] if not re.match(r"^(model|pytorch_model)", n))
            if missing:
                c.reasons.append(f"lacks {', '.join(missing)}, which the other checkpoints of this run have: "
                                 "accelerator.load_state opens it and raises")


def _numbering_restarted(group: list[Candidate]) -> None:
    """accelerate numbers ``checkpoint_N`` by saves, from ``project_configuration.iteration``, which
    ``load_state`` does not restore: a run resumed without setting it saves its newest state as
    ``checkpoint_0`` again (``total_limit`` having deleted the old one), and "highest number"
    (accelerate's own ``load_state()`` without a folder, and this order) resumes an older state.
    The LR scheduler's ``last_epoch`` only grows with training: when it goes DOWN while the folder
    number goes up, the series is ordered by it instead, and every checkpoint in it says why."""
    automatic = DIR_PATTERNS[1][1]  # checkpoint_N: save_state("dir/step_100") names carry the step itself
    known = sorted((c for c in group if c.progress is not None and c.step_name is not None and automatic.match(c.name)),
                   key=lambda c: c.step_name)
    backwards = [(a, b) for a, b in zip(known, known[1:], strict=False) if b.progress < a.progress]
    if not backwards:
        return
    a, b = backwards[0]
    for c in group:
        if not automatic.match(c.name):
            continue
        c.order_by_progress = True
        c.warnings.append(f"the numbering restarted: {a.name}'s LR scheduler is at step {a.progress}, past {b.name}'s "
                          f"{b.progress} - a resumed run saved again starting at checkpoint_0 (load_state does not restore "
                          "project_configuration.iteration), so this series is ordered by the scheduler's step, not "
                          "the folder number")


def _lone_accelerate_scheduler(c: Candidate, names: set[str]) -> None:
    """With no other checkpoint of the run to compare with, the optimizer state still tells whether an
    LR scheduler was attached (torch's LRScheduler adds ``initial_lr`` to every param group). A run that
    passed it to ``accelerator.prepare`` saves ``scheduler.bin``, and ``load_state`` opens it: missing
    here = unresumable. (A scheduler never given to ``prepare`` is not saved; then load the state with
    ``accelerator.load_state`` anyway - gpulib cannot tell the two apart from one checkpoint.)"""
    if "scheduler.bin" in names:
        return
    optim = [r for r in c.reports if os.path.basename(r.path) == "optimizer.bin" and r.valid]
    if optim and any(k.startswith("param_groups") and k.endswith(".initial_lr") for k in optim[0].values):
        c.reasons.append("no scheduler.bin, but optimizer.bin shows an LR scheduler was attached (initial_lr in its "
                         "param groups): accelerator.load_state opens scheduler.bin for a prepared scheduler and raises "
                         "(if the script never passes the scheduler to prepare(), this checkpoint does resume)")


#: what Lightning's checkpoint connector reads unconditionally on ``trainer.fit(ckpt_path=...)``: the
#: migration reads the version, the model restore ``state_dict``, the training-state restore
#: ``optimizer_states`` and ``lr_schedulers`` (a list, empty without schedulers) - KeyError otherwise
LIGHTNING_RESUME_KEYS = ("pytorch-lightning_version", "state_dict", "optimizer_states", "lr_schedulers")


def _epoch_as_counter(c: Candidate, verdicts: list[FileReport]) -> None:
    """The loop most tutorials teach saves ``{"epoch", "model_state_dict", "optimizer_state_dict",
    "loss"}`` under ``last.pt`` / ``best.pt`` / ``ckpt_epoch_N.pt``: no step anywhere, so without
    the epoch these files could only be ordered by name, and ``best.pt`` or ``last.pt`` wins or
    loses by the alphabet. The epoch in the content orders them (only where neither name nor
    content carries a step: epochs and steps are never compared)."""
    if c.layout != "torch_file" or c.step_name is not None or c.step_content is not None:
        return
    epochs = {int(r.summary.epoch) for r in verdicts if r.valid and r.summary and r.summary.epoch is not None
              and float(r.summary.epoch).is_integer()}
    if len(epochs) == 1:
        c.step_content, c.counter = epochs.pop(), "epoch"


def eval_torch_file(c: Candidate, deep: bool) -> None:
    """A single-file checkpoint (plain torch.save, Lightning .ckpt), maybe on several nodes."""
    verdicts = []
    for p in c.paths:
        r = inspect_path(p, deep)
        verdicts.append(r)
        if r.summary and r.summary.step is not None and c.step_content is None:
            c.step_content = r.summary.step
    _epoch_as_counter(c, verdicts)
    good = [r for r in verdicts if r.valid]
    for r in verdicts:
        label = c.name if len(c.paths) == 1 else f"{c.name} on {Path(r.path).parent}"
        if r.valid:
            c.reports.append(r)
            if r.summary:
                c.categories.update(r.summary.categories)
                c.model_prefix = c.model_prefix or r.summary.model_prefix
                if r.summary.cuda_rng_devices:
                    c.rng_ranks = r.summary.cuda_rng_devices
            c.distrust(r, label)
        elif good:
            c.warnings.append(f"{label}: {'; '.join(r.reasons())} (another node holds a valid copy)")
        else:
            c.absorb(r, label)
    ids = {(r.meta.get("data/serialization_id"), r.size_bytes) for r in good}
    if len(good) > 1 and len(ids) > 1:
        c.warnings.append(f"the copies of {c.name} on {len(good)} nodes differ (size / serialization_id): they are not the "
                          f"same save")
    _check_sidecars(c)
    if c.layout == "lightning" and good:
        keys = set(good[0].summary.top_keys if good[0].summary else [])
        missing = [k for k in LIGHTNING_RESUME_KEYS if k not in keys] if good[0].summary else []
        if missing:
            weights_only = "state_dict" in keys and "optimizer_states" in missing
            c.reasons.append(f"no {', '.join(missing)} in it: trainer.fit(ckpt_path=...) raises KeyError"
                             + (" (a weights-only save, ModelCheckpoint(save_weights_only=True): load it with "
                                "LightningModule.load_from_checkpoint, it does not resume training)" if weights_only else ""))
        for key, cat in (("optimizer_states", "optimizer"), ("lr_schedulers", "scheduler"), ("loops", "dataloader")):
            if key in keys:
                c.categories.add(cat)


def _check_sidecars(c: Candidate) -> None:
    """``<stem>.json`` manifests ({bytes, sha256, status}) and ``<stem>.json.tmp`` / ``<name>.tmp``
    leftovers written by training scripts around a save. A ``<stem>.json.tmp`` means the manifest
    was never committed (refused); a ``<name>.tmp`` only that the NEXT save died before
    ``os.replace`` - the file under the final name is still the previous, whole one."""
    for p in c.paths:
        stem = p.name.rsplit(".", 1)[0]
        if p.with_name(stem + ".json.tmp").exists():  # the manifest is renamed into place after the save
            c.reasons.append(f"{stem}.json.tmp left behind: the save was never committed")
        if p.with_name(p.name + ".tmp").exists():  # save to <name>.tmp, then os.replace: <name> is the one before
            c.warnings.append(f"{p.name}.tmp left behind: a newer save into {p.name} died before its rename; {p.name} "
                              "is the previous save, judged by its own bytes")
        side = p.with_name(stem + ".json")
        if not side.is_file():
            continue
        try:
            meta = json.loads(side.read_text())
        except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
            c.warnings.append(f"{side.name} unreadable: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if not isinstance(meta, dict):
            continue
        c.sidecar = meta
        status = meta.get("status")
        if status not in (None, "complete", "completed", "done", "ok"):
            c.reasons.append(f"{side.name} says status {repr(status)[:80]}")
        size = p.stat().st_size
        if _int(meta.get("bytes")) is not None and meta["bytes"] != size:
            c.reasons.append(f"{p.name} has {size:,} bytes, {side.name} says {meta['bytes']:,}")
        if _int(meta.get("step")) is not None and c.step_content is None:
            c.step_content = meta["step"]


def eval_deepspeed(c: Candidate, deep: bool) -> None:
    f = Files(c.paths)
    models = f.matching(DS_MODEL)
    optims = f.matching(DS_OPTIM)
    if not models:
        c.reasons.append("no *_model_states.pt")
        return
    first = sorted(models)[0]
    head = c.absorb(inspect_path(f.get(first), deep), first)
    v = head.values
    dp, mp = _int(v.get("dp_world_size")), _int(v.get("mp_world_size")) or 1
    c.step_content = _int(v.get("global_steps"))
    for key, cat in (("optimizer", "optimizer"), ("lr_scheduler", "scheduler"), ("data_sampler", "dataloader")):
        if any(k == key or k.startswith(key + ".") for k in v) and v.get(key, "") is not None:
            c.categories.add(cat)
    stage = _int(v.get("ds_config.zero_optimization.stage"))
    zero = (stage or 0) > 0 or ("optimizer" in v and v["optimizer"] is None)
    if not optims and zero:
        c.reasons.append(f"no ZeRO optimizer shards at all (zero_pp_rank_*_mp_rank_*_optim_states.pt; ZeRO stage "
                         f"{stage if stage is not None else '>0'}): engine.load_checkpoint opens them on every rank and fails")
    for n in sorted(models)[1:]:
        c.absorb(inspect_path(f.get(n), deep), n)
    if optims:
        c.categories.add("optimizer")
        dp = dp or max(int(m.group(1)) for m in optims.values()) + 1
        present = {(int(m.group(1)), int(m.group(2))) for m in optims.values()}
        bf16 = any(n.startswith("bf16_") for n in optims)
        missing = [f"{'bf16_' if bf16 else ''}zero_pp_rank_{d}_mp_rank_{m:02d}_optim_states.pt"
                   for m in range(mp) for d in range(dp) if (d, m) not in present]
        if missing:
            c.reasons.append(f"missing {len(missing)} of {dp * mp} ZeRO optimizer shards ({', '.join(missing[:4])}"
                             f"{', ...' if len(missing) > 4 else ''}): DeepSpeed says 'The following zero checkpoints paths "
                             f"are missing'")
        for n in sorted(optims):
            c.absorb(inspect_path(f.get(n), deep), n)
        _node_spread(c, f, list(optims))
    mp_present = {int(m.group(2)) for m in models.values()}
    gap = sorted(set(range(mp)) - mp_present)
    if gap:
        c.reasons.append(f"model states missing for model-parallel ranks {_ranges(gap)}")
    zero3 = {(int(m.group(1)), int(m.group(2))) for m in models.values() if m.group(1) is not None}
    if zero3 and dp:  # ZeRO-3 writes one model-states file per data-parallel rank too
        missing = [f"zero_pp_rank_{d}_mp_rank_{m:02d}_model_states.pt" for m in range(mp) for d in range(dp)
                   if (d, m) not in zero3]
        if missing:
            c.reasons.append(f"missing {len(missing)} of {dp * mp} ZeRO-3 model-states files ({', '.join(missing[:4])})")
    c.world_size = (dp or 1) * mp


def _node_spread(c: Candidate, f: Files, shard_names: list[str]) -> None:
    if len(f.dirs) < 2:
        return
    partial = [d for d in f.dirs if sum(1 for n in shard_names if d in f.names.get(n, [])) < len(shard_names)]
    if partial:
        c.warnings.append(f"shards are spread over node-local disks ({len(partial)} of {len(f.dirs)} roots hold only "
                          "part of them): every rank must see the shards it loads - copy them to shared storage first")


def eval_megatron(c: Candidate, deep: bool) -> None:
    f = Files(c.paths)
    if f.get(".metadata") or f.get(".metadata.tmp") or any(n.endswith(".distcp") for n in f.names):
        if not f.get("metadata.json"):
            c.reasons.append("no metadata.json (Megatron writes it only when the checkpoint is complete)")
        eval_dcp(c, deep)
        return
    ranks = {n: m for n in f.names if (m := re.match(r"^mp_rank_(\d+)(?:_(\d+))?(?:_(\d+))?$", n))}
    if not ranks:
        c.reasons.append("no mp_rank_* directories and no DCP files")
        return
    first = None
    for n in sorted(ranks):
        sub = Files([d / n for d in f.names[n]])
        p = sub.get("model_optim_rng.pt")
        if p is None:
            c.reasons.append(f"{n}/model_optim_rng.pt is missing")
            continue
        r = c.absorb(inspect_path(p, deep), f"{n}/model_optim_rng.pt")
        first = first or r
        if sub.get("distrib_optim.pt"):
            c.absorb(inspect_path(sub.get("distrib_optim.pt"), deep), f"{n}/distrib_optim.pt")
            c.categories.add("optimizer")
    if first is None:
        return
    v = first.values
    tp, pp = _int(v.get("args.tensor_model_parallel_size")) or 1, _int(v.get("args.pipeline_model_parallel_size")) or 1
    c.step_content = _int(v.get("iteration"))
    expected = {f"mp_rank_{t:02d}" if pp == 1 else f"mp_rank_{t:02d}_{p:03d}" for t in range(tp) for p in range(pp)}
    missing = sorted(expected - {n for n in ranks if n in expected})
    if missing:
        c.reasons.append(f"missing {len(missing)} of {tp * pp} model-parallel dirs (TP={tp}, PP={pp}): {', '.join(missing[:4])}")
    if any(k.startswith("opt_param_scheduler") for k in v):
        c.categories.add("scheduler")
    c.world_size = tp * pp
    _node_spread(c, f, sorted(expected))


def eval_dcp(c: Candidate, deep: bool) -> None:
    """DCP / torchtitan step-N: .metadata from any root, shards looked up across all roots."""
    f = Files(c.paths)
    if c.layout == "torchtitan" and not f.get(".metadata") and f.get("model.safetensors.index.json"):
        _check_index(c, f, "model.safetensors.index.json", deep)
        c.categories.add("model")
        return
    meta_dir = f.get(".metadata").parent if f.get(".metadata") else c.paths[0]
    r = c.absorb(dcp.inspect_dcp(meta_dir, deep, [d for d in c.paths if d != meta_dir]), ".metadata")
    c.warnings += r.reasons(("warning",))  # a leftover .metadata.tmp next to .metadata, unreferenced shards
    if r.summary:
        c.step_content = r.summary.step
        if c.layout == "torchtitan" and r.summary.top_keys and "train_state" not in r.summary.top_keys:
            # A plain dcp.save (an FSDP2 loop) into a folder it happened to call step-N: torchtitan's
            # command would not run that script, and torchtitan always saves train_state for resume.
            c.layout = "dcp"
            c.warnings.append(f"{c.name} is named like torchtitan's step-N folders but holds no train_state item: "
                              "read as a plain torch.distributed.checkpoint save (resumed with dcp.load)")
    _node_spread(c, f, [n for n in f.names if n.endswith(".distcp")])


PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt", ".tar")
NOT_PICKLES = (".distcp", ".safetensors", ".json", ".txt", ".md", ".yaml", ".yml")
MAX_OTHER_FILES = 1_000


def judge_other_files(c: Candidate) -> None:
    """Every pickle-like file in a checkpoint folder that the layout's loader does not open
    (``training_args.bin``, a stray ``extra_state.pt``, a ``rng_state`` under an odd name): someone
    or something will ``torch.load`` it, so a dangerous global in it makes the whole checkpoint
    UNSAFE; an unknown one (``TrainingArguments``) is only a warning, as nothing on resume reads it.
    Damage in such a file never blocks (no loader opens it)."""
    judged = {os.path.realpath(r.path) for r in c.reports}
    seen = 0
    for top in c.paths:
        if not os.path.isdir(top):
            return
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in sorted(dirs) if len(Path(folder, d).relative_to(top).parts) < 2]
            for name in sorted(names):
                p = os.path.join(folder, name)
                if os.path.realpath(p) in judged or name.endswith(NOT_PICKLES) or not os.path.isfile(p):
                    continue
                try:
                    with open(p, "rb") as fh:
                        head = fh.read(4)
                except OSError:
                    continue
                if not (name.endswith(PICKLE_SUFFIXES) or head == b"PK\x03\x04" or (head[:1] == b"\x80" and head[1:2]
                                                                                   in (b"\x02", b"\x03", b"\x04", b"\x05"))):
                    continue
                seen += 1
                if seen > MAX_OTHER_FILES:
                    c.warnings.append(f"more than {MAX_OTHER_FILES} other files: the rest were not judged")
                    return
                rel = os.path.relpath(p, top)
                report = inspect_path(p)
                for f in report.findings:
                    if f.severity == "unsafe":
                        c.reasons.append(f"UNSAFE: {rel} (not opened by the resume, but unpickled by whoever loads it): "
                                         f"{f.message}")
                    elif f.severity == "needs_review":
                        c.warnings.append(f"{rel} (not opened by the resume): {f.message}")


EVALUATORS = {
    "hf_trainer": eval_hf_trainer, "accelerate": eval_accelerate, "deepspeed": eval_deepspeed,
    "megatron": eval_megatron, "torchtitan": eval_dcp, "dcp": eval_dcp, "lightning": eval_torch_file,
    "torch_file": eval_torch_file,
}


# --- discovery -------------------------------------------------------------------------------

def _dir_layout(path: Path, names: list[str]) -> tuple[str, int | None] | None:
    for layout, pattern in DIR_PATTERNS:
        m = pattern.match(path.name)
        if m:
            return layout, int(m.group(1))
    if any(RANK_FILE.match(n) and n.startswith("random_states") for n in names):
        return "accelerate", None
    if any(DS_MODEL.match(n) for n in names):
        return "deepspeed", None
    if ".metadata" in names or ".metadata.tmp" in names or any(n.endswith(".distcp") for n in names):
        return "dcp", None
    return None


def _looks_like_checkpoint(p: Path) -> bool:
    """.pt/.pth/.safetensors always (a broken one must still be reported); .bin/.tar - names that
    say nothing - only when named like a checkpoint or starting like torch.save / a pickle."""
    n = p.name.lower()
    if n.endswith((".pt", ".pth", ".safetensors")):
        return True
    if not n.endswith((".bin", ".tar")):
        return False
    if CHECKPOINT_WORDS.search(n):
        return True
    if not os.path.isfile(p):  # a FIFO would block the read below
        return False
    try:
        with open(p, "rb") as fh:
            head = fh.read(2)
    except OSError:
        return False
    return head == b"PK" or head[:1] == b"\x80"


def natural_key(name: str) -> tuple:
    """Name order with the digits compared as numbers (``step_99`` before ``step_100``), never text order."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", name)))


def _inside(target: Path, root: Path) -> bool:
    try:
        target.relative_to(root.resolve())
        return True
    except ValueError:
        return False


def _broken_link(p: Path) -> str:
    """Why a symlink leads nowhere: a loop (ELOOP: ``a -> b -> a``) or a target that is gone."""
    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"symlink loop ({os.readlink(p)} leads back to itself): skipped"
    return f"dangling symlink to {os.readlink(p)}"


def discover(root: Path) -> tuple[list[Candidate], list[str], list[str], list[str]]:
    """Candidates under one root, leftover temp files, problems reading the tree, and notes
    (symlinks seen). A symlink to a checkpoint outside the root is a candidate (marked as a
    link); one to something inside the root is a pointer to what is found there anyway."""
    found: list[Candidate] = []
    leftovers: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    stack = [(root, 0, None)]
    seen = 0
    while stack:
        d, depth, via = stack.pop()
        seen += 1
        if seen > MAX_SCAN_DIRS:
            problems.append(f"stopped scanning after {MAX_SCAN_DIRS} directories")
            break
        try:
            names = sorted(os.listdir(d))
        except PermissionError:
            problems.append(f"{d}: permission denied")
            continue
        except OSError as exc:
            problems.append(f"{d}: {exc.strerror or exc}")
            continue
        rel = "" if d == root else str(d.relative_to(root))
        kind = _dir_layout(d, names)  # the root itself may be one checkpoint (`ckpt latest out/step-100`)
        if kind:
            layout, step = kind
            if step is None and (m := STEP_IN_NAME.search(d.name)):  # save_state("out/step_100"), a custom DS tag
                step = int(m.group(1))
            series = str(Path(rel).parent) if rel and Path(rel).parent != Path(".") else ""
            c = Candidate(layout, series, d.name, [d], step_name=step)
            if via:
                c.warnings.append(f"{d.name} is a symlink to {via}: the resume reads the target")
            found.append(c)
            leftovers += [str(Path(rel) / n) for n in names if n.endswith(".tmp") or n.startswith("tmp")]
            continue
        for n in names:
            p = d / n
            if (m := TRAINER_TMP.match(n)) and p.is_dir():
                leftovers.append(f"{Path(rel) / n} (HF Trainer's temporary folder: the save of step {m.group(1)} "
                                 f"never finished; it is renamed to checkpoint-{m.group(1)} only when complete)")
                continue
            if n.endswith(".tmp") or (n.startswith("tmp") and not p.is_dir()):
                leftovers.append(str(Path(rel) / n))
                continue
            link = None
            if p.is_symlink():
                target = Path(os.path.realpath(p))
                if not target.exists():
                    problems.append(f"{p}: {_broken_link(p)}")
                    continue
                if _inside(target, root) or n.startswith("last"):
                    notes.append(f"{p} is a symlink to {target} (read as a pointer, not a second checkpoint)")
                    continue
                link = target
            if p.is_dir():
                if depth < MAX_SCAN_DEPTH:
                    stack.append((p, depth + 1, link))
                continue
            layout = "lightning" if n.endswith(".ckpt") else "torch_file" if _looks_like_checkpoint(p) else None
            if layout:
                m = STEP_IN_NAME.search(n)
                c = Candidate(layout, rel, n, [p], step_name=int(m.group(1)) if m else None)
                if link:
                    c.warnings.append(f"{n} is a symlink to {link}: the resume reads the target")
                found.append(c)
    return found, leftovers, problems, notes


def read_pointers(series_dir: Path) -> dict[str, str]:
    """Pointer files of a series: DeepSpeed ``latest``, Megatron tracker, generic ``latest``,
    Lightning ``last.ckpt`` symlink. Value = what it names (tag, iteration, file)."""
    out = {}
    for name in ("latest", "latest_universal", "latest_checkpointed_iteration.txt", "latest_checkpoint", "LATEST"):
        p = series_dir / name
        if p.is_file():
            try:
                out[name] = p.read_text(errors="replace").strip()[:200]
            except OSError as exc:
                out[name] = f"<unreadable: {exc.strerror}>"
    for p in series_dir.glob("last*.ckpt"):
        if p.is_symlink():
            out[p.name] = os.readlink(p)
    return out
