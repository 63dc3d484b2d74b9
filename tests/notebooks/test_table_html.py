"""Tables designed per cell: identifiers never broken, prose wrapped at words and cut after the
token that carries the number, the culprit's rows highlighted, a sideways scroll box."""

from __future__ import annotations

import re

import pandas as pd

from gpulib.notebook.display import readable
from gpulib.notebook.table_html import CELL_CHARS, NOWRAP, PROSE, culprit_rows, table_html

FIRST_PROBLEM = ("watchdog_timeout: [E117 05:01:13.644394342 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
                 "collective operation timeout: WorkNCCL(SeqNum=88120, OpType=ALLREDUCE, NumelIn=1048576, "
                 "NumelOut=1048576, Timeout(ms)=600000) ran for 600017 milliseconds before timing out.")


def _cells(page: str) -> list[tuple[str, str, str]]:
    """(style, title, text) of each ``<td>``."""
    return [(m[1], m[2] or "", m[3]) for m in re.finditer(r'<td style="([^"]*)"(?: title="([^"]*)")?>(.*?)</td>', page)]


def test_tokens_do_not_wrap_and_prose_wraps_between_words():
    frame = pd.DataFrame({"host": ["gx-a800-101"], "pid": ["60212"], "rank": [0], "first_problem": [FIRST_PROBLEM]})
    page = table_html(readable(frame))
    (host_style, _, host), (pid_style, _, pid), (rank_style, _, _), (text_style, title, text) = _cells(page)
    assert host == "gx-a800-101" and host_style == NOWRAP and pid_style == NOWRAP and rank_style == NOWRAP
    assert text_style == PROSE and "overflow-wrap:normal" in PROSE and "word-break:normal" in PROSE
    assert '<th style="white-space:nowrap">first_problem</th>' in page
    assert 'style="overflow-x:auto' in page  # a wide table scrolls in its own box


def test_long_text_is_cut_after_the_token_that_crosses_the_limit_with_the_whole_text_on_hover():
    assert len(FIRST_PROBLEM) > CELL_CHARS
    [(_, title, text)] = _cells(table_html(readable(pd.DataFrame({"first_problem": [FIRST_PROBLEM]}))))
    assert text.endswith(" …") and FIRST_PROBLEM.startswith(text[:-2])
    assert "SeqNum=88120," in text  # the number that matters is whole
    assert title.replace("&#x27;", "'") == FIRST_PROBLEM
    cut = text[:-2]
    assert FIRST_PROBLEM[len(cut)] == " "  # cut at a word boundary, never inside a token


def test_the_culprits_rows_are_highlighted_by_gpu_else_rank_else_host():
    ranks = pd.DataFrame({"rank": [9, 10, 11], "host": ["gx-102"] * 3,
                          "gpu": ["0000:13:00.0 (GPU 1)", "0000:4f:00.0 (GPU 2 in the job)", "0000:54:00.0 (GPU 2)"]})
    root = {"host": "gx-102", "gpu_pci": "0000:4f:00.0", "rank": 10, "finding": "xid79-gx_102"}
    assert list(culprit_rows(ranks, root)) == [False, True, False]
    assert list(culprit_rows(ranks.drop(columns="gpu"), root)) == [False, True, False]  # by rank
    assert list(culprit_rows(ranks, {**root, "host": "gx-101"})) == [False, False, False]  # another host's GPU
    findings = pd.DataFrame({"id": ["xid79-gx_102", "nccl-timeout"], "host": ["gx-102", "gx-101"]})
    assert list(culprit_rows(findings, root)) == [True, False]
    inputs = pd.DataFrame({"file": ["a.log", "b.log"], "host": ["ib-3", "ib-4"]})
    assert list(culprit_rows(inputs, {"host": "ib-3"})) == [True, False]  # a cause with only a host
    assert list(culprit_rows(inputs, root)) == [False, False]  # a GPU's culprit does not mark a whole host
    page = table_html(readable(ranks), culprit_rows(ranks, root))
    assert page.count('class="gpulib-culprit"') == 1


def test_a_path_breaks_only_after_a_slash():
    [(style, _, text)] = _cells(table_html(readable(pd.DataFrame({"file": ["gx-a800-102/journal-kernel.txt"]}))))
    assert text == "gx-a800-102/<wbr>journal-kernel.txt" and "nowrap" not in style and "word-break:normal" in style
