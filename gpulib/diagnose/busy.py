"""What a rank that the others waited for was busy with: its last announced activity.

When the other ranks time out in a collective and one rank printed no error, that rank was still
working on something only it does. *What* decides the category, because it decides the fix:

* **data preparation** (scanning or caching labels, tokenizing, ``map``, preprocessing, building an
  index, loading or downloading a dataset, a progress bar over files, images or samples) is a
  ``data_pipeline_stall``: preprocess once before launch, or on every rank in parallel;
* **a checkpoint save** (writing, gathering or consolidating the state dict) is the job's own
  rank-0-only work outlasting the timeout: ``application_error`` - the fix is a longer timeout or a
  distributed checkpoint (storage the evidence shows stalled is a finding of its own, which wins);
* **an evaluation** (validation, predictions, a test pass on one rank) is ``application_error``:
  run it on every rank, or give it its own timeout.

The activity is the one announced last before the time-out (nearest wins): a checkpoint save
after a finished data scan is the save.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: activity -> the category it makes of a busy rank.
CATEGORY = {"data": "data_pipeline_stall", "checkpoint": "application_error", "evaluation": "application_error"}

#: A data-preparation phase: a verb of preparing data and a noun of data within a few words of it
#: (``Scanning /data/labels/train... 412 images``, ``Tokenizing the dataset``, ``Loading shards``,
#: ``Building index``, ``Caching images``); paths between them are allowed, a path's own words are not nouns,
#: and loading a checkpoint or a model in between is no data (``Loading checkpoint shards``).
_DATA = re.compile(r"(?i)\b(?:load|extract|tokeniz|preprocess|prepar|cach|download|shuffl|filter|map|scan|"
                   r"build|index|decod|resiz)\w*\b(?:(?!checkpoint|ckpt|model|weight)[^|]){0,80}?(?<![/\w.])(?:data(?:set)?s?|scenarios?|cache|"
                   r"corpus|samples?|examples?|records|labels?|images?|files?|shards?|index|tokens?|documents?)"
                   r"\b(?![/.]\w)")
#: A checkpoint being written (not read): ``Saving checkpoint to ...``, ``saving model state dict``,
#: ``Consolidating FSDP state dict``, ``writing checkpoint shard 3/8``.
_CHECKPOINT = re.compile(r"(?i)\b(?:sav|writ|dump|gather|consolidat|serializ|persist)\w*\b[^|]{0,40}?"
                         r"\b(?:checkpoints?|ckpt|state[ _-]?dicts?|weights|model)\b"
                         r"|\b(?:checkpoint|ckpt)\w*\b[^|]{0,20}?\b(?:sav|writ)\w*")
#: An evaluation pass: ``Running evaluation``, ``Validation: 43%|``, ``Evaluating on the test set``,
#: ``Running predictions``.
_EVALUATION = re.compile(r"(?i)\b(?:evaluat\w*|validat(?:ion|ing)|predict(?:ions?|ing)|inference|testing)\b")
#: A line that reports a failure is not an announcement of work.
_FAILURE = re.compile(r"(?i)error|exception|traceback|fail|timed? ?out|watchdog")


@dataclass(frozen=True)
class Activity:
    """A busy rank's last announced activity: what it was (``data``, ``checkpoint``, ``evaluation``),
    the line (1-based) and its text."""

    what: str
    line: int
    text: str

    @property
    def category(self) -> str:
        return CATEGORY[self.what]


def classify(text: str) -> str | None:
    """``data``, ``checkpoint``, ``evaluation`` or None for one log line. A save is named before a
    data step (``Saving checkpoint ... dataset stats`` is the save), an evaluation last (a
    ``Loading validation dataset`` line is the data it reads)."""
    if _FAILURE.search(text):
        return None
    if _CHECKPOINT.search(text):
        return "checkpoint"
    if _DATA.search(text):
        return "data"
    if _EVALUATION.search(text):
        return "evaluation"
    return None


def last_activity(lines: list[tuple[int, str]]) -> Activity | None:
    """The last line of ``lines`` ((line number, text), in file order) that announces an activity."""
    for n, text in reversed(lines):
        what = classify(text)
        if what:
            return Activity(what, n, text)
    return None


__all__ = ["CATEGORY", "Activity", "classify", "last_activity"]
