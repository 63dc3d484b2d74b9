"""Real-world yardstick: log excerpts from public incident threads, judged by what each thread concluded.

Two sets: ``../shared/corpus/public-threads`` (read in place, skipped with a reason when absent) and
``tests/realworld/cases`` (our own fixtures, each modelled on one public thread: its layout and
machine messages as printed, identifiers of our own). Every high/medium-confidence case must be
right; no failure may be answered "none". The accuracy per field is printed (``pytest -s``) and
written to ``test-output/realworld-accuracy.txt``.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, SHARED
from tests.realworld.scoring import OWN_CASES, SHARED_THREADS_NAME, cases, judge, table

SHARED_THREADS = SHARED.joinpath(*SHARED_THREADS_NAME)
ALL = cases(SHARED_THREADS) + cases(OWN_CASES)


#: Cases the engine does not yet answer, each with what it would take (xfail strict: fixing one fails
#: the run until it is removed from this list, so the list only shrinks).
KNOWN_GAPS: dict[str, str] = {}


def _param(case, prefix):
    marks = [pytest.mark.xfail(reason=KNOWN_GAPS[case.name], strict=True)] if case.name in KNOWN_GAPS else []
    return pytest.param(case, id=f"{prefix}/{case.name}", marks=marks)


CASES = [_param(c, "shared") for c in cases(SHARED_THREADS)] + [_param(c, "own") for c in cases(OWN_CASES)]


@pytest.mark.parametrize("case", CASES)
def test_thread_conclusion(case):
    v = judge(case)
    assert not v.silent_none, f"{case.name}: a failure answered 'none' ({v.got['verdict']['summary']})"
    crashed = [f["title"] for f in v.got["findings"] if f["id"].startswith("internal")]
    assert not crashed, f"{case.name}: a rule failed on real evidence: {crashed}"
    if v.must_be_right:
        got = v.got.get("root_cause") or {}
        assert v.right, (f"{case.name}: expected {v.expected['category']}/{v.expected['interruption']}, got "
                         f"{got.get('category') or v.got['verdict']['category']}/{v.got['verdict']['interruption']}: "
                         f"{v.got['verdict']['summary']}")


def test_accuracy_per_field_is_reported():
    if not ALL:
        pytest.skip(f"no real-world cases: {SHARED_THREADS} absent and {OWN_CASES} empty")
    verdicts = [judge(c) for c in ALL]
    report = table(verdicts)
    out = REPO / "test-output"
    out.mkdir(exist_ok=True)
    (out / "realworld-accuracy.txt").write_text(report + "\n")
    print("\n" + report)
    # the yardstick as a whole: nearly every conclusion, and never a silent none
    assert sum(v.right for v in verdicts) >= 0.85 * len(verdicts)
    assert not any(v.silent_none for v in verdicts if v.case not in KNOWN_GAPS)
