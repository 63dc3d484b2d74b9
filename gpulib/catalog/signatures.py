"""The signature catalogue: what one line of evidence means, whatever file it was found in.

Engineers hand over evidence as they have it: a kernel Xid pasted into a shell session, an OOM in
``job-error.txt``, a BMC event table in an issue comment. Deciding first *what kind of file* this
is, and reading only the lines that kind expects, is how a tool answers a silent "none" while the
log says ``uncorrectable ECC error encountered``. So the facts live in one data file,
``signatures.tsv`` beside this module (like the Xid table): pattern -> category, hard/soft, role,
tier, action. :mod:`gpulib.parsers.signatures` runs every line of every readable text file through
it; kind-specific parsers only add structure.

*tier* orders causes when several are linked to one interruption: what needs a reset, reboot or
RMA first (1), then what kills a process (2), what slows or starves it (3), cascade (4), and a bare
exception last (5): an Xid 79 explains the ``CUDA error: unknown error`` and the timeouts after it.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

DATA_FILE_NAME = "signatures.tsv"
ROLES = ("cause", "symptom", "context", "completion", "benign", "identity", "setting", "failure", "teardown")


@dataclass(frozen=True)
class Signature:
    """One catalogue row. ``category``/``interruption`` are None where the match decides them (an
    Xid's code, a watchdog timeout's blamed peer). ``min_value``: the row counts only when its
    ``num`` group reaches it (an ECC counter, not any ECC counter)."""

    id: str
    category: str | None
    interruption: str | None
    severity: str
    tier: int
    role: str
    min_value: float | None
    keywords: tuple[str, ...]
    pattern: re.Pattern
    title: str
    action: str


def _none(value: str) -> str | None:
    return None if value in ("", "-") else value


def parse(text: str) -> list[Signature]:
    """The rows of a catalogue file (comment lines start with ``#``)."""
    body = "".join(line for line in io.StringIO(text) if not line.startswith("#"))
    rows = []
    for row in csv.DictReader(io.StringIO(body), delimiter="\t", quoting=csv.QUOTE_NONE):
        role = row["role"]
        if role not in ROLES:
            raise ValueError(f"{DATA_FILE_NAME}: row {row['id']}: unknown role {role!r}")
        rows.append(Signature(
            id=row["id"], category=_none(row["category"]), interruption=_none(row["interruption"]),
            severity=row["severity"], tier=int(row["tier"]), role=role,
            min_value=float(row["min"]) if row["min"] else None,
            keywords=tuple(k.replace("\\n", "\n") for k in row["keywords"].split(" | ") if k.strip()),
            pattern=re.compile(row["pattern"]), title=row["title"], action=_none(row["action"]) or "",
        ))
    return rows


@lru_cache(maxsize=1)
def load_signatures() -> tuple[Signature, ...]:
    """Every row of the shipped catalogue (read and compiled once per process)."""
    text = resources.files("gpulib.catalog").joinpath(DATA_FILE_NAME).read_text(encoding="utf-8")
    return tuple(parse(text))


_FIELD = re.compile(r" ?\(?\{(\w+)\}\)?")


def render(template: str, fields: dict) -> str:
    """A title with its ``{field}`` holes filled; a hole with no value is dropped with its
    parentheses, so a title never says ``None``."""
    def fill(m: re.Match) -> str:
        value = fields.get(m[1])
        if value in (None, ""):
            return ""
        return m[0].replace("{" + m[1] + "}", str(value))
    return _FIELD.sub(fill, template).strip()


__all__ = ["Signature", "load_signatures", "parse", "render"]
