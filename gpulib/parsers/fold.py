"""Folding the lines every rank of a large job prints once: one record per *shape*, not per rank.

A 10,000-node job console holds each rank's NCCL init line, and in a cascade every survivor's
watchdog timeout and "last completed work" line: 80,000 of each. A record per line costs ~1 KiB of
Python objects, so the console alone would take most of a gigabyte, and every rule that reads it
would walk 250,000 records to learn "81,919 ranks timed out at SeqNum 2851702".

What a rule needs from those lines is their *shape* (what was said: the collective, its sequence
number, the communicator's size) and *who* said it (rank, host, pid, device). So after
:data:`FOLD_AFTER` records of one shape, the folder keeps the next record of that shape and folds
every further line into it: the record keeps its own line, text and time, ``folded`` lists the
other lines' *member fields* (who printed them), and ``time_last`` the latest time among them. The
record always shows the shape's earliest line (a folded line that is earlier takes its place), so
"the first timeout" stays the first. Fields that are neither shape nor member (the milliseconds
one watchdog measured, NCCL's comm pointer) are dropped from the folded lines: no rule reads them.

A job of up to 64 ranks folds nothing, so what small cases show is unchanged. Records that fold
carry ``folded`` and ``time_last`` slots; readers expand them with their module's ``members_of`` /
``ranks_of``.

The folded lines themselves are kept column by column (:class:`Members`): a rank or a pid as 8
bytes in an array, a host or a time as a 4-byte code into the column's distinct values. A tuple of
Python objects per line would cost ~150 bytes, which at 80,000 ranks is what made the console's
memory grow with the job (10,240 nodes: 81,920 ranks x 3 folded lines each).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Iterator

#: Records of one shape kept whole before the next one starts folding the rest.
FOLD_AFTER = 64


class Folder:
    """Folds records shape by shape (see the module docstring).

    ``shape(record)`` returns the record's shape (hashable), or None for a record that never folds;
    ``member(record)`` what a folded line keeps (a tuple); ``fields`` the record's slots,
    so that a folded line earlier than its record can take the record's place."""

    def __init__(self, shape: Callable[[object], Hashable | None], member: Callable[[object], object],
                 fields: tuple[str, ...]) -> None:
        self._shape, self._member = shape, member
        self._fields = tuple(f for f in fields if f not in ("folded", "time_last"))
        self._kept: dict[Hashable, int] = {}  # shape -> records kept whole
        self._into: dict[Hashable, object] = {}  # shape -> the record the next lines fold into

    def fold(self, rec) -> bool:
        """True when ``rec`` was folded into an earlier record (the caller drops it)."""
        shape = self._shape(rec)
        if shape is None:
            return False
        kept = self._kept.get(shape, 0)
        if kept < FOLD_AFTER:
            self._kept[shape] = kept + 1
            return False
        into = self._into.get(shape)
        if into is None:
            self._into[shape] = rec
            rec.folded = Members()
            return False
        if rec.time_utc and (into.time_utc is None or rec.time_utc < into.time_utc):
            self._swap(into, rec)  # ``into`` (already listed) now shows the earlier line, ``rec`` the later
        into.folded.append(self._member(rec))
        if rec.time_utc and rec.time_utc > (into.time_last or into.time_utc or ""):
            into.time_last = rec.time_utc
        return True

    def _swap(self, a, b) -> None:
        for name in self._fields:
            va, vb = getattr(a, name), getattr(b, name)
            setattr(a, name, vb)
            setattr(b, name, va)


#: How an integer column spells "no value" (no rank or pid is this small).
_NO_INT = -(1 << 63)


class _Column:
    """One member field of every folded line: integers (or None) in an array while they all are,
    else a code per line into the column's distinct values (hosts, times: shared by many lines)."""

    __slots__ = ("_ints", "_codes", "_values", "_code_of")

    def __init__(self) -> None:
        self._ints: array | None = array("q")
        self._codes = array("I")
        self._values: list = []
        self._code_of: dict = {}

    def append(self, value) -> None:
        if self._ints is not None:
            if value is None:
                self._ints.append(_NO_INT)
                return
            if type(value) is int and _NO_INT < value < 1 << 63:
                self._ints.append(value)
                return
            ints, self._ints = self._ints, None  # a string in the column: every value becomes a code
            for old in ints:
                self._code(None if old == _NO_INT else old)
        self._code(value)

    def _code(self, value) -> None:
        code = self._code_of.get(value)
        if code is None:
            code = self._code_of[value] = len(self._values)
            self._values.append(value)
        self._codes.append(code)

    def __iter__(self) -> Iterator:
        if self._ints is not None:
            return (None if v == _NO_INT else v for v in self._ints)
        return map(self._values.__getitem__, self._codes)


class Members:
    """The member fields of the lines folded into one record, as tuples in line order (what a list
    of tuples would give), stored column by column (see the module docstring)."""

    __slots__ = ("_columns", "_size")
    __hash__ = None  # type: ignore[assignment]  # compared by value, like the list it stands for

    def __init__(self) -> None:
        self._columns: list[_Column] = []
        self._size = 0

    def append(self, member: tuple) -> None:
        if not self._columns:
            self._columns = [_Column() for _ in member]
        for column, value in zip(self._columns, member, strict=True):
            column.append(value)
        self._size += 1

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[tuple]:
        return zip(*self._columns, strict=True) if self._columns else iter(())

    def __eq__(self, other) -> bool:
        if isinstance(other, (Members, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Members({list(self)!r})"
