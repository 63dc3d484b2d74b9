"""Walk an unpickled (stand-in) checkpoint object into named entries, and summarise what it holds.

A checkpoint is resumable only if it carries more than weights: optimizer moments, the LR
scheduler position, RNG states (per rank), the sampler/dataloader position and the AMP grad
scaler. :func:`summarise` finds each of them by the key names every framework uses, reads the
step/epoch counters, and spots the DDP ``module.`` / torch.compile ``_orig_mod.`` key prefix that
makes ``load_state_dict`` fail on an unwrapped model.
"""

from __future__ import annotations

import re

from gpulib.safe_pickle import (
    NESTED_PICKLE_LOADERS,
    Budget,
    BudgetExceeded,
    NDArrayInfo,
    Opaque,
    StubResult,
    TensorInfo,
    _NDArray,
    stub_load,
)

MAX_DEPTH = 64
MAX_ENTRIES = 500_000
MAX_NESTED = 3
MAX_KEY_CHARS = 200  # of one key in a dotted path: a path repeats its parents' keys, so long keys multiply
MAX_VALUE_CHARS = 1_000  # of a string value kept for the report
ENTRY_BYTES = 160  # an Entry, its list slot and a path string's header (the path's characters are added)
PREFIXES = ("module.", "_orig_mod.")

# category -> substrings of a lower-cased key that mark it (checked in this order)
CATEGORY_MARKERS = (
    ("optimizer", ("optimizer", "optim_state", "optim")),
    ("scheduler", ("scheduler", "lr_sched", "opt_param_sched")),
    ("rng", ("rng", "random_state", "random_seed", "manual_seed")),
    ("dataloader", ("sampler", "dataloader", "data_loader", "dl_state")),
    ("scaler", ("scaler",)),
)
STEP_KEYS = ("global_step", "global_steps", "iteration", "step", "num_steps", "steps")
RNG_KINDS = {"python": "python", "random_rng_state": "python", "random_state": "python",
             "numpy": "numpy", "np_rng_state": "numpy", "numpy_random_seed": "numpy",
             "cpu": "torch", "torch": "torch", "torch_rng_state": "torch", "torch_manual_seed": "torch",
             "cuda": "cuda", "cuda_rng_state": "cuda", "torch_cuda_manual_seed": "cuda"}
_CUDA_INDEX = re.compile(r"cuda[a-z_]*(?:\[(\d+)\])?$")


# Plain classes, not dataclasses: this module is on every `gpulib ckpt inspect` start (see records).
class Entry:
    """One leaf of the checkpoint's object tree, by its dotted path."""

    __slots__ = ("path", "value")

    def __init__(self, path: str, value: object) -> None:
        self.path = path
        self.value = value  # TensorInfo | NDArrayInfo | int | float | str | bool | None | "<qualname>"


class Walk:
    """The leaves of one object tree, the dicts of tensors in it, and what could not be walked."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.state_dicts: list[tuple[str, list[str]]] = []  # dicts of tensors
        self.nested_globals: dict[tuple[str, str], int] = {}
        self.problems: list[str] = []
        self.over_budget: str | None = None  # why the walk stopped early (memory budget), else None


def key_text(key) -> str:
    """A key as a path component: at most MAX_KEY_CHARS (an int too long for ``str`` is described)."""
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() > 64:
        return f"<int of {key.bit_length()} bits>"
    text = key if isinstance(key, str) else str(key)
    return text if len(text) <= MAX_KEY_CHARS else text[:MAX_KEY_CHARS] + "..."


def _join(prefix: str, key) -> str:
    key = key_text(key)
    return f"{prefix}.{key}" if prefix else key


def walk(obj, budget: Budget | None = None) -> Walk:
    """Flatten a stand-in object tree into dotted paths (``optimizer.state.12.exp_avg``,
    ``optimizer.param_groups[0].lr``), bounded in depth and entry count, shared refs once, and
    in memory: each entry is charged to ``budget`` (the file's), and the walk stops when it is spent."""
    out = Walk()
    seen: set[int] = set()

    def add(path: str, value) -> None:
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
            value = f"<int of {value.bit_length()} bits>"  # str() of a 5,000-digit int raises; nobody needs its digits
        elif isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
            value = value[:MAX_VALUE_CHARS] + f"... ({len(value):,} characters)"
        if budget is not None:
            budget.used += ENTRY_BYTES + len(path)
            if budget.used > budget.limit:
                budget.charge(0, f"listing the entries ({len(out.entries):,} so far)")  # raises BudgetExceeded
        out.entries.append(Entry(path, value))

    def visit(value, path: str, depth: int, nested: int) -> None:
        if len(out.entries) >= MAX_ENTRIES:
            return
        if depth > MAX_DEPTH:
            out.problems.append(f"nesting deeper than {MAX_DEPTH} at {path}: not walked")
            return
        if isinstance(value, (dict, list, tuple, set, frozenset, Opaque)) and not isinstance(value, _NDArray):
            if id(value) in seen:
                add(path, "<shared reference>")
                return
            seen.add(id(value))
        if isinstance(value, dict):
            tensor_keys = [str(k) for k, v in value.items() if isinstance(v, TensorInfo)]
            if tensor_keys and len(tensor_keys) == len(value):
                out.state_dicts.append((path, tensor_keys))
            if not value:
                add(path, {})
            for k, v in value.items():
                visit(v, _join(path, k), depth + 1, nested)
        elif isinstance(value, (list, tuple)):
            if not value or (len(value) > 64 and all(isinstance(v, (int, float, bool, type(None))) for v in value[:64])) \
                    or (len(value) > 8 and all(type(v) is int for v in value)):  # e.g. param_groups[i].params
                add(path, f"<{type(value).__name__} of {len(value)}>")
                return
            for i, v in enumerate(value):
                visit(v, f"{path}[{i}]", depth + 1, nested)
        elif isinstance(value, (set, frozenset)):
            add(path, f"<set of {len(value)}>")
        elif isinstance(value, _NDArray):
            add(path, value.state if isinstance(value.state, NDArrayInfo) else NDArrayInfo())
        elif isinstance(value, Opaque):
            visit_opaque(value, path, depth, nested)
        elif isinstance(value, (bytes, bytearray)):
            add(path, f"<{len(value)} bytes>")
        elif isinstance(value, complex):
            add(path, str(value))
        else:
            add(path, value)

    def visit_opaque(value: Opaque, path: str, depth: int, nested: int) -> None:
        key = (value._module, value._name)
        if key in NESTED_PICKLE_LOADERS and value.args and isinstance(value.args[0], (bytes, bytearray)):
            if nested >= MAX_NESTED:
                out.problems.append(f"pickle nested more than {MAX_NESTED} deep at {path}: not opened")
                return
            inner: StubResult = stub_load(bytes(value.args[0]), budget=budget)
            for g, n in inner.globals.items():
                out.nested_globals[g] = out.nested_globals.get(g, 0) + n
            if inner.error:
                out.problems.append(f"nested pickle at {path}: {inner.error}")
            visit(inner.obj, path, depth + 1, nested + 1)
            return
        if value._name == "Size" and value.args:
            dims = value.args[0]
            dims = (list(dims) if len(dims) <= 64 else f"<{len(dims):,} dims>") if isinstance(dims, (list, tuple)) else "?"
            add(path, f"torch.Size({dims})")
            return
        attrs = value.attrs()
        if not attrs and not value.items and not value.list:
            shown = ", ".join(repr(a[:40] if isinstance(a, str) else key_text(a))[:40]
                              for a in value.args[:3] if isinstance(a, (str, int, float, bool)))
            add(path, f"<{value.qualname}({shown})>")
            return
        for k, v in attrs.items():
            visit(v, _join(path, k), depth + 1, nested)
        for k, v in value.items.items():
            visit(v, _join(path, k), depth + 1, nested)
        for i, v in enumerate(value.list):
            visit(v, f"{path}[{i}]", depth + 1, nested)

    try:
        visit(obj, "", 0, 0)
    except BudgetExceeded as exc:
        out.over_budget = str(exc)
    return out


def category_of(path: str) -> str:
    """'optimizer' | 'scheduler' | 'rng' | 'dataloader' | 'scaler' | 'model_or_other'."""
    low = path.lower()
    for category, markers in CATEGORY_MARKERS:
        if any(m in low for m in markers):
            return category
    return "model_or_other"


class ContentSummary:
    """What one checkpoint file holds, in resume terms."""

    def __init__(self, *, tensors: int = 0, tensor_bytes: int = 0, categories: list[str] | None = None,
                 model_tensors: int = 0) -> None:
        self.tensors = tensors
        self.tensor_bytes = tensor_bytes
        self.step: int | None = None
        self.step_key: str | None = None
        self.epoch: float | None = None
        self.categories: list[str] = categories or []  # optimizer, scheduler, rng, dataloader, scaler, model
        self.rng_kinds: list[str] = []  # python, numpy, torch, cuda
        self.cuda_rng_devices: int | None = None
        self.model_prefix: str | None = None
        self.model_tensors = model_tensors
        self.top_keys: list[str] = []

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def summarise(w: Walk) -> ContentSummary:
    s = ContentSummary()
    cats: set[str] = set()
    rng: set[str] = set()
    cuda_devices: set[str] = set()
    step_rank = len(STEP_KEYS)
    for e in w.entries:
        top = e.path.split(".")[0].split("[")[0]
        if top and top not in s.top_keys:
            s.top_keys.append(top)
        cat = category_of(e.path)
        if isinstance(e.value, TensorInfo):
            s.tensors += 1
            s.tensor_bytes += e.value.nbytes
            if cat == "model_or_other":
                s.model_tensors += 1
        if cat != "model_or_other" and e.value is not None and e.value != {}:  # a None slot holds no state
            cats.add(cat)
        if cat == "rng":
            parts = [p.split("[")[0].lower() for p in e.path.split(".")]
            for p in parts[1:] or parts:
                if p in RNG_KINDS:
                    rng.add(RNG_KINDS[p])
            m = _CUDA_INDEX.search(e.path.lower())
            if m:
                cuda_devices.add(m.group(1) or "0")
        leaf = e.path.rsplit(".", 1)[-1].lower()
        shallow = e.path.count(".") <= 1 and cat == "model_or_other"
        if shallow and isinstance(e.value, int) and not isinstance(e.value, bool) and leaf in STEP_KEYS:
            rank = STEP_KEYS.index(leaf)
            if rank < step_rank:
                s.step, s.step_key, step_rank = e.value, e.path, rank
        if shallow and leaf == "epoch" and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
            s.epoch = e.value
    if s.model_tensors:
        cats.add("model")
    s.categories = sorted(cats)
    s.rng_kinds = sorted(rng)
    s.cuda_rng_devices = len(cuda_devices) or None
    model_dicts = [(p, keys) for p, keys in w.state_dicts if category_of(p) == "model_or_other"]
    if model_dicts:
        _path, keys = max(model_dicts, key=lambda pk: len(pk[1]))
        for prefix in PREFIXES:
            if all(k.startswith(prefix) for k in keys):
                s.model_prefix = prefix
    return s
