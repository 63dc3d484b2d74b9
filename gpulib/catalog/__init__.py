"""The Xid catalog: what an Xid code means, whether it is hard or soft, and what to do.

The facts live in one data file, ``xid.tsv`` beside this module (built from NVIDIA's catalog and
the anchors' tables by ``python -m gpulib.catalog.build``, provenance per row). This module only
loads it. Why it matters: an Xid line names a code, not a verdict; "79" means the GPU is gone
from PCIe and the node needs a power-cycle, "13" usually means the job's own kernel faulted and
the hardware is fine. Where sources disagree (e.g. 63, 94, 109) the row's ``conflicts`` says so;
show it to the operator rather than hide it.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

DATA_FILE_NAME = "xid.tsv"


@dataclass(frozen=True)
class XidInfo:
    """One catalog row. ``interruption`` is 'hard' (a GPU or the node needs service), 'soft' (the
    process failed, the hardware is fine) or 'info' (no interruption by itself)."""

    code: int
    name: str
    description: str
    interruption: str
    category: str
    action: str
    sources: tuple[str, ...]
    conflicts: str | None
    category_basis: str = ""
    nvidia_immediate: str = ""
    nvidia_investigatory: str = ""
    cause: str = ""

    @property
    def hard(self) -> bool:
        return self.interruption == "hard"


def _parse(text: str) -> dict[int, XidInfo]:
    body = "".join(line for line in io.StringIO(text) if not line.startswith("#"))
    table: dict[int, XidInfo] = {}
    for row in csv.DictReader(io.StringIO(body), delimiter="\t"):
        code = int(row["code"])
        table[code] = XidInfo(
            code=code, name=row["name"], description=row["description"],
            interruption=row["interruption"], category=row["category"], action=row["action"],
            sources=tuple(s.strip() for s in row["sources"].split(" | ") if s.strip()),
            conflicts=row["conflicts"] or None, category_basis=row["category_basis"],
            nvidia_immediate=row["nvidia_immediate"], nvidia_investigatory=row["nvidia_investigatory"],
            cause=row["cause"],
        )
    return table


@lru_cache(maxsize=1)
def load_catalog() -> dict[int, XidInfo]:
    """Every row of the shipped data file, keyed by code (read once per process)."""
    text = resources.files(__name__).joinpath(DATA_FILE_NAME).read_text(encoding="utf-8")
    return _parse(text)


def xid_info(code: int) -> XidInfo | None:
    """The catalog row for ``code``, or None for a code the catalog does not know."""
    try:
        return load_catalog().get(int(code))
    except (TypeError, ValueError):
        return None


__all__ = ["XidInfo", "load_catalog", "xid_info"]
