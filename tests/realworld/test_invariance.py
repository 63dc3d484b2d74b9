"""Property tests: how evidence is wrapped or named never changes the answer.

Engineers paste the same lines into an issue as a markdown quote, inside a shell session, behind a
pdsh prefix, under any file name. For every real-world case that is answered right, each such
rewrapping must keep the verdict, the category and every culprit field the original answer had.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulib.diagnose import diagnose
from tests.conftest import SHARED
from tests.realworld.scoring import BATCHES, CULPRIT_FIELDS, OWN_CASES, SHARED_THREAD_SETS, cases, judge

ALL = ([c for s in SHARED_THREAD_SETS for c in cases(SHARED.joinpath(*s))] + cases(OWN_CASES)
       + [c for path in BATCHES.values() for c in cases(path)])
#: File names without the letters of words that carry identity on purpose (rank, nccl.<host>, attempt_).
NAME = st.text(alphabet="abcdefghijklmopqsuvwxyz_-", min_size=3, max_size=12)
SUFFIX = st.sampled_from(["", ".txt", ".log", ".out", ".md"])


def _answer(doc: dict) -> dict:
    root = doc.get("root_cause") or {}
    return {"interruption": doc["verdict"]["interruption"], "category": root.get("category") or doc["verdict"][
        "category"], **{k: root.get(k) for k in CULPRIT_FIELDS}}


@pytest.fixture(scope="module")
def right_cases():
    if not ALL:
        pytest.skip("no real-world cases (../shared absent and tests/realworld/cases empty)")
    out = {}
    for case in ALL:
        v = judge(case)
        if v.right and v.must_be_right:
            out[case] = _answer(v.got)
    return out


def _rewrite(src, dst, line_fn, name_fn=None) -> None:
    dst.mkdir(parents=True)
    for i, f in enumerate(sorted(p for p in (src / "input").rglob("*") if p.is_file())):
        text = f.read_bytes().decode("utf-8", "replace")
        lines = text.splitlines()
        name = name_fn(i, f) if name_fn else f.relative_to(src / "input")
        target = dst / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(line_fn(lines, i)) + "\n")


def _same(before: dict, after: dict, *, ignore: tuple = ()) -> None:
    for key, value in before.items():
        if key in ignore or value is None and key in CULPRIT_FIELDS:
            continue
        assert after[key] == value, f"{key}: {value!r} became {after[key]!r}"


def _case(right_cases, data):
    return data.draw(st.sampled_from(sorted(right_cases)))


SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=st.data())
def test_renaming_every_file(right_cases, tmp_path_factory, data):
    case = _case(right_cases, data)
    names = data.draw(st.lists(NAME, min_size=20, max_size=20, unique=True))
    suffix = data.draw(SUFFIX)
    dst = tmp_path_factory.mktemp("renamed") / "in"
    # the file is renamed where it lies: a node's folder (``gb-n04/task.log``) names its host (DESIGN.md)
    _rewrite(case, dst, lambda lines, i: lines, lambda i, f: f.relative_to(case / "input").parent / (names[i] + suffix))
    _same(right_cases[case], _answer(diagnose([dst]).to_dict()))


@pytest.mark.parametrize("suffix", [".md", ".log"])
def test_renaming_every_file_of_every_case(right_cases, tmp_path, suffix):
    """Every right case with every file renamed where it lies (no name left that says a rank, a
    kind or a document): the sampled test above draws 40 of them; a name must decide nothing, so
    none may change - a log saved as ``.md`` is still the log, ``train_rank0.log`` named nothing."""
    changed = []
    for n, (case, before) in enumerate(sorted(right_cases.items())):
        dst = tmp_path / f"{n}"
        _rewrite(case, dst, lambda lines, i: lines,
                 lambda i, f, src=case / "input": f.relative_to(src).parent / f"evidence-{i}{suffix}")
        after = _answer(diagnose([dst]).to_dict())
        diff = {k: (v, after[k]) for k, v in before.items()
                if after[k] != v and not (v is None and k in CULPRIT_FIELDS)}  # as _same judges
        if diff:
            changed.append(f"{case.name}: {diff}")
    assert not changed, "\n".join(changed)


@SETTINGS
@given(data=st.data())
def test_pasted_wrapping(right_cases, tmp_path_factory, data):
    """Quote, fence, shell session or pdsh prefix around every file (a prompt or prefix may name
    the host when the original did not, so only those two may change it)."""
    case = _case(right_cases, data)
    before = right_cases[case]
    host = before["host"] or "ws-paste-01"
    style = data.draw(st.sampled_from(["quote", "shell", "fenced", "pdsh"]))
    wrap = {"quote": lambda lines, i: ["> " + x for x in lines],
            "shell": lambda lines, i: [f"root@{host}:~# cat evidence-{i}.txt", *lines, f"root@{host}:~# "],
            "fenced": lambda lines, i: ["```", *lines, "```"],
            "pdsh": lambda lines, i: [f"{host}: {x}" for x in lines]}[style]
    dst = tmp_path_factory.mktemp(style) / "in"
    _rewrite(case, dst, wrap)
    _same(before, _answer(diagnose([dst]).to_dict()), ignore=("host",) if style in ("shell", "pdsh") else ())


#: Cases whose files, pasted into one, lose what decided the answer (strict: fixing one fails the
#: run until it is removed from this list, so the list only shrinks).
CONCATENATION_GAPS = {
    "s07-node-lost-power-slurm-label": "an ipmitool SEL pasted between job-log lines is read as part of the job "
                                       "log, not as a BMC event log: its Power off/down record is lost",
}


def test_concatenating_every_file(right_cases, tmp_path):
    """Many job logs pasted one after the other are the same evidence as the separate files."""
    checked, changed = 0, {}
    for case, before in right_cases.items():
        files = sorted(p for p in (case / "input").rglob("*") if p.is_file())
        if len(files) < 2:
            continue
        dst = tmp_path / case.name
        dst.mkdir()
        (dst / "all.log").write_bytes(b"\n".join(f.read_bytes().rstrip(b"\n") for f in files) + b"\n")
        after = _answer(diagnose([dst]).to_dict())
        if after["category"] != before["category"]:
            changed[case.name] = f"{before} -> {after}"
        checked += 1
    if not checked:
        pytest.skip("no multi-file case")
    unexpected = {name: why for name, why in changed.items() if name not in CONCATENATION_GAPS}
    assert not unexpected, unexpected
    fixed = [name for name in CONCATENATION_GAPS if name in {c.name for c in right_cases} and name not in changed]
    assert not fixed, f"now right when concatenated: remove {fixed} from CONCATENATION_GAPS"


_RANK_PREFIX = re.compile(r"^\[(?:rank|default)(\d+)\]:")


def test_splitting_a_log_into_per_rank_files(right_cases, tmp_path):
    """A torchrun log with ``[rankN]:`` prefixes split into ``rank-N.log`` files (``--redirects``,
    ``--tee``, one file per rank as job schedulers keep them) is the same evidence: lines without a
    prefix (the launcher's) stay in a file of their own, every other file is kept as it was."""
    checked = 0
    for case, before in right_cases.items():
        files = sorted(p for p in (case / "input").rglob("*") if p.is_file())
        split = {}
        for f in files:
            lines = f.read_bytes().decode("utf-8", "replace").splitlines()
            ranks = {m.group(1) for line in lines if (m := _RANK_PREFIX.match(line))}
            if len(ranks) >= 2:
                split[f] = lines
        if not split:
            continue
        dst = tmp_path / case.name
        dst.mkdir()
        for n, f in enumerate(files):
            # every file stays in its folder: a node's folder names its host (DESIGN.md)
            folder = dst / f.relative_to(case / "input").parent
            folder.mkdir(parents=True, exist_ok=True)
            if f not in split:
                (folder / f.name).write_bytes(f.read_bytes())
                continue
            per_rank: dict[str, list[str]] = {}
            for line in split[f]:
                m = _RANK_PREFIX.match(line)
                per_rank.setdefault(m.group(1) if m else "launcher", []).append(line)
            for rank, lines in per_rank.items():
                name = f"launcher-{n}.log" if rank == "launcher" else f"job{n}-rank-{rank}.log"
                (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        _same(before, _answer(diagnose([dst]).to_dict()), ignore=("host",))
        checked += 1
    if not checked:
        pytest.skip("no case with a torchrun log of several ranks")
