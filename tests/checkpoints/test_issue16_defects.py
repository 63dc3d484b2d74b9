"""Each defect of issue 16, one test named after it (checkpoints written by torch itself)."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib.checkpoints import inspect_path
from gpulib.checkpoints.latest import find_latest
from tests.checkpoints.conftest import training_state
from tests.checkpoints.test_latest import _hf_checkpoint, _reason, _save, _truncate
from tests.conftest import REPO

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st = pytest.importorskip("safetensors.torch")


class _Eval:
    """A payload object whose pickle calls numpy.f2py.crackfortran.myeval (an eval gadget)."""

    def __init__(self, expr: str):
        self.expr = expr

    def __reduce__(self):
        from numpy.f2py import crackfortran
        return crackfortran.myeval, (self.expr,)


def _malicious(path: Path, marker: Path, gadget: str = "os") -> Path:
    class Run:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)
    payload = Run() if gadget == "os" else _Eval(f"__import__('os').system('touch {marker}')")
    with open(path, "wb") as fh:
        pickle.dump({"python": 1, "x": payload}, fh, protocol=2)
    return path


def _accelerate_checkpoint(d: Path, with_optimizer: bool = True, with_scheduler: bool = True) -> Path:
    state = training_state(7, ddp_prefix=False)
    d.mkdir(parents=True)
    st.save_file({k: v.contiguous() for k, v in state["model"].items()}, str(d / "model.safetensors"))
    if with_optimizer:
        _save(state["optimizer"], d / "optimizer.bin")
    if with_scheduler:
        _save(state["lr_scheduler"], d / "scheduler.bin")
    _save({"step": 0, "random_state": state["rng_state"]["python"], "numpy_random_seed": state["rng_state"]["numpy"],
           "torch_manual_seed": state["rng_state"]["cpu"]}, d / "random_states_0.pkl")
    return d


def test_accelerate_step_from_folder_number_not_random_states(tmp_path):
    """random_states' step is the accumulation counter (0 at every save): checkpoint_10 beats checkpoint_9."""
    for i in (2, 9, 10):
        _accelerate_checkpoint(tmp_path / "checkpoints" / f"checkpoint_{i}")
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint_10" and report.chosen.step == 10


def test_accelerate_missing_optimizer_bin_rejected(tmp_path):
    _accelerate_checkpoint(tmp_path / "checkpoints" / "checkpoint_0")
    _accelerate_checkpoint(tmp_path / "checkpoints" / "checkpoint_1", with_optimizer=False)
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint_0"
    assert "no optimizer.bin" in _reason(report, "checkpoint_1")


def test_accelerate_missing_file_the_series_has_rejected(tmp_path):
    _accelerate_checkpoint(tmp_path / "checkpoints" / "checkpoint_0")
    _accelerate_checkpoint(tmp_path / "checkpoints" / "checkpoint_1", with_scheduler=False)
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint_0"
    assert "scheduler.bin" in _reason(report, "checkpoint_1")


def _deepspeed_tag(d: Path, step: int, zero_stage: int, optim_ranks=(0, 1)) -> Path:
    d.mkdir(parents=True)
    state = training_state(step, ddp_prefix=False)
    _save({"module": state["model"], "optimizer": None, "global_steps": step, "dp_world_size": 2, "mp_world_size": 1,
           "ds_config": {"zero_optimization": {"stage": zero_stage}}}, d / "mp_rank_00_model_states.pt")
    for r in optim_ranks:
        _save({"optimizer_state_dict": {"zero_stage": zero_stage}}, d / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt")
    return d


def test_deepspeed_tag_with_no_optimizer_shards_rejected(tmp_path):
    _deepspeed_tag(tmp_path / "global_step10", 10, 2)
    _deepspeed_tag(tmp_path / "global_step20", 20, 2, optim_ranks=())
    (tmp_path / "latest").write_text("global_step20")
    report = find_latest([tmp_path])
    assert report.chosen.name == "global_step10"
    assert "no ZeRO optimizer shards at all" in _reason(report, "global_step20")
    assert any("incomplete" in d for d in report.disagreements)


@pytest.mark.parametrize("damage", ["truncated", "malicious"])
def test_hf_rng_state_pth_is_checked(tmp_path, damage):
    """rng_state.pth (single-process name): the Trainer's resume opens it."""
    older = _hf_checkpoint(tmp_path / "checkpoint-10", 10, ranks=())
    newer = _hf_checkpoint(tmp_path / "checkpoint-20", 20, ranks=())
    for d in (older, newer):
        _save(training_state()["rng_state"], d / "rng_state.pth")
    marker = tmp_path / "PWNED"
    if damage == "truncated":
        _truncate(newer / "rng_state.pth")
    else:
        _malicious(newer / "rng_state.pth", marker)
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint-10"
    assert "rng_state.pth" in _reason(report, "checkpoint-20")
    assert not marker.exists()


def test_unsafe_newest_not_recommended(tmp_path, capsys):
    from gpulib.cli import main

    marker = tmp_path / "PWNED"
    _malicious(tmp_path / "ckpt_step_200.pt", marker)
    assert main(["ckpt", "latest", str(tmp_path)]) == 3  # none resumable, one refused as UNSAFE: no-go
    out = capsys.readouterr().out
    assert "resume from" not in out and "UNSAFE" in out and "never recommended" in out
    _save(training_state(100), tmp_path / "ckpt_step_100.pt")
    report = find_latest([tmp_path])
    assert report.chosen.name == "ckpt_step_100.pt"
    assert _reason(report, "ckpt_step_200.pt").startswith("UNSAFE")
    assert not marker.exists()


def test_numpy_f2py_myeval_gadget_is_unsafe_and_never_advised(tmp_path):
    marker = tmp_path / "PWNED"
    r = inspect_path(_malicious(tmp_path / "evil.pt", marker, gadget="f2py"))
    assert r.unsafe and not marker.exists()
    assert not any("myeval" in x for x in r.meta.get("add_safe_globals", []))
    assert not any(f.severity == "needs_allowlist" and "myeval" in f.message for f in r.findings)


@pytest.mark.parametrize(("module", "name"), [
    ("numpy.f2py.crackfortran", "myeval"), ("torch._dynamo.guards", "GuardBuilder"), ("pydoc", "locate"),
    ("operator", "attrgetter"), ("functools", "partial"), ("builtins", "getattr"),
    ("torch.fx.graph_module", "reduce_graph_module"),
])
def test_known_gadgets_denied(module, name):
    from gpulib.safe_pickle import classify_global

    assert classify_global(module, name)[0] == "dangerous"


def test_unknown_global_needs_review_never_advised(tmp_path):
    data = b"\x80\x02cmy_project.things\nMaker\n)R}X\x01\x00\x00\x00ak\x01sb."
    p = tmp_path / "custom.pt"
    p.write_bytes(data)
    r = inspect_path(p)
    assert any(f.severity == "needs_review" for f in r.findings)
    assert r.meta["add_safe_globals"] == []


def test_add_safe_globals_advice_is_exactly_what_torch_needs(tmp_path):
    """The advised list, resolved and passed to torch, loads the file with weights_only=True;
    dropping any one of them makes torch refuse it again."""
    import importlib

    p = tmp_path / "rng.pt"
    torch.save({"numpy": np.random.get_state(), "step": 3}, p)
    advice = inspect_path(p).meta["add_safe_globals"]
    assert "numpy.dtypes.UInt32DType" in advice

    def resolve(qual):
        mod, _, attr = qual.rpartition(".")
        return getattr(importlib.import_module(mod), attr)
    objs = [resolve(q) for q in advice]
    with torch.serialization.safe_globals(objs):
        torch.load(p, weights_only=True)
    for i in range(len(objs)):
        with torch.serialization.safe_globals(objs[:i] + objs[i + 1:]), pytest.raises(pickle.UnpicklingError):
            torch.load(p, weights_only=True)


def test_protocol_4_pickle_flagged_for_weights_only(tmp_path):
    p = tmp_path / "p4.pt"
    torch.save({"w": torch.ones(2)}, p, pickle_protocol=4)
    r = inspect_path(p)
    assert any("protocol-4" in f.message and "weights_only" in f.message for f in r.findings)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(p, weights_only=True)


def test_compute_crc32_false_is_not_corrupt(tmp_path):
    p = tmp_path / "nocrc.pt"
    torch.serialization.set_crc32_options(False)
    try:
        torch.save(training_state(), p)
    finally:
        torch.serialization.set_crc32_options(True)
    r = inspect_path(p, deep=True)
    assert r.valid, r.findings
    assert any("carry no CRC" in f.message for f in r.findings)
    torch.load(p, weights_only=False)


def test_bytes_appended_after_valid_zip_not_truncation(tmp_path, full_ckpt):
    p = tmp_path / "appended.pt"
    p.write_bytes(full_ckpt.read_bytes() + b"\0" * 4096)
    r = inspect_path(p, deep=True)
    assert r.valid and not any("truncat" in f.message for f in r.findings)
    assert any("4,096 bytes follow the zip end record" in f.message for f in r.findings)
    torch.load(p, weights_only=False)


def test_symlinked_newest_checkpoint_handled_and_reported(tmp_path):
    other = tmp_path / "other-disk"
    _hf_checkpoint(other / "checkpoint-30", 30)
    root = tmp_path / "run"
    _hf_checkpoint(root / "checkpoint-20", 20)
    (root / "checkpoint-30").symlink_to(other / "checkpoint-30")
    report = find_latest([root])
    assert report.chosen.name == "checkpoint-30"
    assert any("symlink" in w for w in report.chosen.warnings)


def test_tmp_checkpoint_n_is_the_trainers_temp(tmp_path):
    _hf_checkpoint(tmp_path / "checkpoint-20", 20)
    _hf_checkpoint(tmp_path / "tmp-checkpoint-30", 30)
    report = find_latest([tmp_path])
    assert report.chosen.name == "checkpoint-20"
    assert any("tmp-checkpoint-30" in x and "HF Trainer" in x for x in report.leftovers)


def test_memo_limit_tiny_pickle_cannot_take_gigabytes(tmp_path):
    """A 9-byte pickle with memo slot 2**28 made the C unpickler allocate 2 GB."""
    p = tmp_path / "bomb.pkl"
    p.write_bytes(b"\x80\x02]r\xff\xff\xff\x0f.")
    code = ("import re\nfrom gpulib.checkpoints import inspect_path\n"
            f"r = inspect_path({str(p)!r})\n"  # VmHWM: this process's peak (ru_maxrss survives exec)
            "print(int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024, r.unsafe)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    rss_mb, unsafe = out.stdout.split()
    assert int(rss_mb) < 200 and unsafe == "True", out.stderr


def test_message_wording_has_no_doubled_severity(tmp_path, full_ckpt, capsys):
    from gpulib.cli import main

    p = tmp_path / "flip.pt"
    data = bytearray(full_ckpt.read_bytes())
    cd = data.rfind(b"PK\x01\x02")
    data[cd + 16] ^= 0xFF  # the CRC field of the last central-directory entry
    p.write_bytes(bytes(data))
    main(["ckpt", "verify", "--deep", str(p)])
    out = capsys.readouterr().out
    assert "CORRUPT:" in out and "CORRUPT: corrupt:" not in out


def test_verify_deep_says_which_formats_carry_no_checksum(tmp_path, legacy_ckpt, capsys):
    from gpulib.cli import main

    sf = tmp_path / "model.safetensors"
    st.save_file({"w": torch.ones(4)}, str(sf))
    main(["ckpt", "verify", "--deep", str(sf), str(legacy_ckpt), "--format", "json"])
    reports = json.load(io.StringIO(capsys.readouterr().out))
    for r in reports:
        assert any("carry no checksum" in f["message"] for f in r["findings"]), r["findings"]
