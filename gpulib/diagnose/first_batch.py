"""A job that hangs before its first step while reading a dataset with no length.

Hugging Face's Trainer prints ``Num Epochs = 9,223,372,036,854,775,807`` (``sys.maxsize``) when the
training set has no length: a streaming / ``IterableDataset`` run bounded by ``max_steps``. If the
ranks then hang in a collective (a watchdog time-out, or the watchdog stuck) and no step was ever
logged, the first batch never came: the stream is fetched (and, with ``dispatch_batches``, on rank
0 only and handed out from there) while the other ranks wait in the collective that distributes
it. That is an input-pipeline stall (soft), not the GPU or the network; a cause the evidence shows
comes first, and a run that logged a step is not this.
"""

from __future__ import annotations

import re

from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds

#: The Trainer's epoch count line, and the smallest count that means "no length" (sys.maxsize).
_EPOCHS = re.compile(r"\bNum Epochs = (?P<n>[\d,]+)\s*$")
NO_LENGTH = 2 ** 62
#: Ids of findings that say the ranks hung in a collective.
_HANGS = ("nccl-timeout", "watchdog-stuck", "sig-watchdog")


def promote(ctx: Context) -> None:
    """Add the streaming-first-batch stall when the ranks hung, no step was logged and the trainer's
    training set had no length."""
    if any(f.role == "cause" and f.interruption in ("hard", "soft") for f in ctx.findings):
        return
    hangs = [f for f in ctx.findings if f.role == "symptom" and f.id.startswith(_HANGS)]
    if not hangs:
        return
    logs = ctx.inputs.of_kind(kinds.TRAINING_LOG)
    if any(getattr(ev, "kind", None) == "step" for f in logs for ev in f.records):
        return
    for fl in logs[:MAX_LOGS]:  # the trainer's header is in the job's console, not in every node's log
        for n, line in _numbered(fl):
            m = _EPOCHS.search(line)
            if m and int(m["n"].replace(",", "")) >= NO_LENGTH:
                first = min(hangs, key=lambda f: f.time or "~")
                ctx.add("first-batch-stall", severity="error", category="data_pipeline_stall", interruption="soft",
                        role="cause", time=first.time, time_approx=True,
                        title="The ranks hung before the first step of a training set with no length (a streaming "
                              "or iterable dataset): the first batch never arrived while the ranks waited in the "
                              "collective that hands it out",
                        quotes=[quote(fl, n, line.strip())],
                        actions=["With a streaming/iterable dataset under accelerate, set dispatch_batches=False "
                                 "(accelerator_config) so each rank reads its own shard instead of rank 0 fetching "
                                 "and broadcasting every batch",
                                 "Check that the stream yields at all: iterate the dataset alone on one rank and time "
                                 "the first batch; give the first step more time (init_process_group(timeout=...))"])
                return


#: Bytes of a log read for the epoch line (it is printed at the start of training).
HEAD_BYTES = 1 << 20
MAX_LOGS = 32


def _numbered(fl):
    try:
        with open(fl.path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(HEAD_BYTES)
    except OSError:
        return []
    return list(enumerate(text.splitlines(), start=1))


__all__ = ["promote"]
