"""Read a zip archive's end record and central directory by hand, and check member CRCs fast.

``torch.save`` writes an uncompressed zip (via miniz) and writes the central directory *last*:
a save interrupted at any point leaves no end record. So "is there a complete end record and a
central directory that fits inside the file" is the cheapest reliable truncation test there is.
This reader never reads member data unless asked to (``read_member``, ``check_crcs``), handles
ZIP64 (archives over 4 GiB, and torch writes the ZIP64 records even for small files), and can
read a zip embedded in a window of a larger file (DCP ``.distcp`` items are torch.save zips).

``torch.load`` never checks CRCs: a block of zeros inside a tensor payload loads "fine" and
silently gives wrong weights. ``check_crcs`` compares every member against the central directory,
reading 16 MiB chunks with ``os.preadv`` into per-thread buffers (parallel reads help on cold
storage), and joining chunk CRCs with ``crc32_combine``. The CRC itself comes from zlib-ng when
installed (the ``fast`` extra; carry-less-multiply folding, several GB/s), else from zlib.
"""

from __future__ import annotations

import os
import struct
import zlib
from functools import lru_cache

EOCD_SIG = b"PK\x05\x06"
ZIP64_LOCATOR_SIG = b"PK\x06\x07"
ZIP64_EOCD_SIG = b"PK\x06\x06"
CENTRAL_SIG = b"PK\x01\x02"
LOCAL_SIG = b"PK\x03\x04"
_EOCD = struct.Struct("<4s4H2LH")  # 22 bytes
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # 20 bytes
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # 56 bytes
_CENTRAL = struct.Struct("<4s6H3L5H2L")  # 46 bytes
_LOCAL = struct.Struct("<4s5H3L2H")  # 30 bytes
MAX_COMMENT = 0xFFFF
CHUNK_BYTES = 16 << 20

#: From this size on a CRC-32 is zlib-ng's; below, stdlib zlib's (the same value): inspecting a
#: checkpoint CRCs only its small pickle, and importing zlib-ng costs ~1.5 ms of start-up.
NG_CRC_FROM = 1 << 20


def crc32(data, value: int = 0) -> int:
    if len(data) < NG_CRC_FROM:
        return zlib.crc32(data, value)
    return _big_crc32()(data, value)


@lru_cache(maxsize=1)
def _big_crc32():
    try:  # zlib-ng's CRC-32 folds with PCLMUL/VPCLMULQDQ: 5-15x CPython's zlib, faster than cksum
        from zlib_ng.zlib_ng import crc32 as ng_crc32  # noqa: PLC0415
    except ImportError:  # the optional 'fast' extra is not installed: stdlib zlib, same result
        return zlib.crc32
    return ng_crc32


MAX_MEMBERS = 10_000_000
# torch.save with torch.serialization.set_crc32_options(False) writes 0 in every CRC field: "none
# recorded", not a mismatch (torch loads such files; it never checks CRCs anyway).
NO_CRC = 0


class ZipFormatError(Exception):
    """The archive cannot be read; ``reason`` says why in operator words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# Plain classes, not dataclasses: this module is on every `gpulib ckpt inspect` start, and
# `dataclasses` (with `inspect`, `ast`, `dis` behind it) would cost a sixth of its time.
class ZipMember:
    """One member as the central directory lists it."""

    __slots__ = ("name", "method", "flags", "crc32", "compressed_bytes", "size_bytes", "header_offset", "data_offset")

    def __init__(self, name: str, method: int, flags: int, crc32: int, compressed_bytes: int, size_bytes: int,
                 header_offset: int, data_offset: int | None = None) -> None:
        self.name = name
        self.method = method  # 0 stored, 8 deflated
        self.flags, self.crc32, self.compressed_bytes, self.size_bytes = flags, crc32, compressed_bytes, size_bytes
        self.header_offset = header_offset  # relative to the archive start
        self.data_offset = data_offset  # absolute file offset of the payload, after read_local_headers()


class ZipIndex:
    """What the end record and central directory say. Offsets in members are archive-relative."""

    def __init__(self, path: str, start: int, end: int, members: list[ZipMember], zip64: bool,
                 duplicates: list[str]) -> None:
        self.path = path
        self.start = start  # file offset where the archive begins (0 for a plain file)
        self.end = end  # file offset just past the end record
        self.members, self.zip64, self.duplicates = members, zip64, duplicates


def _find_eocd(fd: int, start: int, end: int) -> tuple[int, bytes]:
    """The end record. One that ends exactly at ``end`` (after its comment) is preferred; else the
    last complete one, so bytes appended after a finished zip (torch still loads it: miniz scans
    back for the signature) are reported as appended data, not as a truncation."""
    window = min(end - start, _EOCD.size + MAX_COMMENT)
    if window < _EOCD.size:
        raise ZipFormatError(f"truncated: {end - start} bytes is too short for a zip end record")
    tail = os.pread(fd, window, end - window)
    pos = tail.rfind(EOCD_SIG)
    fallback = None
    while pos >= 0:
        if pos + _EOCD.size <= len(tail):
            comment_len = _EOCD.unpack_from(tail, pos)[7]
            if pos + _EOCD.size + comment_len == len(tail):
                return end - window + pos, tail[pos : pos + _EOCD.size]
            fallback = fallback or (end - window + pos, tail[pos : pos + _EOCD.size])
        pos = tail.rfind(EOCD_SIG, 0, pos)
    if fallback:
        return fallback
    raise ZipFormatError("truncated: no zip end record (the save was interrupted, or this is not a zip)")


def split_reason(reason: str) -> tuple[str, str]:
    """('incomplete'|'corrupt', message without its 'truncated: '/'corrupt: ' tag)."""
    tag, sep, rest = reason.partition(": ")
    if sep and tag == "truncated":
        return "incomplete", "truncated: " + rest
    if sep and tag == "corrupt":
        return "corrupt", rest
    return "corrupt", reason


def read_index(path: str, fd: int, start: int = 0, end: int | None = None) -> ZipIndex:
    """Parse end record (+ZIP64 records) and central directory of the zip in ``[start, end)``."""
    if end is None:
        end = os.fstat(fd).st_size
    eocd_at, raw = _find_eocd(fd, start, end)
    _sig, disk, cd_disk, _n_disk, n_total, cd_size, cd_offset, _clen = _EOCD.unpack(raw)
    if disk or cd_disk:
        raise ZipFormatError("multi-disk zip archives are not checkpoints")
    zip64 = False
    loc_at = eocd_at - _ZIP64_LOCATOR.size
    if loc_at >= start and os.pread(fd, 4, loc_at) == ZIP64_LOCATOR_SIG:
        _s, _d, z64_offset, _disks = _ZIP64_LOCATOR.unpack(os.pread(fd, _ZIP64_LOCATOR.size, loc_at))
        rec = os.pread(fd, _ZIP64_EOCD.size, start + z64_offset)
        if len(rec) < _ZIP64_EOCD.size or rec[:4] != ZIP64_EOCD_SIG:
            raise ZipFormatError("corrupt: the ZIP64 locator points at no ZIP64 end record")
        fields = _ZIP64_EOCD.unpack(rec)
        n_total, cd_size, cd_offset = fields[7], fields[8], fields[9]
        zip64 = True
    elif 0xFFFF in (n_total,) or 0xFFFFFFFF in (cd_size, cd_offset):
        raise ZipFormatError("truncated: ZIP64 end record expected but missing")
    cd_abs = start + cd_offset
    if cd_abs + cd_size > eocd_at or cd_abs < start:
        raise ZipFormatError(
            f"corrupt: central directory at {cd_offset:,} (+{cd_size:,} bytes) does not fit before the end record"
        )
    if n_total > MAX_MEMBERS:
        raise ZipFormatError(f"corrupt: central directory claims {n_total:,} members")
    cd = os.pread(fd, cd_size, cd_abs)
    members, seen, duplicates = [], set(), []
    pos = 0
    for i in range(n_total):
        if pos + _CENTRAL.size > len(cd) or cd[pos : pos + 4] != CENTRAL_SIG:
            raise ZipFormatError(f"corrupt: central directory entry {i} of {n_total} is damaged")
        f = _CENTRAL.unpack_from(cd, pos)
        flags, method, crc, csize, usize = f[3], f[4], f[7], f[8], f[9]
        name_len, extra_len, comment_len, offset = f[10], f[11], f[12], f[16]
        name_raw = cd[pos + 46 : pos + 46 + name_len]
        extra = cd[pos + 46 + name_len : pos + 46 + name_len + extra_len]
        usize, csize, offset = _apply_zip64_extra(extra, usize, csize, offset)
        name = name_raw.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        if name in seen:
            duplicates.append(name)
        seen.add(name)
        if start + offset + _LOCAL.size + csize > cd_abs:
            raise ZipFormatError(f"corrupt: member {name} (offset {offset:,}, {csize:,} bytes) overlaps the central directory")
        members.append(ZipMember(name, method, flags, crc, csize, usize, offset))
        pos += 46 + name_len + extra_len + comment_len
    return ZipIndex(path, start, eocd_at + _EOCD.size, members, zip64, duplicates)


def _apply_zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        if tag == 0x0001:
            vals = list(struct.unpack_from(f"<{size // 8}Q", extra, pos + 4))
            if usize == 0xFFFFFFFF and vals:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if offset == 0xFFFFFFFF and vals:
                offset = vals.pop(0)
        pos += 4 + size
    return usize, csize, offset


def locate_data(fd: int, index: ZipIndex) -> tuple[list[ZipMember], list[str]]:
    """Read each local header (30 bytes + names) to find where the payload starts.

    Returns the members with ``data_offset`` filled and a list of problems (a local header that
    is missing means the central directory points into garbage)."""
    located, problems = [], []
    for m in index.members:
        at = index.start + m.header_offset
        head = os.pread(fd, _LOCAL.size, at)
        if len(head) < _LOCAL.size or head[:4] != LOCAL_SIG:
            problems.append(f"corrupt: member {m.name} has no local header at offset {at:,}")
            continue
        name_len, extra_len = _LOCAL.unpack(head)[9:11]
        located.append(
            ZipMember(m.name, m.method, m.flags, m.crc32, m.compressed_bytes, m.size_bytes, m.header_offset,
                      at + _LOCAL.size + name_len + extra_len)
        )
    return located, problems


def read_member(fd: int, member: ZipMember, limit: int) -> bytes:
    """Payload of one located member (stored or deflated), CRC-checked; refuses above ``limit``."""
    if member.size_bytes > limit:
        raise ZipFormatError(f"{member.name} is {member.size_bytes:,} bytes (limit {limit:,})")
    raw = os.pread(fd, member.compressed_bytes, member.data_offset)
    if len(raw) < member.compressed_bytes:
        raise ZipFormatError(f"truncated: {member.name} has {len(raw):,} of {member.compressed_bytes:,} bytes")
    if member.method == 8:
        raw = zlib.decompressobj(-15).decompress(raw, limit + 1)
    elif member.method != 0:
        raise ZipFormatError(f"{member.name} uses zip compression method {member.method}, which torch never writes")
    if member.crc32 != NO_CRC and crc32(raw) != member.crc32:
        raise ZipFormatError(f"corrupt: CRC-32 of {member.name} does not match the central directory (bit rot or a partial "
                             f"overwrite)")
    return raw


# --- CRC-32 combination (zlib's crc32_combine, which Python's zlib module does not expose) ---

def _gf2_times(mat: tuple[int, ...], vec: int) -> int:
    total, i = 0, 0
    while vec:
        if vec & 1:
            total ^= mat[i]
        vec >>= 1
        i += 1
    return total


def _gf2_compose(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_gf2_times(a, b[n]) for n in range(32))


@lru_cache(maxsize=8)
def _append_zeros_operator(nbytes: int) -> tuple[int, ...]:
    """GF(2) matrix that advances a CRC-32 register over ``nbytes`` zero bytes."""
    op = (0xEDB88320,) + tuple(1 << n for n in range(31))  # one zero bit
    for _ in range(3):
        op = _gf2_compose(op, op)  # -> one zero byte
    result = tuple(1 << n for n in range(32))
    while nbytes:
        if nbytes & 1:
            result = _gf2_compose(op, result)
        nbytes >>= 1
        if nbytes:
            op = _gf2_compose(op, op)
    return result


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A+B from crc(A), crc(B) and len(B). The operator is cached per ``len2``, so
    chunks are laid out (see ``_chunks``) to make every joined piece exactly one chunk long."""
    return _gf2_times(_append_zeros_operator(len2), crc1) ^ crc2 if len2 > 0 else crc1


def _chunks(size: int) -> list[tuple[int, int]]:
    """(offset, length) pieces of a member: the odd-sized piece first, then full chunks."""
    head = size % CHUNK_BYTES
    pieces = [(0, head)] if head or not size else []
    return pieces + [(off, CHUNK_BYTES) for off in range(head, size, CHUNK_BYTES)]


def check_crcs(fd: int, members: list[ZipMember], workers: int | None = None) -> tuple[list[str], list[str]]:
    """CRC-32 of every located member against the central directory; returns (mismatch reasons,
    names of non-empty members that carry no CRC and so could not be checked).

    Stored members are split into 16 MiB chunks processed by a thread pool (zlib-ng releases the
    GIL); each chunk is CRC'd where it lies in the page cache, through a memory map of just that
    window - no copy into a buffer (``pread`` cost ~15 % of the check), and resident memory stays
    at one window per thread. Deflated members (never written by torch) are decompressed in one
    piece per member."""
    import mmap  # noqa: PLC0415 - only deep checks pay for these imports
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    if hasattr(os, "posix_fadvise"):  # a cold file: let the kernel read ahead in large requests
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    workers = workers or min(8, os.cpu_count() or 1)
    file_bytes = os.fstat(fd).st_size
    jobs = []  # (member index, chunk offset, chunk length)
    for i, m in enumerate(members):
        if m.method == 0:
            jobs.extend((i, off, length) for off, length in _chunks(m.compressed_bytes))
        else:
            jobs.append((i, -1, m.compressed_bytes))

    def crc_job(job: tuple[int, int, int]) -> tuple[int, int, int, int]:
        i, off, length = job
        m = members[i]
        if off < 0:
            raw = os.pread(fd, length, m.data_offset)
            try:
                data = zlib.decompress(raw, -15)
            except zlib.error:
                return i, off, -1, 0
            return i, off, crc32(data), len(raw)
        start = m.data_offset + off
        got = max(0, min(length, file_bytes - start))  # a truncated file ends inside the member
        if not got:
            return i, off, crc32(b""), 0
        skip = start % mmap.ALLOCATIONGRANULARITY  # a map starts on a page boundary
        with mmap.mmap(fd, skip + got, prot=mmap.PROT_READ, offset=start - skip) as window, \
                memoryview(window) as view:
            return i, off, crc32(view[skip:]), got

    parts: dict[int, list[tuple[int, int, int]]] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for i, off, crc, got in pool.map(crc_job, jobs):
            parts.setdefault(i, []).append((off, crc, got))
    problems, unchecked = [], []
    for i, m in enumerate(members):
        chunks = sorted(parts.get(i, []))
        got_total = sum(g for _o, _c, g in chunks)
        if any(c < 0 for _o, c, _g in chunks):
            problems.append(f"corrupt: {m.name} does not decompress")
            continue
        if got_total < m.compressed_bytes:
            problems.append(f"truncated: {m.name} has {got_total:,} of {m.compressed_bytes:,} bytes")
            continue
        if m.crc32 == NO_CRC and m.size_bytes:
            unchecked.append(m.name)
            continue
        crc = chunks[0][1]
        for _off, c, got in chunks[1:]:
            crc = crc32_combine(crc, c, got)  # every later piece is exactly CHUNK_BYTES
        if crc != m.crc32:
            problems.append(
                f"corrupt: CRC-32 of {m.name} is {crc:08x}, the central directory says {m.crc32:08x} "
                "(bytes changed after the save: zeroed block, bit rot or partial overwrite)"
            )
    return problems, unchecked
