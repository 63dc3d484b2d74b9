"""Which collective a pasted nccl-tests table measured, and on how many ranks, from every clue it holds.

Why: people paste the table, not the ``# Collective test starting`` banner; older builds print no
banner at all, and a paste that starts below ``# Using devices`` has no rank lines. A verdict needs
both: busbw means a different thing per collective (all_reduce with NVLS reaches ~480 GB/s on 8 x
H100 where all_gather reaches ~370), and the model's bounds depend on the rank count.

The clues, most certain first (the first that leaves one collective decides, and the verdict says which):

1. the text (read by the parser): the banner; one program named anywhere (``all_reduce_perf``,
   ``all_reduce_perf_mpi``, a path); the command line that started the run; the file name;
2. the table's columns, as every build printed them: a reduction in ``redop`` -> all_reduce,
   reduce_scatter or reduce; a ``root`` >= 0 -> broadcast or reduce; neither -> all_gather, alltoall or
   sendrecv (2017-2022 builds printed the ``redop``/``root`` columns only for the collectives that have them);
3. the table's arithmetic: ``count`` x the type's size = ``size`` for all_reduce/broadcast/reduce/sendrecv,
   but nranks x that for all_gather/reduce_scatter/alltoall (``size`` is the whole buffer, ``count`` one
   rank's share); and busbw / algbw = 2(n-1)/n for all_reduce, (n-1)/n for those three, 1 for the rest.

When nothing decides, the run is judged with the all_reduce curve and the verdict says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulib.errors import InputError
from gpulib.nccl.bandwidth import bus_factor, infer_nranks
from gpulib.nccl.sizes import dtype
from gpulib.parsers.nccl_tests import NcclTestsRow, NcclTestsRun

SPLIT = ("all_gather", "reduce_scatter", "alltoall")
CANDIDATES = ("all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce", "sendrecv")
_REDUCING = {"all_reduce", "reduce_scatter", "reduce"}
_ROOTED = {"broadcast", "reduce"}
_TOLERANCE = 0.03  # busbw and algbw are printed with two decimals


@dataclass(frozen=True)
class RunIdentity:
    """``collective`` is what the verdict judges with; ``clue`` says what decided it (or that nothing did)."""

    collective: str
    clue: str
    ambiguous: bool
    nranks: int | None
    nranks_clue: str | None


def identify(run: NcclTestsRun, collective: str | None = None) -> RunIdentity:
    """The collective and rank count of ``run``; ``collective`` (``--collective``) overrides every clue."""
    ranks = run.nranks
    if collective:
        return _with_ranks(run, collective, "--collective", False, ranks)
    if run.collective:
        return _with_ranks(run, run.collective, run.collective_clue or "the file", False, ranks)
    by_columns, column_clue = _from_columns(run)
    if len(by_columns) == 1:
        return _with_ranks(run, by_columns[0], column_clue, False, ranks)
    fitting, arithmetic = _from_arithmetic(run.rows, by_columns, ranks)
    if len(fitting) == 1:
        return _with_ranks(run, fitting[0], f"{column_clue} and {arithmetic}" if column_clue else arithmetic,
                           False, ranks)
    left = fitting or by_columns
    said = f"{column_clue}; " if column_clue else ""
    clue = (f"{said}nothing tells {', '.join(left)} apart: judged with the all_reduce curve" if len(left) < len(CANDIDATES)
            else "no banner, program name, command line or telling column: judged with the all_reduce curve")
    identity = _with_ranks(run, "all_reduce", clue, True, ranks)
    if identity.nranks is None or set(left) <= set(SPLIT):
        split = _split_ranks(run.rows)
        if split:
            return RunIdentity("all_reduce", clue, True, split, "count-to-size ratio")
    return identity


def _with_ranks(run: NcclTestsRun, collective: str, clue: str, ambiguous: bool, ranks: int | None) -> RunIdentity:
    """Ranks from the rank lines, unless the table's arithmetic shows more (a paste whose rank lines were cut)."""
    shown, how = _table_ranks(run.rows, collective)
    clearly_more = bool(shown and ranks and shown > ranks and
                        bus_factor(collective, shown) - bus_factor(collective, ranks) > _TOLERANCE / 3)
    if ranks and not clearly_more:
        return RunIdentity(collective, clue, ambiguous, ranks, "rank lines")
    if ranks:
        how += f" (the {ranks} rank lines are cut)"
    return RunIdentity(collective, clue, ambiguous, shown, how if shown else None)


def _table_ranks(rows: list[NcclTestsRow], collective: str) -> tuple[int | None, str]:
    """The rank count the table's numbers imply for ``collective`` (None when they cannot tell)."""
    if collective in SPLIT and (n := _split_ranks(rows)):
        return n, "count-to-size ratio"
    ratio = _bus_ratio(rows)
    telling = (collective == "all_reduce" and 1 < (ratio or 0) < 2) or (collective in SPLIT and 0.5 <= (ratio or 0) < 1)
    n = infer_nranks(collective, ratio) if telling else None
    return (max(2, n), "busbw/algbw ratio") if n else (None, "")


def _from_columns(run: NcclTestsRun) -> tuple[list[str], str]:
    """The collectives the ``redop``/``root`` columns allow, and how they were read."""
    rows = run.rows
    if not rows:
        return list(CANDIDATES), ""
    has_redop = any(r.redop is not None for r in rows)
    has_root = any(r.root is not None for r in rows)
    reducing = has_redop and any(r.redop.lower() != "none" for r in rows if r.redop)
    rooted = has_root and any(r.root >= 0 for r in rows if r.root is not None)
    if has_redop and has_root:
        said = f"columns redop {rows[-1].redop}, root {rows[-1].root}"
    elif has_redop or has_root:
        only = f"redop {rows[-1].redop}" if has_redop else f"root {rows[-1].root}"
        said = f"a {only} column alone (2017-2022 layout)"
    else:
        said = "neither a redop nor a root column"
    if reducing and rooted:
        return ["reduce"], said
    if reducing:
        return ["all_reduce", "reduce_scatter"], said
    if rooted:
        return ["broadcast"], said
    return ["all_gather", "alltoall", "sendrecv"], said  # redop none (or no column), no root


def _bus_ratio(rows: list[NcclTestsRow]) -> float | None:
    """busbw / algbw at the row whose busbw carries the most digits (two decimals are printed). algbw is
    recomputed from size / time, which is printed with more digits: 16 ranks (1.875) and 15 (1.867) differ
    by 0.4 %, more than a 2.40 GB/s busbw's rounding but less than a 1.28 GB/s algbw's."""
    usable = [r for r in rows if r.oop_busbw_gbps and r.oop_algbw_gbps]
    if not usable:
        return None
    row = max(usable, key=lambda r: (r.oop_busbw_gbps, r.size_bytes))
    algbw = row.size_bytes / (row.oop_time_us * 1e3) if row.oop_time_us else row.oop_algbw_gbps
    if row.oop_busbw_gbps < 1.0 or algbw <= 0:
        return None
    return row.oop_busbw_gbps / algbw


def _elements_per_count(rows: list[NcclTestsRow]) -> float | None:
    """size / (count x type size) of the largest row: 1, or nranks for the split collectives."""
    for r in sorted(rows, key=lambda r: r.size_bytes, reverse=True):
        if r.count <= 0 or not r.type:
            continue
        try:
            return r.size_bytes / (r.count * dtype(r.type).nbytes)
        except InputError:
            return None
    return None


def _split_ranks(rows: list[NcclTestsRow]) -> int | None:
    k = _elements_per_count(rows)
    return round(k) if k is not None and k >= 1.5 and abs(k - round(k)) < 0.01 else None


def _from_arithmetic(rows: list[NcclTestsRow], candidates: list[str], ranks: int | None) -> tuple[list[str], str]:
    """Keep the candidates whose count-to-size ratio and busbw/algbw ratio fit the printed numbers."""
    k = _elements_per_count(rows)
    ratio = _bus_ratio(rows)
    fitting = []
    for c in candidates:
        if k is not None:
            split = k >= 1.5
            if (c in SPLIT) != split:
                continue
            n = round(k) if split else ranks
        else:
            n = ranks
        if ratio is not None and ratio > 0:
            if n is not None and n >= 1:
                if abs(bus_factor(c, n) - ratio) > _TOLERANCE * max(ratio, 1.0):
                    continue
            elif c not in ("all_reduce", *SPLIT) and abs(ratio - 1.0) > _TOLERANCE:
                continue  # factor 1 for broadcast/reduce/sendrecv whatever the rank count
        fitting.append(c)
    parts = []
    if k is not None:
        parts.append(f"size = {f'{round(k)} x ' if k >= 1.5 else ''}count x type size")
    if ratio is not None:
        parts.append(f"busbw/algbw = {ratio:.3g}")
    return fitting, " and ".join(parts) if parts else "no arithmetic to go on"
