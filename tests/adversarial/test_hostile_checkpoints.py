"""Hostile checkpoints (tests/adversarial/hostile.py): the real loaders run every payload; gpulib runs
none, flags every one (exit 3: UNSAFE / needs review; exit 1 for what no loader opens), never
recommends one (``ckpt latest`` picks the good older checkpoint beside it), and stays within its
documented memory budget (docs/CHECKPOINT_THREAT_MODEL.md) on each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib.cli import main
from gpulib.safe_pickle import memory_budget
from tests.adversarial.hostile import Case, build
from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

CLASSES = ("legacy_magic", "legacy_protocol", "legacy_sys_info", "legacy_object", "legacy_keys", "tar_polyglot",
           "dcp_item_under_any_name", "zip_duplicate_data_pkl", "zip_nested", "hf_training_args",
           "accelerate_random_states", "deepspeed_", "json_as_pt", "safetensors_offsets_strings",
           "safetensors_offsets_null", "safetensors_offsets_5000_digits", "safetensors_deep_json", "bomb_")


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[Case]:
    return build(tmp_path_factory.mktemp("hostile"), torch)


def _run(args: list[str], capsys) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().out


def test_at_least_40_kinds_covering_every_class(cases):
    names = [c.name for c in cases]
    assert len(set(names)) == len(names) >= 40, names
    missing = [k for k in CLASSES if not any(n.startswith(k) for n in names)]
    assert not missing, missing


def test_gpulib_runs_none_flags_all_recommends_none(cases, capsys):
    for c in cases:
        if c.sentinel:
            c.sentinel.unlink(missing_ok=True)
    for c in cases:
        code, out = _run(["ckpt", "verify", str(c.load_path)], capsys)
        want = 1 if c.loader in ("refused", "safetensors_load") else 3  # not a checkpoint / UNSAFE or needs review
        assert code == want, f"{c.name}: exit {code}, not {want}\n{out}"
        assert "Traceback" not in out
        code, out = _run(["ckpt", "latest", "--format", "json", str(c.series)], capsys)
        doc = json.loads(out)
        assert code == 0 and doc["resume_from"] and Path(doc["resume_from"]).name == c.good, \
            f"{c.name}: recommended {doc['resume_from']}, not the good {c.good}: {doc['why_none']}"
        hostile = [x for x in doc["checkpoints"] if str(c.path) in x["paths"]]
        assert hostile and not hostile[0]["complete"] and hostile[0]["reasons"], f"{c.name}: {hostile}"
    ran = [c.name for c in cases if c.sentinel and c.sentinel.exists()]
    assert not ran, f"gpulib ran the payload of {ran}"


def test_the_real_loader_runs_every_payload_and_refuses_the_rest(cases, tmp_path):
    """The proof that each case is a real attack: torch.load / dcp.load / safetensors as the frameworks call them."""
    listed = [{"name": c.name, "path": str(c.load_path), "loader": c.loader, "sentinel": str(c.sentinel or "")}
              for c in cases if c.loader]
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(listed))
    run = subprocess.run([sys.executable, str(Path(__file__).with_name("real_loader.py")), str(spec)],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    for c in cases:
        if not c.loader:
            continue
        got = result[c.name]
        if c.sentinel:
            assert got["ran"], f"{c.name}: the real loader did not run the payload ({got['error']})"
            c.sentinel.unlink()
        else:
            assert got["error"], f"{c.name}: the real loader opened it"


MEASURE = r"""
import contextlib, io, json, resource, sys
from gpulib.cli import main
out = []
for path in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["ckpt", "verify", path])
    out.append(rc)
# VmHWM: the peak of this process's own memory (ru_maxrss would also keep the parent's, from before exec)
try:
    peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rc": out, "rss_mib": peak_kib / 1024}))
"""


def _peak(paths: list[Path]) -> dict:
    run = subprocess.run([sys.executable, "-c", MEASURE, *map(str, paths)], capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_peak_memory_stays_within_the_budget(cases):
    """Peak RSS of `ckpt verify` over the same process verifying a small good file: within the
    budget (4x the file, at least 64 MiB, at most 512 MiB) - measured per bomb in its own process,
    and for all the small payload files together in one (their budget is the 64 MiB floor)."""
    base = _peak([cases[0].series / cases[0].good])["rss_mib"]
    small = [c.load_path for c in cases if not c.name.startswith("bomb_") and c.load_path.is_file()]
    worst = _peak(small)
    assert worst["rss_mib"] - base <= memory_budget(0) / 2**20, (worst, base)
    for c in cases:
        if not c.name.startswith("bomb_"):
            continue
        got = _peak([c.load_path])
        budget = memory_budget(c.load_path.stat().st_size) / 2**20
        assert got["rc"] == [3], (c.name, got)
        assert got["rss_mib"] - base <= budget, f"{c.name}: {got['rss_mib'] - base:.0f} MiB over the start, budget {budget:.0f}"
