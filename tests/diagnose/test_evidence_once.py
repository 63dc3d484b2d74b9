"""One :class:`~gpulib.diagnose.cache.Evidence`: read once, re-judged (never re-read) when a
threshold changes.

The proof is mechanical: the evidence folder is deleted after the first reading; a slider's other
thresholds must still give a diagnosis, and it must be the one a fresh reading at those thresholds
gives (a re-judgement over stale or partial records would differ).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpulib.diagnose import diagnose
from gpulib.diagnose.cache import Evidence, write_cache
from gpulib.evidence.thresholds import Thresholds
from gpulib.notebook.tables import EvidenceTables

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "incident-gpu-fell-off-bus"
COOL = Thresholds(temp_limit_c=20.0)  # every GPU with a reading is now "hot"


def _ids(diagnosis: dict) -> list[str]:
    return sorted(f["id"] for f in diagnosis["findings"])


def _hot(diagnosis: dict) -> list[str]:
    return [i for i in _ids(diagnosis) if i.startswith("hot")]


def _copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(EXAMPLE, tmp_path / name))


def test_a_threshold_change_rejudges_without_reading_the_files(tmp_path):
    path = _copy(tmp_path, "incident")
    fresh = diagnose([_copy(tmp_path, "again")], thresholds=COOL).to_dict()
    evidence = Evidence.open(path)
    default = evidence.diagnosis
    assert not _hot(default)
    shutil.rmtree(path)  # nothing left to read: what follows is judged from what was read
    cooler = evidence.judge(COOL)
    assert _hot(cooler) and _ids(cooler) == _ids(fresh)
    assert evidence.judge(COOL) is cooler  # asked once per thresholds
    assert evidence.judge(Thresholds()) is default


def test_the_notebook_slider_rejudges_the_opened_evidence(tmp_path):
    path = _copy(tmp_path, "incident")
    tables = EvidenceTables(path)
    assert not _hot(tables.diagnosis) and len(tables.inputs()) > 0
    shutil.rmtree(path)
    assert _hot(tables.diagnosis_at(temp_limit_c=20.0))


def test_under_a_run_cache_the_default_is_not_read_and_a_slider_reads_once(tmp_path):
    path = _copy(tmp_path, "incident").resolve()
    cache = write_cache([path], tmp_path / "cache.json")
    evidence = Evidence(path, cache=cache)
    default = evidence.diagnosis
    assert evidence._inputs is None  # served by the cache: nothing parsed here
    assert _ids(default) == _ids(diagnose([path]).to_dict())
    cooler = evidence.judge(COOL)  # the one reading of this process
    shutil.rmtree(path)
    assert evidence.judge(Thresholds(temp_limit_c=30.0)) and _hot(cooler)


def test_the_cli_reading_is_lean_and_judges_like_diagnose(tmp_path):
    path = _copy(tmp_path, "incident")
    lean = Evidence([path], full_series=False)
    assert lean.diagnose().to_dict()["findings"] == diagnose([path]).to_dict()["findings"]


@pytest.mark.parametrize("case", sorted(p for p in EXAMPLE.parent.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_rejudging_the_same_inputs_agrees_with_fresh_readings(case):
    """The rules leave the gathered inputs as they found them: every re-judgement of one reading
    is the diagnosis a fresh reading at those thresholds gives, in any order."""
    evidence = Evidence.open(case)
    for thresholds in (COOL, Thresholds(imbalance_gib=0.1), Thresholds()):
        assert evidence.judge(thresholds)["findings"] == diagnose([case], thresholds=thresholds).to_dict()["findings"]
