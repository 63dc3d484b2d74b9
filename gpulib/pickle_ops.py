"""Walk the opcodes of a pickle without running it: what ``pickletools.genops`` yields.

:func:`gpulib.safe_pickle.scan_ops` reads every opcode of a checkpoint's pickle before anything is
unpickled (forged memo slots, stack bombs, the globals it names); a 1 GB optimizer checkpoint's
pickle has ~16,000 opcodes, and this scan is the largest part of ``gpulib ckpt inspect``'s own
work. The walk reads the stream from one buffer with index arithmetic and a per-opcode dispatch
tuple - as fast as ``genops`` (~0.35 us an opcode) - and the opcode table is written out here
because the stdlib keeps it in ``pickletools``, whose import costs a quick command more than the
walk itself. tests/test_pickle_ops.py checks the table against ``pickletools.opcodes`` and the walk
against ``genops``.
"""

from __future__ import annotations

import io
import struct
from collections import namedtuple
from collections.abc import Iterator

#: One opcode. ``arg``: "-" none; uint1/uint2/uint4/uint8/int4/float8 fixed size; len1/len4/len8
#: counted bytes; line, line2 (GLOBAL/INST) newline-ended. ``pops_mark``: takes the values back to
#: the last MARK. ``delta``: values pushed, net of those popped (or of the marked ones).
#: (``collections``, not ``typing``: typing's import costs a quick command more than this whole module.)
Op = namedtuple("Op", "name arg pops_mark delta")


_TABLE = """
I INT line 0 1|J BININT int4 0 1|K BININT1 uint1 0 1|M BININT2 uint2 0 1|L LONG line 0 1
8a LONG1 len1 0 1|8b LONG4 len4 0 1|S STRING line 0 1|T BINSTRING len4 0 1|U SHORT_BINSTRING len1 0 1
B BINBYTES len4 0 1|C SHORT_BINBYTES len1 0 1|8e BINBYTES8 len8 0 1|96 BYTEARRAY8 len8 0 1
97 NEXT_BUFFER - 0 1|98 READONLY_BUFFER - 0 0|N NONE - 0 1|88 NEWTRUE - 0 1|89 NEWFALSE - 0 1
V UNICODE line 0 1|8c SHORT_BINUNICODE len1 0 1|X BINUNICODE len4 0 1|8d BINUNICODE8 len8 0 1
F FLOAT line 0 1|G BINFLOAT float8 0 1|] EMPTY_LIST - 0 1|a APPEND - 0 -1|e APPENDS - 1 1|l LIST - 1 1
) EMPTY_TUPLE - 0 1|t TUPLE - 1 1|85 TUPLE1 - 0 0|86 TUPLE2 - 0 -1|87 TUPLE3 - 0 -2|} EMPTY_DICT - 0 1
d DICT - 1 1|s SETITEM - 0 -2|u SETITEMS - 1 1|8f EMPTY_SET - 0 1|90 ADDITEMS - 1 1|91 FROZENSET - 1 1
0 POP - 0 -1|2 DUP - 0 1|( MARK - 0 1|1 POP_MARK - 1 0|g GET line 0 1|h BINGET uint1 0 1
j LONG_BINGET uint4 0 1|p PUT line 0 0|q BINPUT uint1 0 0|r LONG_BINPUT uint4 0 0|94 MEMOIZE - 0 0
82 EXT1 uint1 0 1|83 EXT2 uint2 0 1|84 EXT4 int4 0 1|c GLOBAL line2 0 1|93 STACK_GLOBAL - 0 -1
R REDUCE - 0 -1|b BUILD - 0 -1|i INST line2 1 1|o OBJ - 1 1|81 NEWOBJ - 0 -1|92 NEWOBJ_EX - 0 -2
80 PROTO uint1 0 0|. STOP - 0 -1|95 FRAME uint8 0 0|P PERSID line 0 1|Q BINPERSID - 0 0
"""
#: opcode byte -> :class:`Op`; the bytes >= 0x80 are written in hex, the others as their character.
OPCODES: dict[int, Op] = {
    (int(code, 16) if len(code) == 2 else ord(code)): Op(name, arg, pops == "1", int(delta))
    for code, name, arg, pops, delta in (entry.split() for entry in _TABLE.replace("\n", "|").split("|") if entry)
}
_NONE, _FIXED, _COUNTED, _LINE, _LINE2 = range(5)
_SIZES = {"uint1": (_FIXED, 1, "<B"), "uint2": (_FIXED, 2, "<H"), "uint4": (_FIXED, 4, "<I"),
          "uint8": (_FIXED, 8, "<Q"), "int4": (_FIXED, 4, "<i"), "float8": (_FIXED, 8, ">d"),
          "len1": (_COUNTED, 1, "<B"), "len4": (_COUNTED, 4, "<I"), "len8": (_COUNTED, 8, "<Q"),
          "-": (_NONE, 0, ""), "line": (_LINE, 0, ""), "line2": (_LINE2, 0, "")}


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def _latin1(raw: bytes) -> str:
    return raw.decode("latin-1")


def _long(raw: bytes) -> int:
    return int.from_bytes(raw, "little", signed=True)


#: What a counted argument becomes: ``str`` for text (the names a STACK_GLOBAL may use), ``int`` for
#: longs, ``bytearray`` for BYTEARRAY8; the rest stays bytes.
_DECODE = {"SHORT_BINUNICODE": _utf8, "BINUNICODE": _utf8, "BINUNICODE8": _utf8, "SHORT_BINSTRING": _latin1,
           "BINSTRING": _latin1, "LONG1": _long, "LONG4": _long, "BYTEARRAY8": bytearray}
#: opcode byte -> (op, how its argument is read, its size, its struct format, what decodes it), for the
#: walk; a list indexed by the byte (None: no such opcode) - faster than a dict at 16,000 opcodes.
_DISPATCH = [(op, *_SIZES[op.arg], _DECODE.get(op.name)) if (op := OPCODES.get(code)) else None for code in range(256)]
STOP = ord(".")
BLOCK_BYTES = 1 << 20


class _Stream:
    """The pickle's bytes: all of a buffer, or a file read block by block up to what is needed
    (a legacy torch file holds GBs of storages after its pickles)."""

    def __init__(self, source) -> None:
        self.file = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.buf, self.base = bytes(source), 0
        elif isinstance(source, io.BytesIO):
            self.base = source.tell()
            self.buf = source.getvalue()[self.base:]
        else:
            self.file, self.base, self.buf = source, source.tell(), bytearray()  # grows in place

    def need(self, end: int) -> None:
        """Make ``buf[:end]`` available, or raise when the stream ends before."""
        while len(self.buf) < end:
            block = self.file.read(max(BLOCK_BYTES, end - len(self.buf))) if self.file is not None else b""
            if not block:
                raise ValueError(f"pickle exhausted before the end of an opcode (at byte {self.base + len(self.buf)})")
            self.buf += block

    def line(self, i: int) -> int:
        """Index of the newline ending the line that starts at ``i``."""
        while True:
            end = self.buf.find(b"\n", i)
            if end != -1:
                return end
            self.need(len(self.buf) + 1)


def walk(source) -> Iterator[tuple[int, object, int]]:
    """``(opcode byte, argument, stream position)`` for each opcode up to STOP, like
    ``pickletools.genops`` (``OPCODES[byte]`` is the :class:`Op`; the byte, not the Op, is yielded
    so that a scan can index its own per-opcode tables with it):
    GLOBAL/INST give ``"module name"``, the binary opcodes their decoded value, memo indexes ``int``,
    the other protocol-0 text arguments their text as written. ``source``: bytes, a BytesIO or a
    binary file (read from its position). Raises ``ValueError`` on an unknown opcode or a stream
    that ends mid-opcode."""
    s = _Stream(source)
    buf, base, unpack_from, dispatch = s.buf, s.base, struct.unpack_from, _DISPATCH
    i = 0
    while True:
        if i >= len(buf):
            s.need(i + 1)
            buf = s.buf
        code = buf[i]
        entry = dispatch[code]
        if entry is None:
            raise ValueError(f"at position {base + i}, opcode {bytes([buf[i]])!r} unknown")
        op, mode, size, fmt, post = entry
        pos, i = base + i, i + 1
        if mode == _NONE:
            arg = None
        elif mode == _FIXED:
            if i + size > len(buf):
                s.need(i + size)
                buf = s.buf
            arg, i = unpack_from(fmt, buf, i)[0], i + size
        elif mode == _COUNTED:
            if i + size > len(buf):
                s.need(i + size)
                buf = s.buf
            n = unpack_from(fmt, buf, i)[0]
            i += size
            if i + n > len(buf):
                s.need(i + n)
                buf = s.buf
            arg, i = buf[i:i + n], i + n
            arg = bytes(arg) if post is None else post(arg)  # bytes(bytes) is the same object
        else:  # one line, or two (GLOBAL/INST: module and name)
            end = s.line(i)
            text = s.buf[i:end]
            if mode == _LINE2:
                end2 = s.line(end + 1)
                text = text + b" " + s.buf[end + 1:end2]
                end = end2
            buf = s.buf
            arg, i = _line_value(op.name, text), end + 1
        yield code, arg, pos
        if code == STOP:
            return


def _line_value(name: str, text: bytes):
    """A protocol-0 argument: memo indexes as ``int``, names and strings as ``str`` (quotes of a
    STRING removed; escapes left as written - the value only names things in a report)."""
    if name in ("GET", "PUT"):
        return int(text)
    value = text.decode("latin-1")
    if name == "STRING" and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


__all__ = ["OPCODES", "STOP", "Op", "walk"]
