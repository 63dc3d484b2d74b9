"""The CUDA error table: which class of failure a CUDA error message names.

The facts live in one data file, ``cuda_errors.tsv`` beside this module; this module loads it and
answers one question, :func:`cuda_error_of` (the row a message names). Why one table: the same
failure reaches a log in several wordings (the runtime's string, the enum name, the driver API's
name, PyTorch's own sentence), and what it means for the incident differs by class, not by
wording. "the provided PTX was compiled with an unsupported toolchain" reads like a bug in the
job's code, yet it says the node's driver is older than the CUDA the job was built with: the fix
is the driver, on every node that has the old one, not the code.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

DATA_FILE_NAME = "cuda_errors.tsv"
#: Classes whose fix is the node's driver stack, not the job or the GPU.
DRIVER_CLASSES = frozenset({"driver_too_old", "driver_mismatch"})


@dataclass(frozen=True)
class CudaError:
    """One row: the runtime's enum and code, the driver API's name, the class, what a job that
    died of it is (category, hard/soft) and what to do."""

    code: int
    name: str
    driver_name: str | None
    klass: str
    category: str
    interruption: str
    anchored: bool  # a phrase counts only at the start of the error text
    phrases: tuple[str, ...]
    action: str

    def names(self) -> tuple[str, ...]:
        return (self.name, self.driver_name) if self.driver_name else (self.name,)


def _parse(text: str) -> tuple[CudaError, ...]:
    body = "".join(line for line in io.StringIO(text) if not line.startswith("#"))
    return tuple(CudaError(code=int(row["code"]), name=row["name"],
                           driver_name=None if row["driver_name"] in ("", "-") else row["driver_name"],
                           klass=row["class"], category=row["category"], interruption=row["interruption"],
                           anchored=row["anchor"] == "start",
                           phrases=tuple(p.strip() for p in row["phrases"].split(" | ") if p.strip()),
                           action=row["action"])
                 for row in csv.DictReader(io.StringIO(body), delimiter="\t", quoting=csv.QUOTE_NONE))


@lru_cache(maxsize=1)
def load_cuda_errors() -> tuple[CudaError, ...]:
    """Every row of the shipped table, in its order (read once per process)."""
    return _parse(resources.files("gpulib.catalog").joinpath(DATA_FILE_NAME).read_text(encoding="utf-8"))


def _alternatives(row: CudaError) -> list[str]:
    start = r"^\s*" if row.anchored else ""
    return [start + re.escape(p) for p in row.phrases] + [r"\b" + re.escape(n) + r"\b" for n in row.names()]


def pattern(classes: frozenset[str] | None = None) -> re.Pattern:
    """One case-insensitive regex for the wordings of the rows of ``classes`` (every row when None),
    for a parser that must tell such a line at line speed."""
    rows = [r for r in load_cuda_errors() if classes is None or r.klass in classes]
    return re.compile("|".join(a for r in rows for a in _alternatives(r)), re.IGNORECASE)


@lru_cache(maxsize=1)
def _row_patterns() -> tuple[tuple[re.Pattern, CudaError], ...]:
    return tuple((re.compile("|".join(_alternatives(r)), re.IGNORECASE), r) for r in load_cuda_errors())


def cuda_error_of(text: str, classes: frozenset[str] | None = None) -> CudaError | None:
    """The row the error text names (its string, enum or driver API name), of ``classes`` when given,
    or None."""
    return next((row for rx, row in _row_patterns() if (classes is None or row.klass in classes) and rx.search(text)),
                None)


__all__ = ["DRIVER_CLASSES", "CudaError", "cuda_error_of", "load_cuda_errors", "pattern"]
