"""Job-side rules: what the ranks, NCCL and the launchers printed.

Most of it is cascade. A watchdog timeout means "I waited for a collective that someone else
never joined", so a timeout finding is a *symptom* whose pointers name the ranks that did not
time out (or completed less work, or whose watchdog got stuck): those are where the cause is.
``ncclRemoteError`` / IB completion errors point at the peer's address; torchrun's "Root Cause
(first observed failure)" is only the first exit *that agent* saw, so it is a weak pointer.

Causes on the job side: CUDA OOM (with the numbers and a fragmentation hint), CUDA errors
(uncorrectable ECC = hardware; illegal address / device assert = code), a rank's first Python
exception, DataLoader failures, NCCL invalid usage, mixed IB/socket transports across nodes,
ranks that timed out in different collectives at one sequence number, or at different sequence
numbers of one process group (the code paths diverged),
and data-loading stalls seen in per-rank step timings.
"""

from __future__ import annotations

import re
from collections import defaultdict
from math import prod
from statistics import median

from gpulib.catalog.cuda_errors import DRIVER_CLASSES, cuda_error_of
from gpulib.diagnose import ends
from gpulib.diagnose.addresses import blamed_end
from gpulib.diagnose.busy import Activity, last_activity
from gpulib.diagnose.context import Context, place, quote
from gpulib.diagnose.rules.signatures import CASCADE_EXCEPTIONS
from gpulib.evidence import kinds
from gpulib.findings import LAST_RESORT_TIER, Finding, Pointers
from gpulib.parsers.linescan import lines_up_to
from gpulib.parsers.logtime import seconds_between
from gpulib.parsers.training_log import ranks_of

STRAGGLER_RATIO = 1.3
#: An allocation no GPU could ever satisfy (petabytes, exabytes) is a corrupt size, e.g. a tensor
#: shape received from a peer that timed out: a symptom, not an out-of-memory cause.
ABSURD_ALLOCATION = re.compile(r"allocate (?:more than )?[\d.]+ ?[EP]i?B\b")
#: What a CUDA error whose class the table does not know gets: unspecified launch failures are often hardware.
_UNCLASSIFIED_CUDA_ACTION = "Check dmesg for an Xid on this GPU (unspecified launch failures are often hardware)"


def _events(ctx: Context) -> list[tuple]:
    """Every job log record but those on lines a rule judged harmless (exit teardown after the
    run's normal end, :mod:`gpulib.diagnose.ends`)."""
    events = ctx.records(*kinds.JOB_LOGS)
    if not ctx.judged:
        return events
    return [(fl, e) for fl, e in events if (fl.display, e.line) not in ctx.judged]


def _fmt_ranks(ranks) -> str:
    ranks = sorted(ranks)
    if len(ranks) <= 6:
        return ", ".join(map(str, ranks))
    return f"{', '.join(map(str, ranks[:4]))}, ... ({len(ranks)} ranks)"


def run(ctx: Context) -> None:
    ends.forgive_teardown(ctx)
    events = _events(ctx)
    _timeouts(ctx, events)
    _store_barrier(ctx, events)
    _errors(ctx, events)
    _launcher(ctx, events)
    _transport(ctx, events)
    _progress(ctx, events)
    _rank_outside_world(ctx, events)


#: The catalogue row that reads a process's global rank with the world size (``signatures.tsv``).
RANK_IN_WORLD = "rank-in-world"


def _rank_outside_world(ctx: Context, events) -> None:
    """A process that says its global rank is at or above the world size (Lightning's ``GLOBAL_RANK: 2,
    MEMBER: 3/2``, NCCL's ``rank 8 nranks 8``, ``RANK=9 WORLD_SIZE=8``): ranks run 0..world-1, so its
    rank environment is wrong. The usual cause is a variable left from another job (``NODE_RANK``,
    ``RANK``, ``GROUP_RANK``) or a ``--node_rank`` one too high; the ranks that should exist never
    come, and the job hangs at initialisation waiting for them - a launch error, not the network."""
    wrong = []
    for fl, e in events:
        if e.kind == "nccl_init" and e.details.get("nranks"):
            bad = sorted(r for r in ranks_of(e) if r >= e.details["nranks"])
            if bad:
                wrong.append((fl, e.line, e.text, e.time_utc, e.host, bad, e.details["nranks"]))
    for fl in ctx.inputs.files:
        for s in fl.signals:
            if s.signature == RANK_IN_WORLD:
                rank, world = int(s.fields.get("what") or s.fields["what2"]), int(s.fields["num"])
                if rank >= world:
                    wrong.append((fl, s.line, s.text, s.time_utc, s.host, [rank], world))
    if not wrong:
        return
    fl, line, text, when, host, bad, world = min(wrong, key=lambda w: (w[3] or "~", w[0].display, w[1]))
    f = ctx.add("rank-outside-world", severity="error", category="application_error", interruption="soft",
                title=f"Global rank {_fmt_ranks(bad)} in a world of {world} ranks (ranks run 0..{world - 1}): the "
                      "rank environment is wrong, and the job waits for ranks that never come",
                time=when, host=host or fl.host, quotes=[quote(fl, line, text)],
                actions=["Check the rank variables in the launching shell and job script (`env | grep -E "
                         "'RANK|WORLD|MASTER'`): unset a stale NODE_RANK / RANK / GROUP_RANK left from another job, "
                         "and give --node_rank 0..nnodes-1 and --nnodes / WORLD_SIZE = nodes x processes per node"])
    f.hardware = False


# ---------------------------------------------------------------- timeouts: who did not arrive
#: How a collective time-out is named, by the backend that raised it (NCCL's watchdog by default); the
#: finding keeps the name in ``extra["timeout"]`` for a verdict that cannot show its cause.
_TIMEOUT_NAME = {"gloo": "gloo collective timeout"}


def _timeouts(ctx: Context, events) -> None:
    timeouts = [(f, e) for f, e in events if e.kind == "watchdog_timeout"]
    progress = [(f, e) for f, e in events if e.kind == "watchdog_progress"]
    stuck = [(f, e) for f, e in events if e.kind == "watchdog_stuck"]
    if timeouts:
        timed_out = {r for _, e in timeouts for r in ranks_of(e)}
        first_file, first = min(timeouts, key=lambda fe: fe[1].time_utc or "~")
        seqs = {e.details.get("seq") for _, e in timeouts}
        # without NCCL init lines the world is at least as large as the highest rank seen: ranks below it
        # that never reported (rank 0 saving a checkpoint while 1-3 wait) are the ones the others waited for
        seen = set(ctx.ids.ranks) | timed_out | {e.rank for _, e in events if e.rank is not None}
        world = ctx.ids.world_size or (max(seen) + 1 if seen else None)
        pointers = Pointers()
        if world and len(timed_out) < world:
            pointers.ranks |= set(range(world)) - timed_out
        by_pg: dict = defaultdict(dict)  # sequence numbers are per process group: compare within one
        for _, e in progress:
            for r in ranks_of(e):
                by_pg[e.details.get("pg", 0)][r] = e.details["last_completed"]
        for completed in by_pg.values():
            if len(set(completed.values())) > 1:
                low = min(completed.values())
                pointers.ranks |= {r for r, c in completed.items() if c == low}
        pointers.ranks |= {e.rank for _, e in stuck if e.rank is not None}
        op = first.details.get("op")
        seq_text = f" SeqNum {'/'.join(str(s) for s in sorted(x for x in seqs if x is not None))}" if seqs - {None} else ""
        blame = (f"; rank(s) {_fmt_ranks(pointers.ranks)} never arrived" if pointers.ranks
                 else "; every rank waited on the same collective")
        f = ctx.add("nccl-timeout", severity="error", category="application_error", role="symptom",
                    title=f"{_TIMEOUT_NAME.get(first.details.get('backend'), 'NCCL watchdog timeout')} on "
                          f"{len(timed_out)} rank(s) ({op}{seq_text}, "
                          f"timeout {first.details.get('timeout_ms', 0) // 1000} s){blame}",
                    time=first.time_utc, quotes=[quote(first_file, first.line, first.text)], pointers=pointers,
                    actions=["Do not chase the network first: these ranks waited for a peer; fix the peer's cause"])
        f.extra["timeout"] = _TIMEOUT_NAME.get(first.details.get("backend"), "NCCL timeout")
        f.quotes += [quote(fl, e.line, e.text) for fl, e in stuck[:2]]
        desync = _desync(ctx, timeouts, events)
        if desync is not None:  # nobody failed to arrive: the ranks were waiting in different calls
            f.pointers.ranks = {desync.rank} - {None}
            f.title = f.title.split("; ")[0] + "; the ranks were in different collectives (see the cause)"
        elif pointers.ranks == {0} and not any(e.rank == 0 and e.kind in _FATAL_KINDS | {"exception"} for _, e in events):
            _rank0_busy(ctx, first_file, first)
        if f.pointers.ranks:  # in the JSON too: the ranks the others waited for
            f.extra["never_arrived"] = sorted(f.pointers.ranks)
    elif stuck:
        fl, e = stuck[0]
        ctx.add("watchdog-stuck", severity="error", category="application_error", role="symptom",
                    title=f"Rank {e.rank}: NCCL watchdog made no progress for {e.details.get('seconds')} s "
                          "(a CUDA/NCCL call hangs)", rank=e.rank, time=e.time_utc,
                    quotes=[quote(fl, e.line, e.text)], pointers=Pointers(ranks={e.rank} - {None}))


def _store_barrier(ctx: Context, events) -> None:
    """init_process_group's store-based barrier timed out: fewer than world_size ranks arrived. The
    ranks that printed it waited; those that never did were still busy before their init (preparing
    data, loading a model) or died. Like a watchdog timeout, it points at the ranks that did not come."""
    timeouts = [(f, e) for f, e in events if e.kind == "barrier_timeout"]
    if not timeouts:
        return
    fl, first = min(timeouts, key=lambda fe: (fe[1].time_utc or "~", fe[1].line))
    world = first.details["world_size"]
    waited = {e.rank for _, e in events if e.kind in ("barrier_wait", "barrier_timeout") and e.rank is not None}
    missing = set(range(world)) - waited if len(waited) >= first.details["arrived"] else set()
    timeout_s = first.details["timeout_ms"] // 1000
    ctx.add("store-barrier", severity="error", category="application_error", role="symptom",
            title=f"init_process_group's store-based barrier timed out after {timeout_s} s: "
                  f"{first.details['arrived']} of {world} ranks arrived"
                  + (f"; rank(s) {_fmt_ranks(missing)} never did" if missing else ""),
            rank=first.rank, time=first.time_utc, quotes=[quote(fl, first.line, first.text)],
            pointers=Pointers(ranks=missing),
            actions=["Find what the missing ranks were doing before init_process_group (data preparation, a model "
                     "download, a crash): the waiting ranks only timed out"])
    if missing == {0} and not any(e.rank == 0 and e.kind in _FATAL_KINDS | {"exception"} for _, e in events):
        _rank0_busy(ctx, fl, first, timeout_s)


def _rank0_busy(ctx: Context, fl, first, timeout_s: int | None = None) -> None:
    """Every rank but rank 0 timed out, and rank 0 printed no error: rank 0 was still busy with work
    only rank 0 does - writing the checkpoint (or gathering the full state dict to write it),
    evaluating, logging, tokenizing or preparing the dataset before the others start - for longer
    than the collective timeout, while the others waited at the next collective. Frameworks put
    that work on rank 0, so a silent rank 0 is that, unless the evidence shows a fault of its GPU or
    node (any such cause outranks this one, which is a cause of last resort). What rank 0 last
    announced decides the category (:mod:`gpulib.diagnose.busy`): data preparation is a data stall,
    a checkpoint save or an evaluation is the job's own work (a save held up by storage the evidence
    shows stalled is the storage finding's, which outranks this cause of last resort)."""
    timeout_s = first.details.get("timeout_ms", 0) // 1000 if timeout_s is None else timeout_s
    doing = _busy_with(ctx, fl, first.line)
    category = doing.category if doing else "application_error"
    what = f"{_BUSY_WORDS[doing.what]} ('{doing.text.strip()[:100]}')" if doing else \
        "rank-0-only work (checkpoint save, evaluation, data preparation)"
    f = ctx.add("rank0-busy", severity="error", category=category, interruption="soft", role="cause",
                title="Rank 0 never reached the collective the other ranks timed out in, and printed no error: it was "
                      f"busy {what} for longer than the {timeout_s} s collective timeout", rank=0, time=first.time_utc,
                time_approx=True, quotes=[quote(fl, first.line, first.text)]
                + ([quote(fl, doing.line, doing.text.strip())] if doing else []),
                actions=[_BUSY_ACTIONS[doing.what if doing else None],
                         "Give that phase more time (init_process_group(timeout=...), or a barrier with its own "
                         "timeout after it), or make it shorter than the collective timeout",
                         "Rule out rank 0's GPU and node: collect its kernel log and nvidia-smi -q"])
    f.tier = LAST_RESORT_TIER  # any cause the evidence shows (a GPU fault on rank 0's node) comes first
    place(ctx, f, rank=0)


#: How the title says what the busy rank was doing.
_BUSY_WORDS = {"data": "preparing the data", "checkpoint": "saving a checkpoint", "evaluation": "evaluating"}
#: The first action, by what the busy rank was doing.
_BUSY_ACTIONS = {
    "data": "Prepare the dataset once before launch (scan, cache, tokenize, index offline) or on every rank in "
            "parallel, so no rank does it alone while the others wait",
    "checkpoint": "Save with a distributed checkpoint (every rank writes its shard) or asynchronously, and check the "
                  "checkpoint storage's write speed",
    "evaluation": "Run the evaluation on every rank (a distributed sampler), or after a barrier with its own timeout",
    None: "Find what rank 0 was doing at that step (its last log lines, py-spy dump of its process on the next "
          "hang): a checkpoint save, an evaluation or a data-preparation step"}

#: The catalogue's signature of a data-loading/preprocessing progress bar (``signatures.tsv``).
DATA_PROGRESS = "data-progress"
#: How far back before the timeout the announcement is looked for (lines), and the largest line number
#: at which a file is re-read for it (a multi-GB console is not read twice).
ACTIVITY_WINDOW = 40
ACTIVITY_MAX_LINE = 200_000


def _busy_with(ctx: Context, fl, before: int) -> Activity | None:
    """What rank 0 was last doing: the later of a data-preparation progress bar still short of 100 %
    in the same console (the ranks that wait for it print no such bar) and the last activity announced
    in the few lines before ``before`` and after the file's last training step. Only a small pasted or
    early-failing console is re-read."""
    bars = [s for s in fl.signals if s.signature == DATA_PROGRESS and int(s.fields.get("num") or 100) < 100]
    bar = Activity("data", bars[-1].line, bars[-1].text) if bars else None
    said = None
    if before <= ACTIVITY_MAX_LINE:
        events = [e for f, e in ctx.records(kinds.TRAINING_LOG) if f is fl]
        last_step = max((e.line for e in events if e.kind in ("step", "eval_progress") and e.line < before), default=0)
        start, lines = lines_up_to(fl.path, before - 1, ACTIVITY_WINDOW)
        said = last_activity([(start + i, t) for i, t in enumerate(lines) if start + i > last_step])
    return max((a for a in (bar, said) if a), key=lambda a: a.line, default=None)


#: Collectives every rank must call with the same element count: a different NumelIn at one sequence
#: number means the ranks are not in the same call (all-to-all, gather/scatter and send/recv sizes may differ).
SAME_SIZE_OPS = {"ALLREDUCE", "BROADCAST", "REDUCE", "ALLGATHER", "_ALLGATHER_BASE", "REDUCE_SCATTER",
                 "_REDUCE_SCATTER_BASE", "ALLREDUCE_COALESCED", "BARRIER"}
#: Calls whose ranks may wait in different operations for good reasons (pipeline send/recv, MoE
#: all-to-all); and the *rooted* gather/scatter (an ALLGATHER or REDUCE_SCATTER is not rooted: every
#: rank makes the same call, which is what FSDP and ZeRO are made of).
_P2P_OR_UNEVEN = ("SEND", "RECV", "ALLTOALL")
_ROOTED = ("GATHER", "SCATTER")


def _uneven(op: str) -> bool:
    return any(k in op for k in _P2P_OR_UNEVEN) or op.strip("_").removesuffix("_BASE") in _ROOTED


def _desync(ctx: Context, timeouts, events) -> Finding | None:
    """Ranks that timed out at the *same* sequence number of one process group but in *different*
    collectives (another OpType, or another element count of an all-reduce/all-gather/broadcast).

    Sequence numbers count the collectives each rank issued; equal numbers with different calls mean
    the ranks' code paths diverged: one rank still all-reduces gradients while the others already
    all-reduce a one-element validation metric (uneven data per rank: an IterableDataset split
    unevenly, no drop_last), or a collective sits under an ``if rank == 0`` (a checkpoint save or an
    FSDP state-dict gather on the rank that alone decided to save). Nobody is slow and the network
    is fine: the job's own code makes the ranks wait for each other forever. The watchdog reports
    the oldest call a rank waits in, and a collective cannot finish on one rank and hang on the
    others, so torch before ~1.12, which prints no sequence number, is compared too - when the log
    holds one process group only (a tensor-parallel all-gather and a data-parallel all-reduce may
    both be waiting for one dead rank)."""
    several_groups = any(e.details.get("pg") not in (None, 0) for _, e in timeouts)
    calls: dict = defaultdict(dict)
    for fl, e in sorted(timeouts, key=lambda fe: (fe[1].time_utc or "~", fe[1].line)):
        d = e.details
        if not d.get("op") or (d.get("seq") is None and several_groups):
            continue
        for r in ranks_of(e):
            calls[(d.get("pg") or 0, d.get("seq"))].setdefault(r, (d["op"], d.get("numel_in"), fl, e))
    for (_pg, seq), by_rank in sorted(calls.items(), key=lambda kv: str(kv[0])):
        ops = {op for op, *_ in by_rank.values()}
        if len(by_rank) < 2 or any(_uneven(op) for op in ops):
            continue
        groups: dict = defaultdict(list)  # call -> its ranks (element counts compared only where they must agree)
        for r, (op, n, *_rest) in by_rank.items():
            groups[(op, n if op in SAME_SIZE_OPS else None)].append(r)
        if len(groups) < 2:
            continue
        votes = {k: set(rs) for k, rs in groups.items()}
        for r, call in _fingerprints(events, set(groups)).items():
            votes[call].add(r)
        sizes = sorted(len(rs) for rs in votes.values())
        odd = sorted(min(votes.values(), key=lambda rs: (len(rs), sorted(rs)))) if sizes[0] < sizes[1] else []
        parts = "; ".join(f"{op}{f' of {n} elements' if n is not None else ''} on rank(s) {_fmt_ranks(rs)}"
                          for (op, n), rs in sorted(groups.items(), key=lambda kv: kv[1]))
        mine = [r for r in sorted(by_rank) if r in odd] or min(groups.values(), key=lambda rs: (len(rs), rs))
        first = by_rank[mine[0]]
        other = next(by_rank[r] for r in sorted(by_rank) if by_rank[r][:2] != first[:2])
        at = f" at SeqNum {seq}" if seq is not None else ""
        return ctx.add("collective-desync", severity="critical", category="application_error", interruption="soft",
                       role="cause", title=f"The ranks were in different collectives{at} ({parts}): their code "
                                           "paths diverged, so each waited for a call the others never made",
                       rank=odd[0] if len(odd) == 1 else None, time=first[3].time_utc,
                       quotes=[quote(first[2], first[3].line, first[3].text),
                                 quote(other[2], other[3].line, other[3].text)],
                       actions=["Give every rank the same number of batches (equal shards, drop_last=True, or "
                                "torch.distributed.algorithms.Join for uneven inputs)",
                                "Look for a collective under a rank- or value-dependent condition: a checkpoint save "
                                "or state-dict gather only on some ranks, a decision taken on a value only one rank "
                                "has (dist.reduce instead of dist.all_reduce), an early exit on one rank",
                                "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: it reports mismatched collectives by name"])
    return _ahead(ctx, timeouts)


def _ahead(ctx: Context, timeouts) -> Finding | None:
    """Ranks that timed out at *different* sequence numbers of one process group, in collectives
    every rank makes.

    A rank that timed out in its collective N+1 had completed its collective N, and a collective
    completes only once every rank has joined it; so a rank still waiting in its own N (it timed out
    there too) had not joined the call the others completed as N: the ranks enqueued different
    sequences of collectives - a barrier or an all-reduce that only some ranks reach (``if rank ==
    0: log_dir ...; barrier()``), an early ``continue`` on one rank. A straggler is not this: a rank
    that is merely behind (lower SeqNum) never times out itself, it is the one the others wait for;
    a slow or failed GPU is a hardware finding, which outranks this one. Both reports must be of one
    run: times, where both are known, within one timeout of each other (a restarted job counts its
    collectives from 0 again), and no pipeline send/recv or rooted gather, whose counts may differ."""
    seqs: dict = defaultdict(dict)  # (process group) -> rank -> (seq, file, event)
    for fl, e in sorted(timeouts, key=lambda fe: (fe[1].time_utc or "~", fe[1].line)):
        d = e.details
        if d.get("seq") is None or not d.get("op") or _uneven(d["op"]):
            continue
        for r in ranks_of(e):
            seqs[d.get("pg") or 0].setdefault(r, (d["seq"], fl, e))
    for by_rank in seqs.values():
        if len({s for s, *_ in by_rank.values()}) < 2:
            continue
        low = min(s for s, *_ in by_rank.values())
        behind = sorted(r for r, (s, *_r) in by_rank.items() if s == low)
        ahead = sorted(r for r, (s, *_r) in by_rank.items() if s > low)
        first, other = by_rank[behind[0]], by_rank[ahead[0]]
        window_s = (other[2].details.get("timeout_ms") or 0) / 1000
        if first[2].time_utc and other[2].time_utc and \
                abs(seconds_between(first[2].time_utc, other[2].time_utc)) > window_s:
            continue
        return ctx.add("collective-desync", severity="critical", category="application_error", interruption="soft",
                       role="cause", title=f"The ranks had issued different collectives: rank(s) {_fmt_ranks(ahead)} "
                                           f"timed out at SeqNum {other[0]}, so their SeqNum {low} had completed, while "
                                           f"rank(s) {_fmt_ranks(behind)} still waited in a SeqNum {low}: a "
                                           "collective only some ranks reach (a rank-dependent code path)",
                       time=min(filter(None, (first[2].time_utc, other[2].time_utc)), default=None),
                       quotes=[quote(first[1], first[2].line, first[2].text), quote(other[1], other[2].line,
                                                                                  other[2].text)],
                       actions=["Look for a collective (barrier, all_reduce, broadcast) under a rank- or "
                                "value-dependent condition: work done only `if rank == 0` (creating a directory, "
                                "saving, logging) that calls a barrier or a collective the other ranks never make, "
                                "or an early `continue`/`return` on some ranks",
                                "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: it reports mismatched collectives by name",
                                "Relaunch after the fix; the hardware is not at fault"])
    return None


#: TORCH_DISTRIBUTED_DEBUG=DETAIL's report of two ranks in different collectives.
_MISMATCH = re.compile(r"Rank (?P<rank>\d+) is running collective: CollectiveFingerPrint\((?:SequenceNumber=\d+, )?"
                       r"OpType=(?P<op>\w+), TensorShape=\[(?P<shape>[\d, ]*)\]")


def _fingerprints(events, calls: set[tuple]) -> dict[int, tuple]:
    """rank -> (op, element count) from DETAIL mismatch reports whose two calls are exactly two of
    the timed-out ``calls``: the same two calls, told by other ranks, decide which side is the odd
    one when the timeouts alone cannot (one rank on each side)."""
    out = {}
    for _fl, e in events:
        if e.kind != "exception" or "mismatch between collectives" not in e.text:
            continue
        seen = {}
        for m in _MISMATCH.finditer(e.text):
            dims = [int(x) for x in m["shape"].replace(" ", "").split(",") if x]
            seen[int(m["rank"])] = (m["op"], prod(dims) if dims else 0)
        if len(set(seen.values())) == 2 and set(seen.values()) <= calls:
            out.update(seen)
    return out


# ---------------------------------------------------------------- errors
def _first_per_rank(events, kind: str):
    """The earliest event of ``kind`` per (file, rank): a rank repeats its error on many lines."""
    seen, out = set(), []
    items = [(fl, e) for fl, e in events if e.kind == kind]
    for fl, e in sorted(items, key=lambda fe: (fe[1].time_utc or "~", fe[1].line)):
        key = (fl.display, e.rank) if e.rank is not None else (fl.display, e.line)
        if key not in seen:
            seen.add(key)
            out.append((fl, e))
    return out


def _errors(ctx: Context, events) -> None:  # noqa: C901 - one branch per error class
    explained_ranks: set = set()
    for fl, e in _first_per_rank(events, "cuda_oom"):
        if ABSURD_ALLOCATION.search(e.text):
            continue  # "more than 1EB": a size read from a broken collective, not memory pressure
        d = e.details
        numbers = (f"tried {d['req']}, {d.get('free', '?')} free of {d.get('total', '?')}" if "req" in d else "")
        frag = d.get("reserved_unallocated")
        f = ctx.add("cuda-oom", severity="critical", category="cuda_oom", interruption="soft",
                    title=f"CUDA out of memory on rank {e.rank}" + (f" ({numbers})" if numbers else ""), rank=e.rank,
                    time=e.time_utc, time_approx=e.time_approx, quotes=[quote(fl, e.line, e.text)],
                    actions=["Lower the micro-batch / max sequence length (or bucket long sequences), enable "
                             "activation checkpointing, or shard more (FSDP/ZeRO)"]
                    + ([f"{frag} is reserved but unallocated: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                        "to reduce fragmentation"] if frag else []))
        place(ctx, f, rank=e.rank, host=e.host, local_device=d.get("gpu"))
        explained_ranks.add(e.rank)
    for fl, e in _first_per_rank(events, "cuda_error"):
        err = e.details.get("error", "")
        row = cuda_error_of(err)
        klass = row.klass if row else None
        if klass == "out_of_memory":
            continue
        if klass == "fabric_not_ready":  # 802: the fabric's set-up, read by the catalogue (cuda-system-not-ready)
            explained_ranks.add(e.rank)
            continue
        hw = klass == "gpu_memory"
        f = ctx.add("cuda-error", severity="critical", category=row.category if row else "application_error",
                    interruption=row.interruption if row else "soft",
                    # an error text that names an uncorrectable ECC needs service like the Xid it reports:
                    # it outranks a crash whose order against it the logs cannot tell (an OOM of the rerun)
                    tier=1 if hw else None,
                    title=f"Rank {e.rank}: CUDA error: {err}", rank=e.rank, time=e.time_utc, time_approx=e.time_approx,
                    quotes=[quote(fl, e.line, e.text)],
                    actions=[row.action if row else _UNCLASSIFIED_CUDA_ACTION])
        place(ctx, f, rank=e.rank, host=e.host)
        explained_ranks.add(e.rank)
    for fl, e in _first_per_rank(events, "device_assert"):
        if e.rank in explained_ranks:
            continue
        f = ctx.add("device-assert", severity="critical", category="application_error", interruption="soft",
                    title=f"Rank {e.rank}: device-side assertion failed ({e.details.get('cond')})", rank=e.rank,
                    time=e.time_utc, time_approx=e.time_approx, quotes=[quote(fl, e.line, e.text)],
                    actions=["A data/code bug (index out of range, label >= num_classes): fix the input or the code"])
        place(ctx, f, rank=e.rank, host=e.host)
        explained_ranks.add(e.rank)
    for fl, e in _first_per_rank(events, "driver_too_old"):
        row = cuda_error_of(e.text, DRIVER_CLASSES)  # the parser read the line by these rows' wordings
        mismatch = row is not None and row.klass == "driver_mismatch"
        what = ("the CUDA driver's user-space library and kernel module do not fit together" if mismatch
                else "the NVIDIA driver is too old for this CUDA runtime")
        f = ctx.add("driver-old", severity="critical", category="driver_mismatch", interruption="soft",
                    title=f"Rank {e.rank}: {what}" + (f" ({row.name})" if row else ""), rank=e.rank,
                    host=e.host or fl.host, time=e.time_utc, quotes=[quote(fl, e.line, e.text)],
                    actions=[*([row.action] if row else []),
                             "Check `nvidia-smi` Driver/CUDA Version on every node of the job"])
        f.extra["cuda_error"], f.extra["cuda_class"] = (row.name, row.klass) if row else (None, None)
        place(ctx, f, rank=e.rank, host=e.host)
        explained_ranks.add(e.rank)
    for fl, e in _first_per_rank(events, "dataloader_error"):
        killed = "Killed" in e.details.get("what", "") or "signal: 9" in e.details.get("what", "")
        f = ctx.add("dataloader", severity="error", category="host_oom" if killed else "data_pipeline_stall",
                    interruption="soft",
                    title=f"Rank {e.rank}: DataLoader {e.details.get('what')}", rank=e.rank, time=e.time_utc,
                    time_approx=e.time_approx, quotes=[quote(fl, e.line, e.text)],
                    actions=["A worker killed by signal 9 is usually the host OOM killer: check dmesg; a timeout "
                             "means slow storage or a stuck worker - check the file system and num_workers"])
        place(ctx, f, rank=e.rank, host=e.host)
    for fl, e in _first_per_rank(events, "exception"):
        cls = e.details.get("class") or ""
        if cls in CASCADE_EXCEPTIONS or e.rank in explained_ranks or "OutOfMemory" in cls \
                or e.details.get("message", "").strip() in _PEER_GONE:
            continue
        f = ctx.add("exception", severity="error", category="application_error", interruption="soft",
                    title=f"Rank {e.rank}: {cls}: {e.details.get('message', '')[:120]}", rank=e.rank,
                    time=e.time_utc, time_approx=e.time_approx, quotes=[quote(fl, e.line, e.text)],
                    actions=["Read this rank's traceback above the line; fix the code or input that raised it"])
        place(ctx, f, rank=e.rank, host=e.host)
        explained_ranks.add(e.rank)
    _nccl_errors(ctx, events)
    _store_errors(ctx, events)


#: An exception whose whole message is a socket's (the inner exception of a c10d store or gloo error):
#: the peer went away, which says nothing about this rank's code.
_PEER_GONE = frozenset({"Broken pipe", "Connection reset by peer", "Connection refused", "failed to recv, got 0 bytes"})
#: Addresses that name no other host: an endpoint on them is this node's own.
_LOCAL = frozenset({"localhost", "127.0.0.1", "0.0.0.0", "::", "::1"})
#: Store errors only a node that had joined the rendezvous can print: the job was running.
_JOINED = ("keep-alive heartbeat", "failed to shutdown the rendezvous")
_SIGNALS = {"2": "SIGINT", "15": "SIGTERM", "1": "SIGHUP", "9": "SIGKILL"}


def _store_errors(ctx: Context, events) -> None:
    """TCPStore / rendezvous failures: the cause when the job never got going (nothing to connect
    to, wrong address or port), a symptom when it ran before (the store's host had died). Mid-run
    they point at the store's host (the ``--rdzv_endpoint`` node, or the agent that says it hosts
    the store) when that node is not itself among those reporting them: whatever stopped it first
    is the cause, the other nodes only lost their connection to it."""
    errors = [(fl, e) for fl, e in events if e.kind == "store_error"]
    if not errors:
        return
    fl, e = min(errors, key=lambda fe: fe[1].time_utc or "~")
    if _after_completion(events, errors):
        f = ctx.add("store-teardown", severity="info", category="none", role="context",
                    title=f"c10d store errors on {len(errors)} line(s) after the job reported completion: teardown "
                          "noise (the store's process exited before its clients), not a failure",
                    rank=e.rank, time=e.time_utc, quotes=[quote(fl, e.line, e.text)])
        f.benign = True
        ctx.judged |= {(xf.display, x.line) for xf, x in errors}  # their "Connection reset by peer" is this
        return
    started = any(x.kind == "step" and x.time_utc and e.time_utc and x.time_utc < e.time_utc for _, x in events) \
        or any(k in x.text for _, x in errors for k in _JOINED)
    # the store's port was already taken (catalogue row port-in-use): the rendezvous joined another job's
    # store or none, and its later errors are that collision's consequence
    collided = any(sig.signature == "port-in-use" for f in ctx.inputs.files for sig in f.signals)
    store_host = _store_host(ctx, events) if started else None
    if store_host in {x.host or xf.host for xf, x in errors} and not _signalled(events, store_host):
        store_host = None  # the store's host lost the store too: it did not go first
    f = ctx.add("store", severity="error", category="network_fabric",
                interruption=None if started or collided else "soft", role="symptom" if started or collided else "cause",
                title=f"c10d store / rendezvous error on {len(errors)} line(s): {e.text.strip()[:100]}"
                      + (f"; the store lives on {store_host}" if store_host else ""),
                rank=e.rank, time=e.time_utc, quotes=[quote(fl, e.line, e.text)],
                pointers=Pointers(hosts={store_host} if store_host else set()),
                actions=["At start-up: check MASTER_ADDR/--rdzv-endpoint, the port and firewalls, and that every "
                         "node resolves the master's name; mid-run: the store's host (rank 0 / the agent) died first"])
    f.hardware = False
    if store_host:
        _store_host_stopped(ctx, events, store_host)


def _after_completion(events, errors) -> bool:
    """Every store error follows a completion line of its own file (``Training finished``): the
    ranks lost the store while shutting down, after the work was done."""
    done: dict[int, int] = {}
    for xf, x in events:
        if x.kind == "completed":
            done[id(xf)] = min(done.get(id(xf), x.line), x.line)
    return all(id(xf) in done and done[id(xf)] < x.line for xf, x in errors)


def _store_host(ctx: Context, events) -> str | None:
    """The one host of this incident that holds the c10d store, or None when unknown or ambiguous."""
    known = {x.host or xf.host for xf, x in events} - {None}
    found = set()
    for xf, x in events:
        if x.kind != "store_host":
            continue
        name = x.details.get("endpoint")
        if name in _LOCAL:
            name = None  # a single-node endpoint: the agent printing it hosts the store
        host = (x.host or xf.host) if name is None else name if name in known else ctx.ids.host_of_addr(name) or name
        if host:
            found.add(host)
    return found.pop() if len(found) == 1 else None


def _signalled(events, host: str | None) -> bool:
    """Whether ``host``'s torchrun agent was stopped by a signal."""
    return any(e.kind == "agent_signal" and (e.host or fl.host) == host for fl, e in events)


def _store_host_stopped(ctx: Context, events, host: str) -> None:
    """The store host's agent was stopped by a signal (Ctrl-C, the scheduler, a shutdown): with the
    store gone, every other node's rendezvous fails. A last-resort cause: a real failure found on
    that host (an OOM kill, a lost GPU) explains the signal and wins."""
    stops = [(fl, e) for fl, e in events if e.kind == "agent_signal" and (e.host or fl.host) == host]
    if not stops:
        return
    fl, e = min(stops, key=lambda fe: (fe[1].time_utc or "~", fe[1].line))
    sig = e.details.get("signal") or "?"
    f = ctx.add("store-host-stopped", severity="error", category="application_error", interruption="soft",
                title=f"The c10d store's host {host} stopped first: its torchrun agent received "
                      f"{_SIGNALS.get(sig, sig)} and shut its workers down; the other nodes lost the store",
                host=host, time=e.time_utc, quotes=[quote(fl, e.line, e.text)],
                actions=[f"Find who signalled the agent on {host} (an operator's Ctrl-C, the scheduler's cancel or "
                         "time limit, a node shutdown); run the store apart from the workers (an etcd or dedicated "
                         "c10d endpoint) if one node's exit must not end the job"])
    f.tier = LAST_RESORT_TIER
    f.hardware = False


#: How far (lines) before an invalid-usage error NCCL's own WARN line saying why is looked for.
NCCL_REASON_WINDOW = 40


def _nccl_reason(fl, error, events):
    """The ``NCCL WARN`` line printed just before an invalid-usage/argument error in the same file
    (``Invalid rank requested : 2/2``): NCCL's own reason, printed before torch raises, so it is the
    first failure and says what was wrong. None when there is none close before it."""
    return max((w for f, w in events if f is fl and w.kind == "nccl_warn"
                and 0 < error.line - w.line <= NCCL_REASON_WINDOW), key=lambda w: w.line, default=None)


def _nccl_errors(ctx: Context, events) -> None:
    errors = [(f, e) for f, e in events if e.kind in ("nccl_error", "nccl_error_class")]
    ib = [(f, e) for f, e in events if e.kind == "ib_completion_error"]
    sock = [(f, e) for f, e in events if e.kind == "socket_error"]
    by_code: dict[str, list] = defaultdict(list)
    for fl, e in errors:
        by_code[e.details.get("code") or "nccl error"].append((fl, e))
    for code, items in by_code.items():
        fl, e = min(items, key=lambda fe: fe[1].time_utc or "~")
        ranks = {x.rank for _, x in items if x.rank is not None}
        peers = {x.details.get("peer") for _, x in items if x.details.get("peer")}
        if code in ("ncclInvalidUsage", "ncclInvalidArgument"):
            said = _nccl_reason(fl, e, events)
            ctx.add("nccl-usage", severity="error", category="application_error", interruption="soft",
                        title=f"{code} on rank(s) {_fmt_ranks(ranks)}: "
                              + (f"NCCL said '{said.text.split('NCCL WARN', 1)[1].strip()[:120]}'" if said else
                                 "collectives called inconsistently"),
                        rank=e.rank, time=e.time_utc,
                        quotes=([quote(fl, said.line, said.text)] if said else []) + [quote(fl, e.line, e.text)],
                        actions=["Read NCCL's WARN line: it names the wrong argument (a rank at or above the world "
                                 "size is a launch misconfiguration: RANK/WORLD_SIZE)",
                                 "Check that every rank calls the same collectives with the same sizes/dtypes"])
            continue
        pointers = _blamed(ctx, [(ctx.ids.locate(rank=x.rank).host if x.rank is not None else x.host,
                                  x.details.get("peer")) for _, x in items], peers)
        if code == "ncclUnhandledCudaError":
            pointers.ranks |= ranks
        ctx.add("nccl-error", severity="error", category="network_fabric", role="symptom",
                    title=f"{code} on {len(ranks) or len(items)} rank(s)" + (f" ({_fmt_ranks(ranks)})" if ranks else "")
                          + (f"; last error: {e.details['last_error'][:100]}" if e.details.get("last_error") else ""),
                    rank=e.rank if len(ranks) == 1 else None, time=e.time_utc, quotes=[quote(fl, e.line, e.text)],
                    pointers=pointers,
                    actions=["ncclRemoteError / connection resets usually mean the peer process died first: find "
                             "why that peer exited before suspecting the fabric"])
    for items, what in ((ib, "IB completion errors"), (sock, "NCCL socket errors")):
        if not items:
            continue
        fl, e = items[0]
        peers = {x.details.get("peer") for _, x in items if x.details.get("peer")}
        hosts = {x.host for _, x in items if x.host}
        status = e.details.get("ib_status")
        hint = {12: " (status 12 = transport retry exceeded: the peer is gone or the link/MTU is bad)",
                4: " (status 4 = local protection error: check ACS / GPUDirect RDMA)"}.get(status, "")
        ctx.add("nccl-net", severity="warning", category="network_fabric", role="symptom",
                title=f"{what} on {', '.join(sorted(hosts)) or 'the job'}"
                      + (f" from peer(s) {', '.join(sorted(peers))}" if peers else "") + hint,
                time=e.time_utc, quotes=[quote(fl, e.line, e.text)],
                pointers=_blamed(ctx, [(x.host, x.details.get("peer")) for _, x in items], peers))


def _blamed(ctx: Context, pairs: list[tuple[str | None, str | None]], peers: set[str]) -> Pointers:
    """Whom transport errors blame: the host at one end of every failing connection
    (:func:`~gpulib.diagnose.addresses.blamed_end`: ranks on several nodes that all name one peer,
    and that peer's own errors naming each of them), when the evidence names the peers' hosts;
    otherwise every peer address they name."""
    named = [(ctx.ids.node_of(reporter), ctx.ids.host_of_addr(peer)) for reporter, peer in pairs if peer]
    end = blamed_end(named) if named and all(p for _r, p in named) else None
    return Pointers(hosts={end}) if end else Pointers(peer_addrs=peers)


# ---------------------------------------------------------------- launchers (torchrun / slurm)
def _launcher(ctx: Context, events) -> None:
    for fl, e in events:
        if e.kind == "child_failed" and e.details.get("root"):
            root = e.details["root"]
            signal = root.get("signal")
            f = ctx.add("torchrun", severity="info", category="application_error", role="symptom",
                        title=f"torchrun: first failure it observed was rank {root.get('rank')} on {root.get('host')} "
                              f"(exitcode {root.get('exitcode')}{', ' + signal if signal else ''})",
                        rank=root.get("rank"), host=root.get("host"), time=e.time_utc,
                        quotes=[quote(fl, e.line, e.text)])
            f.pointers.ranks.add(root.get("rank")) if signal == "SIGKILL" else None
            if signal == "SIGKILL":
                f.actions.append("SIGKILL without a traceback: the host OOM killer or the scheduler - check "
                                 "`dmesg -T | grep -i -E 'killed process|out of memory'` on that host")
        elif e.kind == "process_failed" and e.details.get("signal") == "SIGKILL":
            f = ctx.add("sigkill", severity="warning", category="host_oom", role="symptom",
                        title=f"Rank process pid {e.pid} (local_rank {e.details.get('local_rank')}) was SIGKILLed",
                        time=e.time_utc, quotes=[quote(fl, e.line, e.text)])
            place(ctx, f, pid=e.pid, host=e.host)
            if f.rank is not None:
                f.pointers.ranks.add(f.rank)
        elif e.kind == "node_failure":
            ctx.add("node-lost", severity="critical", category="node_lost", interruption="hard", hardware=True,
                    title=f"Slurm reports a node failure on {e.host}", host=e.host, time=e.time_utc,
                    quotes=[quote(fl, e.line, e.text)],
                    actions=["Check the node's BMC (power, `ipmitool sel list`) and console; drain it"])
        elif e.kind == "slurm_cancelled" and not e.details.get("reason"):
            _cancelled_in_data_prep(ctx, fl, e, events)
        elif e.kind == "slurm_kill_failed":
            ctx.add("kill-failed", severity="warning", category="application_error", role="symptom",
                    title=f"Slurm could not kill the job step on {e.host} (a process stuck in the driver)",
                    host=e.host, time=e.time_utc, quotes=[quote(fl, e.line, e.text)],
                    pointers=Pointers(hosts={e.host} - {None}),
                    actions=["Reboot the node before giving it back to the scheduler"])


def _cancelled_in_data_prep(ctx: Context, fl, cancel, events) -> None:
    """Slurm cancelled the step for no reason it names (no time limit, no node failure), no rank
    printed an error, and the last thing the console shows is a data-preparation progress bar short
    of 100 %: the job died while preparing its data. With the collective-timeout flags set
    (NCCL_BLOCKING_WAIT, NCCL_ASYNC_ERROR_HANDLING), the ranks that wait for the preparing rank give
    up after the timeout and take the step down, often without printing the timeout. Frameworks
    draw such bars on rank 0 only, so an unprefixed bar is rank 0's."""
    if any(f is fl and e.kind in _FATAL_KINDS - {"slurm_cancelled", "srun_task_exit"} | {"exception", "traceback"}
           for f, e in events):
        return
    bars = [s for s in fl.signals if s.signature == DATA_PROGRESS and s.line <= cancel.line]
    if not bars or int(max(bars, key=lambda s: s.line).fields.get("num") or 100) >= 100:
        return
    bar = max(bars, key=lambda s: s.line)
    if any(f is fl and e.kind in ("step", "eval_progress") and bar.line < e.line < cancel.line for f, e in events):
        return
    rank = bar.rank if bar.rank is not None else 0
    f = ctx.add("cancelled-in-data-prep", severity="error", category="data_pipeline_stall", interruption="soft",
                role="cause", title=f"The Slurm step was cancelled while rank {rank} was still preparing the data "
                                    f"({bar.fields.get('num')} % of a progress bar), and no rank printed an error",
                rank=rank, time=cancel.time_utc, time_approx=True,
                quotes=[quote(fl, bar.line, bar.text), quote(fl, cancel.line, cancel.text)],
                actions=["Prepare the dataset once before launching the distributed job (or on every rank in "
                         "parallel); the other ranks wait for it in a collective",
                         "If NCCL_BLOCKING_WAIT / NCCL_ASYNC_ERROR_HANDLING (TORCH_NCCL_*) are set, the waiting ranks "
                         "abort the step after the collective timeout: raise init_process_group(timeout=...)"])
    f.tier = LAST_RESORT_TIER  # any cause the evidence shows (a fault on the node) comes first
    place(ctx, f, rank=rank)


# ---------------------------------------------------------------- transport (version skew: rules.other)
def _transport(ctx: Context, events) -> None:
    nets = ctx.ids.transport
    hosts = sorted(nets)
    if len(hosts) < 2:
        _socket_fallback(ctx, events)
        return
    socket_hosts = [h for h in hosts if "Socket" in nets[h] and "IB" not in nets[h]]
    ib_hosts = [h for h in hosts if "IB" in nets[h]]
    if not socket_hosts:
        return
    first = next(((fl, e) for fl, e in events if e.kind in ("nccl_no_ib", "nccl_transport") and e.host in socket_hosts
                  and (e.kind == "nccl_no_ib" or e.details.get("network") == "Socket")), None)
    when = next((e.time_utc for fl, e in events if e.host in socket_hosts and e.time_utc), None)
    title = (f"NCCL uses TCP sockets on {', '.join(socket_hosts)} but InfiniBand on {', '.join(ib_hosts)}"
             if ib_hosts else f"No InfiniBand on any of {len(hosts)} nodes: NCCL runs over TCP sockets")
    # NCCL's warning that it could not open the IB verbs library or device is the fallback's own reason
    why = next(((fl, e) for fl, e in events if e.kind == "nccl_warn" and e.host in socket_hosts
                and ("ibv" in e.text or "NET/IB" in e.text)), (None, None))
    first = first or (None, None)
    f = ctx.add("transport", severity="critical" if ib_hosts else "warning", category="network_fabric",
                interruption="soft" if ib_hosts else None, role="cause" if ib_hosts else "context",
                title=title, host=socket_hosts[0] if len(socket_hosts) == 1 else None, time=when, time_approx=True,
                quotes=[quote(fl, e.line, e.text) for fl, e in (why, first) if fl is not None],
                pointers=Pointers(hosts=set(socket_hosts)),
                actions=["Check `ibstat` on the socket node(s): the HCA named by NCCL_IB_HCA must be Active/LinkUp",
                         "Never relaunch with mixed transports: set NCCL_IB_DISABLE=0, and leave the socket node(s) out of the "
                         "job (`--exclude`) until their HCA is Active"],
                extra={"scope": "node"})
    f.hardware = False


def _socket_fallback(ctx: Context, events) -> None:
    """InfiniBand asked for (NCCL echoes ``NCCL_IB_DISABLE set by environment to 0`` or
    ``NCCL_IB_HCA set to ...``), no IB device found, TCP sockets used and IB nowhere: the RDMA
    device is not reachable from the job (not passed into the container, RDMA not enabled, a wrong
    HCA name). A configuration fault on a healthy fabric: soft, and every step runs at socket speed."""
    asked = next(((fl, e) for fl, e in events if e.kind == "nccl_ib_requested"
                  or (e.kind == "nccl_transport" and e.details.get("ib_requested"))), None)
    nets = {e.details.get("network") for _fl, e in events if e.kind == "nccl_transport"}
    if asked is None or "Socket" not in nets or any(n and n.startswith("IB") for n in nets):
        return
    fell = next(((fl, e) for fl, e in events if e.kind == "nccl_no_ib"
                 or (e.kind == "nccl_transport" and e.details.get("network") == "Socket")), asked)
    lines = [asked] + ([fell] if fell is not asked else [])
    f = ctx.add("transport", severity="error", category="network_fabric", interruption="soft", role="cause",
                title="InfiniBand was asked for but NCCL found no IB device and runs over TCP sockets",
                host=fell[1].host or fell[0].host, time=fell[1].time_utc, time_approx=True,
                quotes=[quote(fl, e.line, e.text) for fl, e in lines],
                actions=["Make the HCA reachable from the job: pass /dev/infiniband into the container (or run "
                         "privileged with the host network), enable RDMA, check NCCL_IB_HCA against `ibv_devinfo`",
                         "Rerun with NCCL_DEBUG=INFO: the run is right when it prints `Using network IB`"],
                extra={"scope": "node"})  # every rank of the node falls back: the rank that printed it is not the culprit
    f.hardware = False


# ---------------------------------------------------------------- progress: stragglers and data stalls
def _progress(ctx: Context, events) -> None:
    steps = [(fl, e) for fl, e in events if e.kind == "step" and e.rank is not None and e.details.get("metrics_ms")]
    if steps:
        _stragglers(ctx, steps)
    evals = [(fl, e) for fl, e in events if e.kind == "eval_progress" and e.rank is not None]
    if evals:
        last: dict[int, tuple] = {}
        for fl, e in evals:
            last[e.rank] = (fl, e)
        best = max(e.details["done"] for _, e in last.values())
        behind = {r: fe for r, fe in last.items() if fe[1].details["done"] < best}
        if behind and len(behind) < len(last):
            fl, e = min(behind.values(), key=lambda fe: fe[1].details["done"])
            ctx.add("eval-lag", severity="warning", category="application_error", role="symptom",
                    title=f"Rank(s) {_fmt_ranks(behind)} still evaluating ({e.details['done']}/{e.details['total']}) "
                          f"when the others had finished ({best})", rank=e.rank, time=e.time_utc,
                    quotes=[quote(fl, e.line, e.text)], pointers=Pointers(ranks=set(behind)))


def _compute_metric(metrics: dict) -> str | None:
    for key in metrics:
        if any(k in key for k in ("fwd", "compute", "forward", "backward")):
            return key
    return None


def _stragglers(ctx: Context, steps) -> None:
    by_step: dict[int, dict[int, tuple]] = defaultdict(dict)
    for fl, e in steps:
        by_step[e.details["step"]][e.rank] = (fl, e)
    flagged: dict[int, tuple] = {}
    stall: dict[int, tuple] = {}
    for step in sorted(by_step):
        ranks = by_step[step]
        if len(ranks) < 3:
            continue
        key = _compute_metric(next(iter(ranks.values()))[1].details["metrics_ms"])
        if key:
            values = {r: fe[1].details["metrics_ms"].get(key) for r, fe in ranks.items()}
            values = {r: v for r, v in values.items() if v}
            overall = median(values.values()) if values else 0
            for r, v in values.items():
                # with many ranks the median barely moves without r; recompute only for few ranks
                others = overall if len(values) > 8 else median([x for o, x in values.items() if o != r])
                if others and v >= STRAGGLER_RATIO * others and r not in flagged:
                    flagged[r] = (ranks[r], key, v, others)
        for r, (fl, e) in ranks.items():
            m = e.details["metrics_ms"]
            data = next((v for k, v in m.items() if "data" in k), None)
            total = sum(v for k, v in m.items() if "wait" not in k)
            if data and total and data > 0.5 * total and r not in stall:
                stall[r] = ((fl, e), data, total)
    for r, ((fl, e), key, v, others) in flagged.items():
        ctx.add("straggler", severity="warning", category="application_error", role="symptom",
                title=f"Rank {r} became a straggler at step {e.details['step']}: {key} {v:.0f} ms vs {others:.0f} ms "
                      "median of the other ranks", rank=r, time=e.time_utc,
                quotes=[quote(fl, e.line, e.text)], pointers=Pointers(ranks={r}),
                actions=["Look at this rank's GPU: throttling (clocks_event_reasons), temperature, ECC"])
    for r, ((fl, e), data, total) in stall.items():
        f = ctx.add("data-stall", severity="error", category="data_pipeline_stall", interruption="soft",
                    title=f"Rank {r} spends {data:.0f} of {total:.0f} ms per step waiting for data "
                          f"(step {e.details['step']})", rank=r, time=e.time_utc,
                    quotes=[quote(fl, e.line, e.text)],
                    actions=["Check the storage/network file system throughput and DataLoader num_workers"])
        place(ctx, f, rank=r)


def last_failure_time(ctx: Context) -> str | None:
    """When the job was last seen failing: a cause later than this cannot explain the interruption,
    and a process still on a GPU after it is a leftover. Only stamped lines count: a line printed
    without a stamp (a rank's watchdog line after the last progress line) borrowed its time from a
    neighbour, so it does not say that a later cause (the OOM kill that stopped that rank) came after."""
    failing = {"watchdog_timeout", "nccl_error", "process_failed", "child_failed", "srun_task_exit", "cuda_oom",
               "cuda_error", "exception", "socket_error", "ib_completion_error", "slurm_cancelled", "node_failure",
               "ci_step_failed", "barrier_timeout"}
    times = [e.time_last or e.time_utc for _, e in _events(ctx) if e.kind in failing and e.time_utc
             and not e.time_approx]
    return max(times) if times else None


_FATAL_KINDS = {"watchdog_timeout", "nccl_error", "cuda_oom", "cuda_error", "process_failed", "driver_too_old",
                "child_failed", "srun_task_exit", "node_failure", "watchdog_stuck", "device_assert", "slurm_cancelled",
                "dataloader_error", "ci_step_failed", "barrier_timeout"}


def job_outcome(ctx: Context) -> tuple[bool, bool]:
    """(failed, completed): did any rank/launcher report a failure; did the job report success.

    A job that reports success is failed only by fatal signals (timeouts, NCCL/CUDA errors, process
    exits); an exception a healthy run printed and survived does not fail it."""
    # a shell's ``0`` ({"exitcode": 0}) is weighed by gpulib.diagnose.ends: a worker's error before it wins
    completed = any(e.kind == "completed" and e.details.get("exitcode") != 0 for _, e in _events(ctx)) \
        or bool(ends.normal_ends(ctx))
    failed = any(e.kind in _FATAL_KINDS or (not completed and e.kind == "exception"
                                            and (e.details.get("class") or "") != "KeyboardInterrupt")
                 for _, e in _events(ctx))
    # a process that ran its exit path before the run's end: the run went on without it, or stopped
    failed = failed or bool(ends.teardown_lines(ctx)[1])
    return failed, completed


def job_start_time(ctx: Context) -> str | None:
    """The first stamped line of any job log."""
    times = [e.time_utc for _, e in _events(ctx) if e.time_utc and not e.time_approx]
    return min(times) if times else None

