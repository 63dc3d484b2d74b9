"""Where a job log shows the run reached its normal end, and the lines its processes printed while they exited.

``none`` needs positive evidence of a normal end (docs/ARCHITECTURE.md). A job log gives it in three ways:

* **a completion line** (record kind ``completed``): the trainer's final summary (``Training
  finished``, Megatron's ``[after training is done]``), a test summary, or the shell's answer ``0``
  to an ``echo $?`` typed right after the launch (:mod:`gpulib.parsers.unwrap` keeps that line);
* **the planned end reached**: a progress counter printed with its total reaches it on the log's
  last progress line (``iteration 5000/ 5000``, ``step 100/100``, ``Epoch 99/99`` with its bar at
  ``98/98``). A counter inside an epoch that does not state its own total (``epoch 3 iter 11224/
  11224``) is one epoch's end, not the run's;
* **an exit right after completed work**: the log's last record before its first teardown line
  is a saved checkpoint, a completion, a full progress bar or a passed test case (then with no
  case failed before it), with nothing failing between them and no progress after. Teardown
  lines are printed only by a process running its exit path (a process killed by a signal
  prints none; one that raised prints its traceback first), so the program returned once the
  work it printed was done.

*Teardown lines* (catalogue role ``teardown``: CUDA's ``driver shutting down``, PyTorch's
``destroy_process_group() was not called``, NCCL's proxy thread failing its ``Close``,
``Exception ignored in ... __del__``) are what processes print while they exit. After the normal
end of their log they interrupt nothing: they are shown as one "also seen" warning, never as the
cause. Before it they mean a process exited while the run was going: they fail the run. A real
error after the end (an OOM, an Xid) still fails it: only teardown lines are forgiven.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulib.catalog.signatures import load_signatures
from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.parsers.signatures import Signal
from gpulib.parsers.training_log import INFO_KINDS

#: The catalogue role of lines a process prints while it exits (``gpulib/catalog/signatures.tsv``).
TEARDOWN = "teardown"
#: The catalogue row of a non-zero exit code or a failed job state.
NON_ZERO_EXIT = "generic-exit"
#: Records that say a unit of work was done: an exit right after one of them is the program's end.
_DONE = ("checkpoint_saved", "completed", "test_passed")


@dataclass(frozen=True)
class End:
    """Where ``file`` shows its normal end: ``line`` and its ``text``; ``how`` it shows it
    (``completion``, ``exit status``, ``planned``, ``exit``); ``since``: the line after which its
    teardown lines are forgiven (an exit status is printed after the process's own exit lines:
    those after its last progress line)."""

    file: InputFile
    line: int
    text: str
    how: str
    since: int


def teardown_signatures() -> frozenset[str]:
    return frozenset(sig.id for sig in load_signatures() if sig.role == TEARDOWN)


def normal_ends(ctx: Context) -> dict[str, End]:
    """The normal end of every job log that shows one, by file (its display name); read once.

    An end the log only implies (the plan reached, an exit after work, a shell's ``0``) yields to a
    non-zero exit or a failed job state reported anywhere (the catalogue's ``generic-exit`` row:
    ``worker 1: exit code 3``), as an echoed ``exit=0`` does; a trainer's own completion line does not."""
    if "ends" not in ctx.memo:
        torn = teardown_signatures()
        contradicted = any(s.signature == NON_ZERO_EXIT for f in ctx.inputs.files for s in f.signals)
        out = {}
        for f in ctx.inputs.of_kind(kinds.TRAINING_LOG):
            end = _completion(f) or _planned(f) or _exit_after_work(f, torn)
            if end is not None and not (contradicted and end.how != "completion"):
                out[f.display] = end
        ctx.memo["ends"] = out
    return ctx.memo["ends"]  # type: ignore[return-value]


def teardown_lines(ctx: Context) -> tuple[list[tuple[InputFile, Signal]], list[tuple[InputFile, Signal]]]:
    """The teardown lines of the job logs that show a normal end: (after it, before it)."""
    torn, ends = teardown_signatures(), normal_ends(ctx)
    after, before = [], []
    for f in ctx.inputs.of_kind(kinds.TRAINING_LOG):
        end = ends.get(f.display)
        if end is None:
            continue  # no normal end: its teardown lines are failure lines (gpulib.diagnose.generic)
        for s in f.signals:
            if s.signature in torn:
                (after if s.line > end.since else before).append((f, s))
    return after, before


def forgive_teardown(ctx: Context) -> None:
    """Teardown lines after their log's normal end are judged here (``ctx.judged``: no other rule
    reads them as a failure) and shown as one "also seen" warning."""
    after, _before = teardown_lines(ctx)
    if not after:
        return
    ctx.judged.update((f.display, s.line) for f, s in after)
    ends = normal_ends(ctx)
    f0, s0 = after[0]
    end = ends[f0.display]
    ctx.add("teardown", severity="warning", category="none", role="context",
            title=f"{len(after)} line(s) printed while the processes exited, in a run that ended normally "
                  f"({end.how}: {end.file.display}:{end.line}): exit teardown, not a failure",
            host=s0.host or f0.host, quotes=[quote(end.file, end.line, end.text)]
            + [quote(f, s.line, s.text) for f, s in after[:3]],
            actions=["Nothing to relaunch: the work was done. To silence it, call "
                     "torch.distributed.destroy_process_group() (and free CUDA objects) before the program exits"])


def _completion(f: InputFile) -> End | None:
    done = next((ev for ev in f.records if getattr(ev, "kind", None) == "completed"), None)
    if done is None:
        return None
    if done.details.get("exitcode") != 0:
        return End(f, done.line, done.text.strip(), "completion", done.line)
    if any(getattr(ev, "kind", None) in _DIED and ev.line < done.line for ev in f.records):
        return None  # a worker's uncaught error outranks its launcher's 0 (DeepSpeed's returned 0 over dead workers)
    work = [ev.line for ev in f.records if getattr(ev, "kind", None) == "step" and ev.line < done.line]
    return End(f, done.line, done.text.strip(), "exit status", max(work, default=0))


#: Record kinds that say a process of the run died: printed before a shell's ``0``, the ``0`` is the
#: launcher's own status, not the run's.
_DIED = frozenset({"exception", "cuda_oom", "cuda_error", "device_assert", "process_failed", "nccl_error"})


def _planned(f: InputFile) -> End | None:
    """The first progress line of the log's final run of lines at the planned total, when the last
    progress line reached it."""
    steps = [ev for ev in f.records if getattr(ev, "kind", None) == "step"]
    if not steps or not _at_plan(steps[-1], steps):
        return None
    first = steps[-1]
    for ev in reversed(steps):
        if not _at_plan(ev, steps):
            break
        first = ev
    return End(f, first.line, first.text.strip(), "planned", first.line)


def _at_plan(ev, steps) -> bool:
    """Whether progress line ``ev`` stands at the run's stated end: its counter at the total the log
    last stated (not inside an epoch of unknown count), or the last epoch of a stated count with
    its bar full."""
    d = ev.details
    if "epochs" in d:
        return d["epoch"] >= d["epochs"] and d.get("step", 0) >= d.get("total", d.get("planned", 0))
    if "epoch" in d:
        return False  # a counter inside an epoch whose count is not stated: the epoch's end at most
    plan = next((s.details["planned"] for s in reversed(steps) if s.line <= ev.line and "planned" in s.details), None)
    return plan is not None and d.get("step", -1) >= plan


def _exit_after_work(f: InputFile, torn: frozenset[str]) -> End | None:
    """The completed work right before the log's first teardown line, if nothing failed between."""
    first = min((s.line for s in f.signals if s.signature in torn), default=None)
    if first is None:
        return None
    records = [ev for ev in f.records if getattr(ev, "line", None) is not None]
    if any(ev.kind == "step" and ev.line > first for ev in records):
        return None  # work went on after it: not an exit
    work = [ev for ev in records if ev.line < first and (ev.kind in _DONE or ev.kind == "step")]
    if not work:
        return None
    last = max(work, key=lambda ev: ev.line)
    if last.kind == "step" and (not last.details.get("total") or last.details["step"] < last.details["total"]):
        return None  # a progress line that is not a full bar: work was under way
    # a test suite ended well only if no case failed on the way; other work, if nothing failed since
    since = 0 if last.kind == "test_passed" else last.line
    failing = [ev for ev in records if since < ev.line < first and ev.kind not in INFO_KINDS]
    signals = [s for s in f.signals if since < s.line < first and s.signature not in _QUIET]
    if failing or signals:
        return None
    return End(f, last.line, last.text.strip(), "exit", last.line)


#: Catalogue rows that say nothing went wrong (who printed a line, a normal end).
_QUIET = frozenset(sig.id for sig in load_signatures() if sig.role in ("identity", "completion", "benign", "context"))


__all__ = ["TEARDOWN", "End", "forgive_teardown", "normal_ends", "teardown_lines", "teardown_signatures"]
