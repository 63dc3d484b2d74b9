"""Folding the lines every rank prints once (gpulib.parsers.fold): nothing a rule reads is lost.

The console lines are written here in NCCL's and torch's layouts with invented hosts, pids,
PCI ids and times; the many-node incidents come from the simulator (SYNTHETIC).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from gpulib.diagnose import diagnose
from gpulib.fleet.simulate import simulate_incident
from gpulib.parsers import fold, signatures
from gpulib.parsers import training_log as tl

RANKS = 200
LATE = 150  # this rank's timeout is printed late in the file but stamped earliest
MISSING = 137  # this rank never timed out: the one the others waited for


def _console() -> str:
    inits, timeouts = [], []
    for r in range(RANKS):
        host, dev = f"tn-{r // 8:03d}", r % 8
        inits.append(f"{host}:{4000 + r}:{4100 + r} [{dev}] NCCL INFO comm 0x7f00{r:05x} rank {r} nranks {RANKS} "
                     f"cudaDev {dev} nvmlDev {dev} busId {0x18 + dev * 0x10:x}000 commId 0x5eed - Init COMPLETE")
        second = "01" if r == LATE else f"{10 + r % 40:02d}"
        timeouts.append(
            f"[rank{r}]:[E0607 11:42:{second}.000000431 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum=9021, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, "
            f"Timeout(ms)=600000) ran for {600000 + r} milliseconds before timing out.")
    order = [r for r in range(RANKS) if r not in (MISSING, LATE)] + [LATE]
    return "\n".join(["Job 4242 started 2026-06-07T11:30:00Z"] + inits + [timeouts[r] for r in order]) + "\n"


def test_a_large_console_folds_its_per_rank_lines_and_keeps_every_rank():
    records = tl.parse(_console(), "console.log", year=2026).records
    inits = [e for e in records if e.kind == "nccl_init"]
    timeouts = [e for e in records if e.kind == "watchdog_timeout"]
    assert len(inits) == len(timeouts) == fold.FOLD_AFTER + 1  # 64 whole, one carrying the rest
    members = [m for e in inits for m in tl.members_of(e)]
    assert sorted(m["rank"] for m in members) == list(range(RANKS))
    by_rank = {m["rank"]: m for m in members}
    assert (by_rank[199]["host"], by_rank[199]["pid"], by_rank[199]["cuda_dev"], by_rank[199]["pci_bus_id"]) == (
        "tn-024", 4199, 7, "0000:88:00.0")
    timed_out = {r for e in timeouts for r in tl.ranks_of(e)}
    assert timed_out == set(range(RANKS)) - {MISSING}
    # the earliest line of the shape is the one shown, even when it was printed last
    first = min(timeouts, key=lambda e: e.time_utc)
    assert (first.rank, first.time_utc, first.text.count("Rank 150")) == (LATE, "2026-06-07T11:42:01Z", 1)
    assert max(e.time_last or e.time_utc for e in timeouts) == "2026-06-07T11:42:49Z"


def test_a_small_console_folds_nothing():
    text = "".join(_console().splitlines(keepends=True)[i] for i in range(1, 9))
    records = tl.parse(text, "console.log", year=2026).records
    assert len(records) == 8 and all(e.folded is None for e in records)


def test_signature_matches_fold_too_and_keep_who_printed_them(tmp_path):
    path = tmp_path / "console.log"
    path.write_text(_console())
    found = [s for s in signatures.scan_file(path, year=2026).records if s.signature == "watchdog-timeout"]
    assert len(found) == fold.FOLD_AFTER + 1
    assert {r for s in found for r, _pid, _host in signatures.printers_of(s)} == set(range(RANKS)) - {MISSING}


@pytest.mark.parametrize("kind", ["xid79", "host_oom", "ib_down"])
def test_folding_changes_no_answer(tmp_path, monkeypatch, kind):
    """The same SYNTHETIC incident (48 nodes, 384 ranks) diagnosed with and without folding."""
    incident = simulate_incident(tmp_path / "incident", 48, kind, seed=7)
    (console,) = (tmp_path / "incident").glob("slurm-*.out")
    assert any(e.folded for e in tl.parse_file(console).records)
    folded = diagnose([tmp_path / "incident"]).to_dict()
    monkeypatch.setattr(fold, "FOLD_AFTER", 10**9)
    whole = diagnose([tmp_path / "incident"]).to_dict()
    assert json.dumps(folded, sort_keys=True) == json.dumps(whole, sort_keys=True)
    assert folded["root_cause"]["host"] == incident.host


def test_the_notebook_rank_table_gives_each_folded_rank_its_own_problem(tmp_path):
    """The rank table and the rank plot read the folded timeouts rank by rank, at their own times."""
    from gpulib.notebook import tables

    (tmp_path / "console.log").write_text(_console())
    evidence = tables.open_evidence(tmp_path)
    ranks = evidence.ranks().set_index("rank")
    assert len(ranks) == RANKS and pd.isna(ranks.loc[MISSING, "first_problem"])
    assert ranks["first_problem"].drop(MISSING).str.startswith("watchdog_timeout").all()
    assert str(ranks.loc[LATE, "first_problem_time"]) == "2026-06-07 11:42:01+00:00"
    assert str(ranks.loc[199, "first_problem_time"]) == "2026-06-07 11:42:49+00:00"
    plotted = evidence.rank_events()
    assert sorted(plotted["rank"]) == sorted(set(range(RANKS)) - {MISSING})


def test_members_give_back_the_tuples_they_were_given():
    """Folded lines are kept column by column; they read back as the tuples, in order: integers
    (with None) in an array until a column meets a string, then every value as a code."""
    given = [(3, 4101, "tn-000"), (None, None, None), (5, 4105, "tn-000"), (7, 4107, "tn-001"),
             (2**40, -1, None)]
    members = fold.Members()
    assert not members and list(members) == []
    for m in given:
        members.append(m)
    assert len(members) == 5 and list(members) == given and members == given
    mixed = fold.Members()
    for m in [(1, 10), (2, "late"), (None, 12)]:  # the second column switches to codes mid-way
        mixed.append(m)
    assert list(mixed) == [(1, 10), (2, "late"), (None, 12)]
    assert mixed != [(1, 10)]
    with pytest.raises(ValueError):
        mixed.append((1, 2, 3))  # every member of one record has the same fields
