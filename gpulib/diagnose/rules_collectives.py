"""Ranks that timed out in different *kinds* of collective, where the job rules could not compare them.

The watchdog reports the *oldest* collective a rank is waiting in, and a collective cannot finish on
one rank and hang on the others for half an hour. So when ranks of one process group time out in
different kinds of collective (rank 0 in a REDUCE, ranks 1-3 in an ALLGATHER) they are not waiting
for each other in the same call: their code paths diverged. A collective under a rank- or
value-dependent condition is the classic cause (``dist.reduce`` hands the result to one rank only,
which alone then decides to save a checkpoint and gather an FSDP state dict; an ``if rank == 0``
around a collective). Nobody is slow and nothing is broken: the job's own code.

The job rules compare calls at one sequence number, but they skip every call whose name holds
GATHER or SCATTER - which also drops the all-gathers and reduce-scatters that FSDP and ZeRO are made
of - and they need a sequence number, which torch before ~1.12 does not print
(``WorkNCCL(OpType=ALLGATHER, Timeout(ms)=1800000)``). This module reads those two cases, lined up
by (process group, sequence number), the unnumbered calls only when one process group is in the log.

Not read this way: point-to-point, all-to-all and rooted gather/scatter calls (ranks legitimately
wait in different ones), and unnumbered calls of several process groups (a tensor-parallel
all-gather and a data-parallel all-reduce may both be waiting for one dead rank).
"""

from __future__ import annotations

from collections import defaultdict

from gpulib.diagnose.context import Context, evidence
from gpulib.parsers.training_log import ranks_of

#: Calls whose ranks may wait in different operations for good reasons (pipeline send/recv, MoE all-to-all,
#: a rooted gather/scatter).
_P2P_OR_UNEVEN = ("SEND", "RECV", "ALLTOALL")
_ROOTED = ("GATHER", "SCATTER")


def run(ctx: Context) -> None:
    timeouts = [(f, e) for f, e in ctx.records("training_log", "torchrun_error_file") if e.kind == "watchdog_timeout"]
    if not timeouts or any(f.id.startswith("collective-desync") for f in ctx.findings):
        return  # nothing to compare, or the job rules already compared the calls
    several_groups = any(e.details.get("pg") not in (None, 0) for _, e in timeouts)
    for (_pg, seq), calls in _calls(timeouts).items():
        if seq is None and several_groups:
            continue  # unnumbered calls of several process groups cannot be lined up
        ops = {op for op, _fl, _e in calls.values()}
        if len(calls) >= 2 and len(ops) >= 2 and not any(_uneven(op) for op in ops):
            _report(ctx, calls, seq)
            return


def _uneven(op: str) -> bool:
    """All-to-all, send/recv and a *rooted* gather/scatter: ranks may wait in different ones for good
    reasons. (An ALLGATHER or a REDUCE_SCATTER is not rooted: every rank makes the same call.)"""
    return any(k in op for k in _P2P_OR_UNEVEN) or op.strip("_").removesuffix("_BASE") in _ROOTED


def _calls(timeouts) -> dict[tuple, dict[int, tuple]]:
    """(process group, sequence number or None) -> rank -> (op, file, event) of the first timeout
    that rank printed there (a rank repeats its timeout in ``what():``)."""
    out: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for fl, e in sorted(timeouts, key=lambda fe: (fe[1].time_utc or "~", fe[1].line)):
        op = e.details.get("op")
        if not op:
            continue
        for r in ranks_of(e):
            out[(e.details.get("pg") or 0, e.details.get("seq"))].setdefault(r, (op, fl, e))
    return out


def _report(ctx: Context, calls: dict[int, tuple], seq: int | None) -> None:
    groups: dict[str, list[int]] = defaultdict(list)
    for r, (op, _fl, _e) in sorted(calls.items()):
        groups[op].append(r)
    odd = min(groups.values(), key=lambda rs: (len(rs), rs))
    parts = "; ".join(f"{op} on rank(s) {', '.join(map(str, rs))}" for op, rs in sorted(groups.items(), key=lambda kv: kv[1]))
    _correct_the_cascade(ctx)
    first = calls[odd[0]]
    other = next(calls[r] for r in sorted(calls) if r not in odd)
    ctx.add("collective-desync", severity="critical", category="application_error", interruption="soft",
            role="cause", title=f"The ranks timed out in different collectives{f' at SeqNum {seq}' if seq is not None else ''} "
                                f"({parts}): their code paths "
                                "diverged, so each waited for a call the others never made",
            rank=odd[0] if len(odd) == 1 and len(calls) > 2 else None, time=first[2].time_utc,
            evidence=[evidence(first[1], first[2].line, first[2].text),
                      evidence(other[1], other[2].line, other[2].text)],
            actions=["Look for a collective under a rank- or value-dependent condition: a checkpoint save or "
                     "state-dict gather only on some ranks, a decision taken on a value only one rank has "
                     "(dist.reduce instead of dist.all_reduce), an early exit on one rank",
                     "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: it reports mismatched collectives by name"])


def _correct_the_cascade(ctx: Context) -> None:
    """The timeout finding, written before the calls were compared, says every rank waited on the
    same collective: that is what this rule just found untrue."""
    for f in ctx.findings:
        if f.id.startswith("nccl-timeout") and f.title.endswith(SAME_CALL):
            f.title = f.title[:-len(SAME_CALL)] + "; the ranks waited in different collectives"


#: How the job rules' timeout title ends when no rank stands out.
SAME_CALL = "; every rank waited on the same collective"

__all__ = ["run"]
