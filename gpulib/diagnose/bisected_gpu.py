"""The GPU a failing test added to a passing one, in a pasted session that narrows a fault down.

An operator who suspects one GPU runs the same test on a set of GPUs that passes, then on a set
that holds the suspect and fails (``gpu-check -g 3,4,5,2,0`` passes, ``gpu-check -g 1,0`` fails with
'device busy or unavailable'); the kernel log printed after it names no GPU. The GPU the failing
runs used and no passing run did is the one to reset: this reads it when that is exactly one GPU.
A run selects GPUs by a list (``-g 1,0``, ``--gpus 1,0``, ``--devices 1,0``, two or more indices: a
lone number after ``-g`` is a GPU *count* for nccl-tests) or by ``CUDA_VISIBLE_DEVICES=1,0``; it failed
when its output says fail/error, passed when its output says neither.
"""

from __future__ import annotations

import re

from gpulib.parsers.line_identity import PROMPT

_LIST = r"\d{1,2}(?:,\d{1,2})*"
_SELECTION = re.compile(rf"(?:^|\s)(?:(?:-g|--gpus?|--devices?)[ =](?P<a>\d{{1,2}}(?:,\d{{1,2}})+)"
                        rf"|CUDA_VISIBLE_DEVICES=(?P<b>{_LIST}))(?=\s|$)")
_FAILED = re.compile(r"\b(?:fail(?:ed|ure|s)?|error|errors)\b", re.I)
#: A count of none is a pass: "0 errors", "no failures", "errors: 0", "Out of bounds values : 0 OK".
_NONE_FOUND = re.compile(r"\b(?:0|no|zero)\s+(?:fail(?:ed|ures?|s)?|errors?)\b|\b(?:fail(?:ed|ures?|s)?|errors?)\s*[:=]\s*0\b",
                         re.I)


def _failed(line: str) -> bool:
    return bool(_FAILED.search(_NONE_FOUND.sub("", line)))


def bisected_gpu(text: str) -> int | None:
    """The one GPU that the session's failing test runs selected and its passing runs did not, on one
    host; None without both a passing and a failing run, or when that leaves not exactly one GPU."""
    runs: list[tuple[str, set[int], list[str]]] = []  # (host, GPUs, output lines)
    for line in text.splitlines():
        m = PROMPT.match(line) if "@" in line else None
        if m:
            sel = _SELECTION.search(line[m.end():])
            runs.append((m["h1"] or m["h2"] or m["h3"], {int(i) for i in (sel["a"] or sel["b"]).split(",")}
                         if sel else set(), []))
        elif runs:
            runs[-1][2].append(line)
    tested = [(host, gpus, any(_failed(out) for out in output)) for host, gpus, output in runs
              if gpus and output]
    if len({host for host, _, _ in tested}) != 1:
        return None
    failed = set().union(*(gpus for _, gpus, bad in tested if bad))
    passed = set().union(*(gpus for _, gpus, bad in tested if not bad))
    added = failed - passed
    return added.pop() if passed and len(added) == 1 else None
