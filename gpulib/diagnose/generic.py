"""Whether anything went wrong when no signature says what: the generic failure vocabulary.

The signature catalogue explains *causes*; it must not decide whether anything is wrong. A log
that says ``NCCL WARN Call to ibv_open_device failed``, ``ERROR ... thermal violation in GPU 2``
or ``The client socket has failed to connect`` and never says the job ended well is not a
healthy job because no signature knows those words: answering "none" (exit 0) lets a script
relaunch onto the broken node. So every line is also read for the *generic failure vocabulary*
(the ``failure`` rows of ``gpulib/catalog/signatures.tsv``: log levels ERROR/FATAL/CRITICAL and
glog E/F stamps, NCCL WARN, a Traceback, "failed", "timed out", "Killed", "stalled"/"deadlock", a
segmentation fault, a non-zero exit code, a CANCELLED/TIMEOUT job state), in the same pass as the
catalogue and only where no catalogue row read the line. A job log that shows progress and then
simply stops, with no end marker, is the other sign.

With no explained cause and no positive evidence of a normal end, these lines make the verdict
``unknown`` (exit 4), quoting the most suspicious first: the most severe words, the rarest lines
of their file (a line printed 5,000 times is the file's weather, the one printed once is news),
the nearest to where the log stops.

Only the logs of processes are read this way (job consoles, per-rank logs, files of no known
kind): a kernel log, ``nvidia-smi`` or a BMC table has rules that judge every line it holds, and
their "Error" columns and counters are not events.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpulib.catalog.signatures import Signature, load_signatures
from gpulib.diagnose import ends
from gpulib.diagnose.context import Context
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.parsers.signatures import GENERIC, GENERIC_KINDS, Signal

_WEIGHT = {"critical": 3.0, "error": 2.0, "warning": 1.0}
QUOTED = 5  # lines quoted in the verdict's finding


@dataclass(frozen=True)
class FailureLine:
    """One generic failure line no rule explained, with how suspicious it is."""

    file: InputFile
    signal: Signal
    severity: str
    #: lines of the same shape (numbers blanked) in its file, itself included
    count: int
    score: float


@dataclass(frozen=True)
class Stop:
    """A job log that showed progress and then stopped without a normal end."""

    file: InputFile
    line: int
    text: str
    step: int | None


def failure_lines(ctx: Context) -> list[FailureLine]:
    """Generic failure lines that no finding cites, most suspicious first."""
    catalogue = _vocabulary()
    cited = {(e.file, e.line) for f in ctx.findings for e in f.quotes if e.line is not None}
    files = ctx.inputs.of_kind(*GENERIC_KINDS)
    # a line a rule cited explains every line of its shape (the same warning printed by every rank)
    told = {s.fields.get("shape") for f in files for s in f.signals
            if s.signature in catalogue and (f.display, s.line) in cited}
    out: list[FailureLine] = []
    for f in files:
        mine = [s for s in f.signals if s.signature in catalogue and (f.display, s.line) not in cited
                and (f.display, s.line) not in ctx.judged and s.fields.get("shape") not in told]
        if not mine:
            continue
        benign = {ev.line for ev in f.records if getattr(ev, "kind", None) == "benign"}
        mine = [s for s in mine if s.line not in benign]
        shapes: Counter = Counter()
        for s in mine:
            shapes[s.signature, s.fields.get("shape")] += 1 + len(s.folded or ())
        last = max([s.line for s in f.signals] + [getattr(r, "line", 0) or 0 for r in f.records[-50:]] + [1])
        for s in mine:
            severity = catalogue[s.signature].severity
            count = shapes[s.signature, s.fields.get("shape")]
            score = _WEIGHT.get(severity, 0.5) + 1.0 / count + s.line / last
            out.append(FailureLine(f, s, severity, count, score))
    out.sort(key=lambda fl: (-fl.score, fl.file.display, fl.signal.line))
    return out


#: Records after the last progress line that say the process ended there: the trainer's final
#: summary, the shell's ``time`` summary (printed only once the command exited).
ENDS = ("completed", "process_exited")


def stopped_logs(ctx: Context) -> list[Stop]:
    """Job logs whose last progress line is not followed by an end (the caller knows none reported
    a normal one): the job stopped, or the log was cut, while it was running."""
    out = []
    ended = ends.normal_ends(ctx)
    for f in ctx.inputs.of_kind(kinds.TRAINING_LOG):
        if f.display in ended:
            continue  # its last progress line stands at the planned end, or it exited after its work
        steps = [ev for ev in f.records if getattr(ev, "kind", None) == "step"]
        if not steps:
            continue
        last = max(steps, key=lambda ev: ev.line)
        if not any(getattr(ev, "kind", None) in ENDS and ev.line > last.line for ev in f.records):
            out.append(Stop(f, last.line, last.text.strip(), last.details.get("step")))
    return out


def hint(lines: list[FailureLine]) -> str | None:
    """The category the vocabulary row of the most suspicious line hints at (NCCL WARN: the
    network NCCL runs on), or None."""
    return _vocabulary()[lines[0].signal.signature].category if lines else None


def action(line: FailureLine) -> str:
    """What its vocabulary row says to do about ``line``."""
    return _vocabulary()[line.signal.signature].action


def _vocabulary() -> dict[str, Signature]:
    """The generic failure rows, and the teardown rows: a process's exit lines say something failed
    unless the run's normal end forgave them (:mod:`.ends`, which marks those lines judged)."""
    return {sig.id: sig for sig in load_signatures() if sig.role in (GENERIC, ends.TEARDOWN)}


__all__ = ["FailureLine", "Stop", "action", "failure_lines", "hint", "stopped_logs"]
