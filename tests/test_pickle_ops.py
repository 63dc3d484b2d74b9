"""The opcode walker agrees with the stdlib's ``pickletools`` on the table and on every opcode."""

from __future__ import annotations

import io
import pickle
import pickletools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulib.pickle_ops import OPCODES, walk


def test_table_is_pickletools_table():
    for op in pickletools.opcodes:
        mine = OPCODES[ord(op.code)]
        pops = pickletools.markobject in op.stack_before
        delta = len(op.stack_after) if pops else len(op.stack_after) - len(op.stack_before)
        assert (mine.name, mine.pops_mark, mine.delta) == (op.name, pops, delta)
    assert len(OPCODES) == len(pickletools.opcodes)


#: Protocol-0 text arguments (INT, FLOAT, STRING...) are kept as written: only names and memo
#: indexes are read from them. Every other argument must be what genops decodes.
_AS_WRITTEN = {"INT", "LONG", "FLOAT", "STRING", "UNICODE", "PERSID"}


def _same_as_genops(data: bytes) -> None:
    theirs = [(op.name, None if op.name in _AS_WRITTEN else arg, pos) for op, arg, pos in pickletools.genops(data)]
    mine = [(OPCODES[code].name, None if OPCODES[code].name in _AS_WRITTEN else arg, pos) for code, arg, pos in walk(data)]
    assert mine == theirs


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.binary(max_size=300),
    lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=5), inner,
                                                                                             max_size=5),
    max_leaves=30)


@settings(max_examples=150, deadline=None)
@given(values, st.integers(min_value=0, max_value=pickle.HIGHEST_PROTOCOL))
def test_walk_yields_what_genops_yields(value, protocol):
    _same_as_genops(pickle.dumps([value, value, pickle.dumps], protocol=protocol))  # memo reuse and a global


def test_file_streams_are_read_up_to_stop_only_as_needed(tmp_path):
    path = tmp_path / "two.pkl"
    path.write_bytes(pickle.dumps({"a": 1}, protocol=2) + pickle.dumps("second", protocol=2) + b"\0" * 3_000_000)
    with open(path, "rb") as fh:
        first = list(walk(fh))
    assert OPCODES[first[-1][0]].name == "STOP"
    buf = io.BytesIO(path.read_bytes())
    buf.seek(first[-1][2] + 1)
    assert [arg for code, arg, _ in walk(buf) if OPCODES[code].name == "BINUNICODE"] == ["second"]


@pytest.mark.parametrize("data, message", [(b"\x80\x02\xff", "opcode b'\\xff' unknown"),
                                          (b"\x80\x02X\x10\x00\x00\x00ab", "exhausted")])
def test_broken_streams_raise_value_error(data, message):
    with pytest.raises(ValueError, match=message.replace("\\", "\\\\")):
        list(walk(data))
