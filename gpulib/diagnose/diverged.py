"""A collective time-out whose cause is one rank's own code path, not a fault.

Ranks that time out in a collective only waited; when nothing failed (no fault, no rank raised),
the rank they waited for is usually elsewhere in the *program*: it ran work only it does, it
issued a different number of collectives, or the loop had already ended and teardown code calls
a collective that not every rank reaches. Three signs in the process logs say so, and each names
at most one rank (a sign that gives two ranks names none):

* **a rank-only phase**: a log stops in work labelled with one rank (``Running predictions ...
  on rank=0``, ``saving on rank 0``, ``rank 0 only``, ``rank 0: read 96/144 partials``), two
  or more lines of it - that rank was still busy in it while the others waited (a rank's own time-out report, which names
  itself, is no such label);
* **one rank's values differ**: a per-rank dump (one ``rankN <value>`` line per rank, three or more
  ranks) in which all ranks agree but one - e.g. the keys of a stats dict reduced key by key, so
  that rank issues fewer ``all_reduce`` calls and the others wait for the missing one;
* **the loop had ended**: the trainer's end line (``Trainer.fit stopped: max_epochs reached``,
  ``training finished``) comes before the time-out in the same log - the hang is in code after
  training (a final metric, a barrier under a rank condition), and the result is intact.

The verdict is then ``application_error`` (soft), naming the rank when the sign gives one - or
``data_pipeline_stall`` when the rank-only work is data preparation (:mod:`gpulib.diagnose.busy`). A
cascade with none of these signs stays "NCCL timeout, cause not shown".
"""

from __future__ import annotations

import re
from collections import Counter

from gpulib.diagnose.busy import CATEGORY, classify
from gpulib.diagnose.context import Context, place, quote
from gpulib.evidence.gather import InputFile
from gpulib.findings import Finding
from gpulib.parsers.signatures import GENERIC_KINDS
from gpulib.parsers.unwrap import unwrap

#: A line of work labelled with the one rank that does it.
_RANK_ONLY = re.compile(r"(?i)\b(?:only\s+)?on\s+rank\s*[=:#]?\s*(?P<a>\d+)\b(?!\s*[/,-]\s*\d)"
                        r"|\brank\s*[=:#]?\s*(?P<b>\d+)\s+only\b|(?<![\[\w])rank (?P<c>\d+): ")
#: A rank's own report of its time-out or failure names itself; it is not a label of its work.
_SELF_REPORT = re.compile(r"(?i)watchdog|time[ds]?\s*out|timeout|error|exception|traceback|fail")
#: One line of a per-rank dump: ``rank1 ['acc', 'loss']``, ``rank 2: 812``, ``[rank3] = {...}``.
_DUMP = re.compile(r"^\s*\[?rank[\s_#]*(?P<rank>\d+)\]?\s*[:=]?\s+(?P<value>\S.*?)\s*$", re.IGNORECASE)
#: The trainer's own end of the training loop.
_LOOP_END = re.compile(r"(?i)\bfit\W*\s+stopped\b|\bmax_(?:epochs|steps)\W*\s*=\s*\S+\s+reached\b"
                       r"|\btraining (?:completed?|finished|done)\b")
#: Files larger than this are not re-read for the signs (a multi-GB console is not read twice).
MAX_BYTES = 8 << 20
#: Bytes re-read in all (the signs are in a job's console or a note beside it, not in every node's log).
TOTAL_BYTES = 32 << 20
MIN_DUMP_RANKS = 3  # an odd one out needs at least two that agree
MIN_PROGRESS_LINES = 2  # lines of rank-only work a log must stop in


def promote(ctx: Context) -> None:
    """Add the one-rank-path cause when a collective timed out, nothing else explains it, and a sign
    above is in the evidence."""
    if any(f.role == "cause" and f.interruption in ("hard", "soft") for f in ctx.findings):
        return
    timeouts = [f for f in ctx.findings if f.role == "symptom" and (
        "timeout" in f.extra or f.id.startswith("sig-watchdog-timeout"))]
    if not timeouts:
        return
    files, budget = [], TOTAL_BYTES
    for f in ctx.inputs.of_kind(*GENERIC_KINDS):  # a thousand nodes' consoles are not all re-read
        size = _size(f)
        if size <= min(MAX_BYTES, budget):
            files.append(f)
            budget -= size
    texts = {f.display: _lines(f) for f in files}
    first = min(timeouts, key=lambda f: f.time or "~")
    at = first.quotes[0] if first.quotes else None
    found = _ended(ctx, files, texts, at) or _rank_only(ctx, files, texts) or _odd_dump(ctx, files, texts)
    if found is not None:
        found.time = first.time
        found.time_approx = True


def _ended(ctx: Context, files: list[InputFile], texts: dict, at) -> Finding | None:
    if at is None or at.line is None or at.file not in texts:
        return None
    lines = texts[at.file]
    end = next((n for n in range(min(at.line - 1, len(lines)) - 1, -1, -1) if _LOOP_END.search(lines[n])), None)
    if end is None:
        return None
    fl = next(f for f in files if f.display == at.file)
    return ctx.add("post-loop-collective", severity="error", category="application_error", interruption="soft",
                   role="cause", title="The training loop had ended before the collective timed out: the hang is in "
                   "code after training that not every rank reaches (a final metric or barrier); the trained result "
                   "is intact",
                   quotes=[quote(fl, end + 1, lines[end].strip()), quote(fl, at.line, at.text)],
                   actions=["Read the code that runs after the training loop returns: every rank must make the same "
                            "collectives (no barrier or all_reduce under `if rank == 0`, no rank that returns early)",
                            "The checkpoints and metrics written before the end are usable: do not rerun training"])


def _rank_only(ctx: Context, files: list[InputFile], texts: dict) -> Finding | None:
    """The labelled work must be where its file stops, and show progress there (two or more lines of
    it): the rank was still working in it. A rank that merely logs a step under its number and went
    on, or announced a phase once and then waited like the others, is not this."""
    hits = []
    for f in files:
        run = []  # the labelled lines the file ends with, last first
        for n, line in reversed(list(enumerate(texts[f.display]))):
            if not line.strip() or _SELF_REPORT.search(line):
                continue
            m = _RANK_ONLY.search(line)
            if not m:
                break
            run.append((n, int(m["a"] or m["b"] or m["c"])))
        if len(run) >= MIN_PROGRESS_LINES and len({r for _, r in run}) == 1:
            hits.append((f, run[0][0], run[0][1]))
    if len({r for _, _, r in hits}) != 1:
        return None
    fl, n, rank = hits[-1]
    text = texts[fl.display][n].strip()
    what = classify(text)  # data preparation on one rank is a data stall; a save or an evaluation the job's own work
    found = ctx.add("rank-only-work", severity="error", category=CATEGORY.get(what, "application_error"),
                    interruption="soft",
                    role="cause", title=f"Rank {rank} was busy with work only it does ('{text[:100]}') while the "
                    "other ranks waited in a collective until it timed out", rank=rank,
                    quotes=[quote(fl, n + 1, text)],
                    actions=[f"Run rank {rank}'s extra work (evaluation, predictions, checkpoint) on every rank, or "
                             "put a barrier with a longer timeout after it (init_process_group(timeout=...))",
                             "Or make that phase shorter than the collective timeout"])
    place(ctx, found, rank=rank)
    return found


def _odd_dump(ctx: Context, files: list[InputFile], texts: dict) -> Finding | None:
    for fl in files:
        rows = [(n, m["rank"], m["value"]) for n, line in enumerate(texts[fl.display]) for m in [_DUMP.match(line)] if m]
        per_rank = Counter(r for _, r, _ in rows)
        if len(per_rank) < MIN_DUMP_RANKS or max(per_rank.values()) > 1:
            continue
        values = Counter(v for _, _, v in rows)
        if len(values) != 2 or min(values.values()) != 1:
            continue
        odd_value = min(values, key=values.get)
        n, rank, value = next(row for row in rows if row[2] == odd_value)
        usual = next(row for row in rows if row[2] != odd_value)
        found = ctx.add("rank-diverged", severity="error", category="application_error", interruption="soft",
                        role="cause", title=f"Rank {rank} differed from every other rank ({value[:80]} where the others "
                        f"had {usual[2][:80]}): its code path issued different collectives, and the others waited "
                        "for the missing one until it timed out", rank=int(rank),
                        quotes=[quote(fl, n + 1, texts[fl.display][n].strip()),
                                  quote(fl, usual[0] + 1, texts[fl.display][usual[0]].strip())],
                        actions=["Make every rank issue the same collectives: reduce a fixed set of keys/tensors "
                                 "(fill the missing ones with zeros and a count), not whatever this rank has",
                                 "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: it reports mismatched collectives by name"])
        place(ctx, found, rank=int(rank))
        return found
    return None


def _size(f: InputFile) -> int:
    try:
        return f.path.stat().st_size
    except OSError:
        return MAX_BYTES + 1


def _lines(f: InputFile) -> list[str]:
    """The file's lines without a paste's wrapping (quote, fence, shell prompts, fan-out prefix),
    line for line: a prompt after the pasted log is not where the log stops."""
    try:
        return unwrap(f.path.read_text(errors="replace")).text.splitlines()
    except OSError:
        return []


__all__ = ["promote"]
