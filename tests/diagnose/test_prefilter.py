"""The keyword prefilter finds exactly the lines a naive search finds, whatever the byte mix."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulib.parsers.prefilter import ENGINES, KeywordLines
from gpulib.parsers.training_log import CATALOGUE_KEYWORDS

KEYWORDS = (b"Watchdog caught", b"Xid", b"out of memory", b"`", b"NCCL WARN", b"error")


def naive(data: bytes, keywords) -> list[int]:
    starts = set()
    for kw in keywords:
        pos = data.find(kw)
        while pos != -1:
            starts.add(data.rfind(b"\n", 0, pos) + 1)
            pos = data.find(kw, pos + 1)
    return sorted(starts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"Watchdog caught ", b"Xid 79", b"x", b"\n", b"out of memory", b"`", b"NCCL WARN ",
                                  b"err", b"or", b"error", b"W", b"INFO ", b"aaaa", b"\xff"]), max_size=80))
def test_same_lines_as_naive(parts):
    data = b"".join(parts)
    for engine in ENGINES:
        assert KeywordLines(KEYWORDS, engine).line_starts(data) == naive(data, KEYWORDS), engine
        limit = len(data) // 2
        assert KeywordLines(KEYWORDS, engine).line_starts(data, limit) == \
            naive(data[:limit], KEYWORDS), engine


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"Watchdog caught ", b"Xid 79", b"x", b"\n", b"out of memory", b"`", b"NCCL WARN ",
                                  b"err", b"or", b"error", b"W", b"aaaa"]), max_size=60), st.integers(0, 40))
def test_each_line_names_every_keyword_it_holds(parts, within):
    pytest.importorskip("hyperscan")
    data = b"".join(parts)
    found = KeywordLines(KEYWORDS, "hyperscan").line_keywords(data, within=within)
    assert list(found) == naive(data, KEYWORDS)
    for start, held in found.items():
        line = data[start:].split(b"\n", 1)[0][:within]
        assert sorted(held) == sorted(i for i, kw in enumerate(KEYWORDS) if kw in line)  # each once
    assert KeywordLines(KEYWORDS, "anchors").line_keywords(data) is None  # it stops at a line's first keyword


def test_anchor_and_direct_paths_both_used():
    common = b"lowercase words only, error here and there\n" * 200 + b"Watchdog caught it\n"
    finder = KeywordLines(KEYWORDS, "anchors")
    starts = finder.line_starts(common)
    assert starts == naive(common, KEYWORDS)
    assert b"error" in finder.direct  # every byte of it is common in this log: searched whole
    assert any(kw == b"Watchdog caught" for entries in finder.by_anchor.values() for kw, _ in entries)


@pytest.mark.parametrize("engine", ENGINES)
def test_real_catalogue_on_a_case_log(incidents, engine):
    data = (incidents / "case-01-xid79-fell-off-bus" / "input" / "slurm-88231.out").read_bytes()
    assert KeywordLines(CATALOGUE_KEYWORDS, engine).line_starts(data) == naive(data, CATALOGUE_KEYWORDS)


def test_hyperscan_is_the_default_where_installed():
    pytest.importorskip("hyperscan")
    assert KeywordLines(KEYWORDS).engine == "hyperscan"


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="unknown or unavailable"):
        KeywordLines(KEYWORDS, "grep")
