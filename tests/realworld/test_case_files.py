"""Every case folder of our own sets is well formed, so a scorer can trust it.

A case's ``expected.json`` carries exactly the keys the maintainers' scorer and the README tables
read, a category of the shared vocabulary, and a ``first_event`` that is a line of its input
exactly as written (a first event paraphrased by the case's builder would test the builder).
"""

from __future__ import annotations

import json

import pytest

from gpulib.vocabulary import CATEGORIES
from tests.realworld.scoring import BATCHES, OWN_CASES, cases

KEYS = {"source_url", "category", "interruption", "host", "rank", "gpu_index", "gpu_pci", "first_event", "why",
        "confidence", "notes", "modelled", "rekeyed"}
CASES = [pytest.param(c, id=f"{name}/{c.name}") for name, path in BATCHES.items() for c in cases(path)]


def _lines(case) -> set[str]:
    return {line.rstrip("\r") for f in (case / "input").rglob("*") if f.is_file()
            for line in f.read_text(encoding="utf-8", errors="replace").splitlines()}


@pytest.mark.parametrize("case", CASES)
def test_expected_answer_is_well_formed(case):
    exp = json.loads((case / "expected.json").read_text())
    assert KEYS <= set(exp), f"{case.name}: missing {sorted(KEYS - set(exp))}"
    assert exp["category"] in (*CATEGORIES, "unknown"), f"{case.name}: {exp['category']} is not in the vocabulary"
    assert exp["interruption"] in {"hard", "soft", "none", "unknown"}
    assert exp["confidence"] in {"high", "medium", "low"}
    if exp["first_event"] is not None:
        assert exp["first_event"] in _lines(case), f"{case.name}: first_event is not a line of its input"
    if exp["gpu_pci"]:
        assert exp["gpu_pci"] == exp["gpu_pci"].lower() and exp["gpu_pci"].startswith("0000:"), exp["gpu_pci"]


def test_own_cases_exist():
    """The yardstick is never empty in this repository (the shared sets may be absent, ours are not)."""
    assert cases(OWN_CASES) and all(cases(path) for path in BATCHES.values())
