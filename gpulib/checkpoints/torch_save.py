"""``torch.save`` files (zip since torch 1.6, and the legacy stacked-pickle format), inspected
without importing torch and without reading tensor bytes.

Zip: end record + central directory (:mod:`zipreader`), then only ``<root>/data.pkl`` (tens of
KB even for a multi-GB file) through the stub unpickler. Integrity without data: every storage
named in ``data.pkl`` must exist as ``<root>/data/<key>`` with exactly ``numel x itemsize`` bytes
(this also catches the CVE-2026-24747 class of declared-size mismatch). ``deep`` adds the CRC-32
of every member, the only way to catch a zeroed block (``torch.load`` never checks CRCs).

Legacy: magic number, protocol, sys_info, the object pickle, the storage key list, then per
storage an int64 element count and the raw bytes; the headers are hopped over with seeks and
the last one must end exactly at the end of the file.
"""

from __future__ import annotations

import io
import os
import struct

from gpulib.checkpoints import zipreader
from gpulib.checkpoints.contents import key_text, summarise, walk
from gpulib.checkpoints.records import MAX_VALUES, FileReport, GlobalRecord, TensorRecord
from gpulib.safe_pickle import (
    MAX_PICKLE_BYTES,
    NUMPY_DTYPE_CLASSES,
    Budget,
    BudgetExceeded,
    NDArrayInfo,
    StubResult,
    TensorInfo,
    classify_global,
    memory_budget,
    stub_load,
)

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
SMALL_RECORDS = ("byteorder", ".format_version", ".storage_alignment", "version", ".data/serialization_id")


def allowlist_advice(globals_: list[GlobalRecord], numpy_dtypes: set[str]) -> list[str]:
    """Exactly what ``torch.serialization.add_safe_globals`` needs for this file: the known
    data-only types it names, plus the ``numpy.dtypes`` class of every numpy dtype it rebuilds
    (``weights_only`` checks the dtype's class too). Unknown globals are never in it."""
    names = {f"{g.module}.{g.name}" for g in globals_ if g.verdict == "needs_allowlist"}
    if any(g.module == "numpy" and g.name == "dtype" for g in globals_):
        names |= {f"numpy.dtypes.{NUMPY_DTYPE_CLASSES[c]}" for c in numpy_dtypes if c in NUMPY_DTYPE_CLASSES}
    return sorted(names)


def record_globals(report: FileReport, seen: dict, nested: dict, what: str, numpy_dtypes: set[str] = frozenset()) -> None:
    """Classify every global a pickle named: dangerous ones are ``unsafe``, unknown ones
    ``needs_review`` (allowlist policy), known data types go into the ``add_safe_globals`` advice."""
    merged = dict(seen)
    for g, n in nested.items():
        merged[g] = merged.get(g, 0) + n
    if nested:
        report.add("unsafe", f"{what} holds a nested pickle (pickle-in-pickle); its globals are listed too")
    review = set()
    for (module, name), count in sorted(merged.items()):
        verdict, why = classify_global(module, name)
        report.globals.append(GlobalRecord(module, name, count, verdict, why))
        if verdict == "dangerous":
            report.add("unsafe", f"{what} names {module}.{name} ({why}); it was NOT run - never torch.load this file with "
                                 f"weights_only=False")
        elif verdict == "needs_review":
            review.add(f"{module}.{name}")
    review = sorted(review)
    if review:
        report.add("needs_review", f"{what} names {', '.join(review[:6])}{', ...' if len(review) > 6 else ''}, not known to "
                   "gpulib as safe: torch.load(weights_only=True) refuses it and weights_only=False would run it - review "
                   "that code first")
    allow = allowlist_advice(report.globals, numpy_dtypes)
    fresh = allow != report.meta.get("add_safe_globals")
    report.meta["add_safe_globals"] = allow
    if allow and fresh:
        report.add("needs_allowlist", "torch.load(weights_only=True) will refuse this file; if you trust it: "
                   f"torch.serialization.add_safe_globals([{', '.join(allow)}])")


def fill_from_pickle(report: FileReport, result: StubResult, what: str) -> None:
    """Tensors, scalar values, globals (classified) and the content summary of one pickle."""
    w = walk(result.obj, result.budget)
    record_globals(report, result.globals, w.nested_globals, what, result.numpy_dtypes)
    scan = result.scan
    if scan and scan.unsupported_by_weights_only and not scan.refusal():
        ops = ", ".join(sorted(scan.unsupported_by_weights_only)[:5])
        report.add("warning", f"{what} is a protocol-{scan.protocol} pickle using opcodes torch.load(weights_only=True) "
                   f"does not implement ({ops}): torch refuses it; only weights_only=False (which runs code) reads it")
    others = []
    for e in w.entries:
        if isinstance(e.value, TensorInfo):
            t = e.value
            report.tensors.append(TensorRecord(e.path, t.dtype, list(t.shape), t.nbytes,
                                               t.storage.key if t.storage else None,
                                               t.storage.location if t.storage else None))
        else:
            v = e.value
            others.append((e.path, f"ndarray{list(v.shape)} {v.dtype}" if isinstance(v, NDArrayInfo) else v))
    # keep the shallowest entries (epoch, global_step, scaler.scale, ...) when there are too many
    keep = sorted(range(len(others)), key=lambda i: (others[i][0].count(".") + others[i][0].count("["), i))[:MAX_VALUES]
    report.values = dict(others[i] for i in sorted(keep))
    for p in w.problems:
        report.add("warning", p)
    report.summary = summarise(w)
    if isinstance(result.obj, dict) and not result.error:  # every top-level key, even past the walk's entry limit
        report.summary.top_keys = [key_text(k) for k in result.obj]
    if w.over_budget:
        report.add("unsafe", f"{what}: listing its contents stopped: {w.over_budget}")
    if result.error and result.error.startswith("refused "):
        report.add("unsafe", f"{what}: {result.error}")
        return
    if result.error and "BUILD on the global" in result.error:
        report.add("unsafe", f"{what} tries to set attributes on a global ({result.error}): a known scanner-bypass trick")
    if result.error:
        if any(k in result.error for k in ("truncated", "EOF", "Ran out")):
            report.add("incomplete", f"truncated: {what} ends early ({result.error}): the save was interrupted")
        else:
            report.add("corrupt", f"{what} does not unpickle: {result.error}")


def classify_pickle(report: FileReport, result: StubResult, what: str) -> None:
    """The globals of one pickle that is not the object pickle (a legacy file's magic number,
    protocol, sys_info and storage keys; a tar file's; another ``.pkl`` in a zip): torch
    unpickles each with the real unpickler, so each is judged with the same allowlist."""
    record_globals(report, result.globals, {}, what, result.numpy_dtypes)
    if result.error and result.error.startswith("refused "):
        report.add("unsafe", f"{what}: {result.error}")


def inspect_zip(report: FileReport, fd: int, size: int, deep: bool, start: int = 0, end: int | None = None) -> None:
    try:
        index = zipreader.read_index(report.path, fd, start, end)
    except zipreader.ZipFormatError as exc:
        report.add(*zipreader.split_reason(exc.reason))
        return
    report.meta.update(zip64=index.zip64, members=len(index.members))
    if end is None and index.end != size:
        report.add("warning", f"{size - index.end:,} bytes follow the zip end record (appended after a complete save; "
                   "torch still loads it - check what wrote them)")
    if index.duplicates:
        report.add("corrupt", f"duplicate zip members {index.duplicates[:3]}: torch and other readers may pick different ones")
    budget = Budget(memory_budget((end if end is not None else size) - start))
    members, problems = zipreader.locate_data(fd, index)
    pkls = [m.name for m in index.members if m.name.endswith("/data.pkl") and m.name.count("/") == 1]
    root = pkls[0][: -len("data.pkl")] if pkls else None
    # the one read below (the last of duplicates); with two roots or duplicates torch may read any: all are judged
    main_pkl = {m.name: m for m in members}.get(f"{root}data.pkl") if len(pkls) == 1 and not index.duplicates else None
    _other_pickles(report, fd, [m for m in members if m.name.endswith(".pkl") and m is not main_pkl], budget)
    if len(pkls) != 1:
        report.add("corrupt", f"expected exactly one <root>/data.pkl, found {len(pkls)}: not a torch.save archive")
        return
    names = {m.name for m in index.members}
    if root + "constants.pkl" in names:
        report.format = "torchscript"
        report.add("unsafe", "TorchScript archive: torch.load hands it to torch.jit.load, which runs its code")
    for p in problems:
        report.add(*zipreader.split_reason(p))
    by_name = {m.name: m for m in members}
    for rec in SMALL_RECORDS:
        m = by_name.get(root + rec)
        if m is not None and m.size_bytes <= 256:
            try:
                value = zipreader.read_member(fd, m, 256).decode("ascii", "replace").strip()
                report.meta[rec.lstrip(".").replace(".data/", "")] = value
            except zipreader.ZipFormatError as exc:
                report.add(*zipreader.split_reason(exc.reason))
    if root + "data.pkl" not in by_name:
        return
    try:
        pkl = zipreader.read_member(fd, by_name[root + "data.pkl"], min(MAX_PICKLE_BYTES, budget.limit))
        budget.charge(len(pkl), "data.pkl")
    except zipreader.ZipFormatError as exc:
        report.add(*zipreader.split_reason(exc.reason))
        return
    except BudgetExceeded as exc:
        report.add("unsafe", f"data.pkl: refused before unpickling: {exc}")
        return
    result = stub_load(pkl, budget=budget)
    fill_from_pickle(report, result, "data.pkl")
    referenced = set()
    for key, ref in sorted(result.storages.items(), key=lambda kv: (len(kv[0]), kv[0])):
        referenced.add(root + "data/" + key)
        m = by_name.get(root + "data/" + key)
        if m is None:
            report.add("incomplete", f"storage {key} ({ref.nbytes:,} bytes, {ref.dtype}) is missing from the archive")
        elif m.size_bytes != ref.nbytes:
            report.add("corrupt" if m.size_bytes > ref.nbytes else "incomplete",
                       f"storage {key} has {m.size_bytes:,} of {ref.nbytes:,} bytes ({ref.numel:,} x {ref.itemsize}-byte "
                       f"{ref.dtype})")
    extra = [n for n in names if n.startswith(root + "data/") and n not in referenced]
    if extra and not result.error:
        report.add("warning", f"{len(extra)} storages in the archive are not referenced by data.pkl (e.g. {extra[0]})")
    if deep:
        problems, unchecked = zipreader.check_crcs(fd, members)
        for p in problems:
            report.add(*zipreader.split_reason(p))
        report.deep_checked = True
        note_coverage(report, len(members) - len(unchecked), len(members), unchecked)


MAX_OTHER_PICKLES = 64


def _other_pickles(report: FileReport, fd: int, members: list, budget: Budget) -> None:
    """Every ``.pkl`` member besides ``<root>/data.pkl`` (TorchScript's ``constants.pkl``, a second
    root's ``data.pkl``, anything added): another loader of the archive may unpickle it, so each is
    judged with the same allowlist. One that cannot be read or judged is a reason not to trust it."""
    for m in members[:MAX_OTHER_PICKLES]:
        try:
            data = zipreader.read_member(fd, m, min(MAX_PICKLE_BYTES, budget.limit))
            budget.charge(len(data), m.name)
        except zipreader.ZipFormatError as exc:
            report.add("needs_review", f"{m.name}: a pickle in the archive that could not be read ({exc.reason}), so it "
                                       "could not be judged")
            continue
        except BudgetExceeded as exc:
            report.add("unsafe", f"{m.name}: refused before unpickling: {exc}")
            return
        classify_pickle(report, stub_load(data, budget=budget), m.name)
    if len(members) > MAX_OTHER_PICKLES:
        report.add("needs_review", f"{len(members):,} .pkl members besides data.pkl: only the first {MAX_OTHER_PICKLES} "
                                   "were judged")


def note_coverage(report: FileReport, checked: int, total: int, unchecked: list[str]) -> None:
    """Say what ``--deep`` could actually look at: a VALID without a checksum is not a proof."""
    report.meta["deep_checksummed_members"] = checked
    report.meta["deep_members"] = total
    if unchecked:
        report.add("warning", f"deep: CRC-32 checked {checked} of {total} members; {len(unchecked)} carry no CRC "
                   f"(saved with compute_crc32=False, e.g. {unchecked[0]}): a changed byte there is invisible - "
                   "`gpulib ckpt seal` records checksums")
    else:
        report.add("info", f"deep: CRC-32 checked all {total} members")


def inspect_legacy(report: FileReport, fh, size: int) -> None:
    """Legacy stacked pickles, or a plain pickle when the first value is not torch's magic. torch's
    ``_legacy_load`` unpickles all five (magic number, protocol, sys_info, the object, the storage
    keys) with the real unpickler, so each is judged, not only the object. ``fh``: a binary file
    or a BytesIO (a DCP item, which torch.load reads from memory)."""
    budget = Budget(memory_budget(size))
    first = stub_load(fh, budget=budget)
    if first.error or first.obj != LEGACY_MAGIC:
        report.format = "pickle"
        fill_from_pickle(report, first, "pickle")
        if not first.error and fh.tell() != size:
            report.add("warning", f"{size - fh.tell():,} bytes follow the pickle (not a torch.save file)")
        return
    report.format = "torch_legacy"
    classify_pickle(report, first, "magic-number pickle")
    proto = stub_load(fh, budget=budget)
    classify_pickle(report, proto, "protocol pickle")
    if proto.obj != LEGACY_PROTOCOL:
        report.add("corrupt", f"legacy torch file: protocol {_shown(proto.obj)}, expected {LEGACY_PROTOCOL} "
                              f"({proto.error or 'wrong value'})")
        return
    sys_info = stub_load(fh, budget=budget)
    classify_pickle(report, sys_info, "sys_info pickle")
    if sys_info.error:
        report.add("corrupt", f"legacy torch file: the sys_info pickle does not unpickle ({sys_info.error})")
        return
    if isinstance(sys_info.obj, dict):
        report.meta["little_endian"] = sys_info.obj.get("little_endian")
    obj = stub_load(fh, budget=budget)
    fill_from_pickle(report, obj, "object pickle")
    if obj.error:
        return
    keys = stub_load(fh, budget=budget)
    classify_pickle(report, keys, "storage-key pickle")
    if keys.error or not isinstance(keys.obj, list):
        report.add("incomplete", f"legacy torch file: storage key list unreadable ({keys.error or 'not a list'})")
        return
    pos = fh.tell()
    fh.seek(0, os.SEEK_END)
    size = fh.tell()  # the window torch.load reads (a DCP item is one inside its shard)
    for key in keys.obj:
        ref = obj.storages.get(key_text(key))
        if ref is None:
            report.add("corrupt", f"legacy torch file: storage key {_shown(key)} is not one the object pickle names "
                                  "(torch.load raises KeyError)")
            return
        fh.seek(pos)
        head = fh.read(8)
        if len(head) < 8:
            report.add("incomplete", f"legacy torch file ends before storage {_shown(key)} (at byte {pos:,} of {size:,})")
            return
        numel = struct.unpack("<q", head)[0]
        itemsize = ref.itemsize
        need = numel * itemsize
        if numel < 0 or pos + 8 + need > size:
            report.add("incomplete", f"storage {_shown(key)} has {max(0, size - pos - 8):,} of {need:,} bytes (the file is "
                                     "truncated)")
            return
        if ref.numel != numel:
            report.add("corrupt", f"storage {_shown(key)}: header says {numel:,} elements, data.pkl says {ref.numel:,}")
        pos += 8 + need
    if pos != size:
        report.add("warning", f"{size - pos:,} bytes follow the last storage")


def _shown(value) -> str:
    """A value from a pickle, short enough for a message (a 5,000-digit int cannot even be printed)."""
    return key_text(value) if isinstance(value, (int, str)) else f"<{type(value).__name__}>"


MAX_TAR_RECORDS = 1_000_000


def inspect_tar(report: FileReport, fh: io.BufferedReader, size: int) -> bool:
    """The pre-1.0 tar format (members ``storages``, ``tensors``, ``pickle``; found by
    :func:`gpulib.checkpoints.files.looks_like_tar`), as torch's ``legacy_load`` reads it: every
    pickle it would unpickle is judged. False when tarfile does not accept the file after all
    (torch then reads it as stacked pickles, and so does the caller)."""
    import tarfile  # noqa: PLC0415 - only a file that passes looks_like_tar pays for it

    fh.seek(0)
    try:
        tar = tarfile.open(fileobj=fh, mode="r:", format=tarfile.PAX_FORMAT)
    except tarfile.TarError:
        fh.seek(0)
        return False
    report.format = "torch_tar"
    report.add("warning", "the pre-1.0 tar format: torch.load(weights_only=True) refuses it; only weights_only=False "
                          "(which runs its pickles) reads it")
    budget = Budget(memory_budget(size))
    try:
        with tar:
            for name in ("storages", "tensors", "pickle"):
                try:
                    member = tar.getmember(name)
                except KeyError:
                    report.add("corrupt", f"tar-format torch file without a {name!r} member: torch.load raises KeyError")
                    return True
                if not member.isfile():
                    report.add("unsafe", f"tar member {name!r} is not a regular file ({member.linkname or member.type!r}): "
                                         "torch.load extracts it and reads what it points at")
                    return True
                stream = tar.extractfile(member)
                if not _tar_member(report, stream, name, budget):
                    return True
    except (tarfile.TarError, OSError, EOFError, struct.error, ValueError) as exc:
        report.add("corrupt", f"tar-format torch file unreadable: {type(exc).__name__}: {exc}")
    return True


def _tar_member(report: FileReport, f, name: str, budget: Budget) -> bool:
    """Judge the pickles of one member in torch's order; False when it cannot be followed further."""
    if name == "pickle":
        fill_from_pickle(report, stub_load(f, budget=budget), "tar member 'pickle'")
        return True
    count = stub_load(f, budget=budget)
    classify_pickle(report, count, f"tar member {name!r} (count)")
    if count.error or not isinstance(count.obj, int) or isinstance(count.obj, bool) or not 0 <= count.obj <= MAX_TAR_RECORDS:
        report.add("corrupt", f"tar member {name!r}: the record count is {_shown(count.obj)} ({count.error or 'not a count'})")
        return False
    for i in range(count.obj):
        rec = stub_load(f, budget=budget)
        classify_pickle(report, rec, f"tar member {name!r} (record {i})")
        args = rec.obj
        if rec.error or not isinstance(args, tuple) or len(args) != 3:
            report.add("corrupt", f"tar member {name!r}: record {i} is not a 3-tuple ({rec.error or _shown(args)})")
            return False
        if name == "storages":  # int64 element count, then the bytes
            numel = struct.unpack("<q", f.read(8))[0]
            itemsize = getattr(args[2], "itemsize", 1)
            if numel < 0:
                raise ValueError(f"storage {i} has {numel} elements")
            f.seek(numel * itemsize, 1)
        else:  # int32 ndim, 4 bytes, ndim sizes and strides, an offset
            ndim = struct.unpack("<i", f.read(4))[0]
            if not 0 <= ndim <= 64:
                raise ValueError(f"tensor {i} has {ndim} dimensions")
            f.seek(4 + 16 * ndim + 8, 1)
    if name == "storages":
        classify_pickle(report, stub_load(f, budget=budget), "tar member 'storages' (views)")
    return True
