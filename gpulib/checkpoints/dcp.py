"""torch.distributed.checkpoint (DCP) directories: ``.metadata`` + ``__<rank>_<i>.distcp`` shards.

The coordinator writes ``.metadata`` last (tmp file, fsync, rename) after every rank reported its
writes, so: no ``.metadata`` = the save did not finish; a leftover ``.metadata.tmp`` = it crashed
inside ``finish()`` (next to a ``.metadata``: a later save into the same folder did - its shards
replaced these, so the two indexes must agree). ``.metadata`` is a plain pickle (``torch.load``
never sees it, DCP calls ``pickle.load``), so it is read here with the stub unpickler. Its ``storage_data`` names, for
every item, the shard file, offset and length: each shard must exist and be at least
``offset + length`` long - on node-local disks, shards written by other nodes are simply absent.

Non-tensor items (``train_state``, dataloader state, ``step``) are ``torch.save`` bytes inside the
shard; the step counters among them are read (stub unpickler again) to get the step from content.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from gpulib.checkpoints import zipreader
from gpulib.checkpoints.contents import STEP_KEYS, ContentSummary, category_of, key_text
from gpulib.checkpoints.records import FileReport, TensorRecord
from gpulib.checkpoints.torch_save import inspect_legacy, inspect_zip, record_globals
from gpulib.safe_pickle import MAX_PICKLE_BYTES, DType, Opaque, stub_load

MAX_BYTES_ITEMS = 100_000


def is_dcp_dir(path: Path) -> bool:
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return ".metadata" in names or ".metadata.tmp" in names or any(n.endswith(".distcp") for n in names)


def _attrs(obj) -> dict:
    return obj.attrs() if isinstance(obj, Opaque) else (obj if isinstance(obj, dict) else {})


def _size_of(obj) -> list:
    if isinstance(obj, Opaque) and obj.args and isinstance(obj.args[0], (list, tuple)):
        return list(obj.args[0])
    return list(obj) if isinstance(obj, (list, tuple)) else []


def _dtype_of(properties) -> DType | None:
    """TensorProperties pickles its state as a tuple (dtype, layout, requires_grad, ...)."""
    state = properties.state if isinstance(properties, Opaque) else None
    if isinstance(state, tuple) and state and isinstance(state[0], DType):
        return state[0]
    dtype = _attrs(properties).get("dtype")
    return dtype if isinstance(dtype, DType) else None


def inspect_dcp(path: str | Path, deep: bool = False, other_dirs: list[Path] | None = None) -> FileReport:
    """``other_dirs``: copies of the same checkpoint dir on other nodes, searched for shards."""
    path = Path(path)
    report = FileReport(str(path), "dcp")
    dirs = [path, *(other_dirs or [])]
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        report.add("incomplete", f"cannot list the DCP directory: {exc.strerror or exc}")
        return report
    shards = [n for n in names if n.endswith(".distcp")]
    report.meta["shards_present"] = len(shards)
    if ".metadata.tmp" in names and ".metadata" not in names:
        report.add("incomplete", ".metadata.tmp left behind: the save crashed in finish(), before .metadata was renamed into "
                                 "place")
    meta_path = path / ".metadata"
    if ".metadata" not in names:
        rank_meta = [n for n in names if re.fullmatch(r"__\d+\.metadata", n)]
        hint = f" (per-rank {rank_meta[0]} found: a no-collective save)" if rank_meta else ""
        report.add("incomplete", "no .metadata: the coordinator writes it last, so this save never finished" + hint)
        return report
    try:
        size = meta_path.stat().st_size
        if size > MAX_PICKLE_BYTES:
            report.add("corrupt", f".metadata is {size:,} bytes (limit {MAX_PICKLE_BYTES:,})")
            return report
        data = meta_path.read_bytes()
    except OSError as exc:
        report.add("incomplete", f"cannot read .metadata: {exc.strerror or exc}")
        return report
    if not data:
        report.add("incomplete", ".metadata is empty (0 bytes)")
        return report
    result = stub_load(data)
    record_globals(report, result.globals, {}, ".metadata")
    report.findings = [f for f in report.findings if f.severity != "needs_allowlist"]  # DCP reads it with pickle
    if result.error:
        sev = "incomplete" if "truncated" in result.error or "Ran out" in result.error else "corrupt"
        report.add(sev, f".metadata does not unpickle: {result.error}")
        return report
    top = _attrs(result.obj)
    report.meta["version"] = top.get("version")
    sdm = _attrs(top.get("state_dict_metadata"))
    if not sdm or not isinstance(top.get("storage_data"), dict):
        report.add("corrupt", ".metadata has no state_dict_metadata/storage_data: not a DCP Metadata object")
        return report
    storage = top["storage_data"]
    if ".metadata.tmp" in names:
        _leftover_metadata_tmp(path / ".metadata.tmp", _layout(storage), report)
    summary = ContentSummary()
    cats = set()
    bytes_items = []
    for fqn, md in sdm.items():
        fqn = str(fqn)
        cat = category_of(fqn)
        cats.add("model" if cat == "model_or_other" else cat)
        a = _attrs(md)
        if isinstance(md, Opaque) and md._name == "TensorStorageMetadata":
            dtype = _dtype_of(a.get("properties"))
            shape = _size_of(a.get("size"))
            itemsize = dtype.itemsize if isinstance(dtype, DType) else 1
            numel = 1
            for d in shape:
                numel *= d if isinstance(d, int) else 0
            report.tensors.append(TensorRecord(fqn, dtype.name if isinstance(dtype, DType) else "?", shape, numel * itemsize))
            summary.tensors += 1
            summary.tensor_bytes += numel * itemsize
        else:
            bytes_items.append(fqn)
            report.values[fqn] = "<bytes item>"
    # every shard referenced must exist and be long enough
    need: dict[str, int] = {}
    items_of: dict[str, list] = {}
    for idx, info in storage.items():
        ia = _attrs(info)
        rel, off, length = ia.get("relative_path"), ia.get("offset"), ia.get("length")
        if not isinstance(rel, str) or not isinstance(off, int) or not isinstance(length, int) or off < 0 or length < 0:
            report.add("corrupt", f"storage entry for {key_text(_attrs(idx).get('fqn'))} is malformed")
            continue
        if os.path.basename(rel) != rel or rel in ("", ".", "..") or "\\" in rel or "\0" in rel:
            report.add("corrupt", f"storage entry for {key_text(_attrs(idx).get('fqn'))} names {key_text(rel)!r}, a path "
                                  "outside the checkpoint folder (dcp.load would read it): not opened")
            continue
        need[rel] = max(need.get(rel, 0), off + length)
        items_of.setdefault(rel, []).append((str(_attrs(idx).get("fqn")), off, length))
    report.meta["shards_expected"] = len(need)
    for rel in sorted(need):
        f = next((d / rel for d in dirs if (d / rel).exists()), path / rel)
        try:
            have = f.stat().st_size
        except FileNotFoundError:
            names = sorted({fqn for fqn, _o, _l in items_of[rel]})
            report.add("incomplete", f"shard {rel} is missing ({len(items_of[rel])} items: {', '.join(names[:3])}"
                       f"{', ...' if len(names) > 3 else ''})")
            continue
        except OSError as exc:
            report.add("incomplete", f"shard {rel}: {exc.strerror or exc}")
            continue
        if have < need[rel]:
            report.add("incomplete", f"shard {rel} has {have:,} of {need[rel]:,} bytes (truncated)")
    for d in dirs[1:]:
        try:
            shards += [n for n in os.listdir(d) if n.endswith(".distcp")]
        except OSError:
            pass
    _check_bytes_items(path, dirs, set(bytes_items), storage, report)
    extra = sorted(set(shards) - set(need))
    if extra:
        report.add("warning", f"{len(extra)} .distcp files are not referenced by .metadata (e.g. {extra[0]})")
    located = {rel: next((d for d in dirs if (d / rel).exists()), path) for rel in need}
    step_values = _read_items(located, bytes_items, items_of, storage, report)
    for key in STEP_KEYS:
        if key in step_values:
            summary.step, summary.step_key = step_values[key], key
            break
    summary.categories = sorted(cats)
    summary.top_keys = sorted({f.split(".")[0] for f in sdm})
    report.summary = summary
    if deep and report.valid:
        _deep_check(located, items_of, report)
    return report


def _layout(storage: dict) -> set[tuple]:
    """Where every item lies: (fqn, offset in the tensor, shard file, byte offset, byte length)."""
    out = set()
    for idx, info in storage.items():
        ia, ix = _attrs(info), _attrs(idx)
        out.add((str(ix.get("fqn")), repr(ix.get("offset")), ia.get("relative_path"), ia.get("offset"), ia.get("length")))
    return out


def _leftover_metadata_tmp(tmp: Path, layout: set[tuple], report: FileReport) -> None:
    """``.metadata.tmp`` next to a ``.metadata``: a later save into this same folder (a fixed
    ``checkpoint_id`` re-saved, an async save killed) wrote all its shards, then died in ``finish()``
    before renaming its index over the old one (torch deletes the old ``.metadata`` only after the
    tmp is fsynced). ``dcp.load`` reads the old ``.metadata`` - over the new shards. Same layout in
    both indexes: it loads (the later save's data). Another layout: the old offsets point into the
    wrong bytes, and the load fails or silently reads garbage - so that is blocking."""
    lead = ".metadata.tmp left behind next to .metadata: a later save into this same folder died before replacing it"
    try:
        data = tmp.read_bytes() if tmp.stat().st_size <= MAX_PICKLE_BYTES else b""
    except OSError as exc:
        report.add("warning", f"{lead}; cannot read it ({exc.strerror or exc}), so whether its shards still match .metadata "
                              "is unknown")
        return
    result = stub_load(data) if data else None
    later = _attrs(result.obj) if result and not result.error else {}
    if not isinstance(later.get("storage_data"), dict):
        report.add("warning", f"{lead}, and it is incomplete: whether the shards it rewrote still match .metadata is "
                              "unknown - dcp.load reads .metadata; compare the step it loads with the one you expect")
        return
    if _layout(later["storage_data"]) != layout:
        report.add("incomplete", f"{lead}, after rewriting the shards with another layout: the offsets in .metadata no "
                                 "longer point at its items, so dcp.load fails or reads the wrong bytes")
        return
    report.add("warning", f"{lead}; its shards have the same layout, so dcp.load (which reads .metadata) loads that later "
                          "save's data - delete the .tmp once you have resumed")


def _check_bytes_items(path: Path, dirs: list[Path], bytes_items: set[str], storage: dict, report: FileReport) -> None:
    """Every non-tensor item (``BytesStorageMetadata``) is ``torch.save`` bytes - a zip - unless a
    storage transform (compression, ...) was applied: ``dcp.load`` fails on one that does not start
    like one. One 4-byte read per item (at most MAX_BYTES_ITEMS), so a damaged item head is seen without --deep."""
    fds: dict[str, int | None] = {}
    try:
        for n, (idx, info) in enumerate(storage.items()):
            if n >= MAX_BYTES_ITEMS:
                break
            ia = _attrs(info)
            fqn, rel, off, length = str(_attrs(idx).get("fqn")), ia.get("relative_path"), ia.get("offset"), ia.get("length")
            if fqn not in bytes_items or ia.get("transform_descriptors") or not isinstance(rel, str) \
                    or not isinstance(off, int) or not isinstance(length, int) or length < 4:
                continue
            if rel not in fds:
                f = next((d / rel for d in dirs if (d / rel).is_file()), None)
                try:
                    fds[rel] = os.open(f, os.O_RDONLY) if f else None
                except OSError:
                    fds[rel] = None
            if fds[rel] is None:
                continue  # missing / unreadable: reported with the shard checks
            head = os.pread(fds[rel], 4, off)
            if len(head) == 4 and head != zipreader.LOCAL_SIG:
                report.add("corrupt", f"item {fqn} in {rel} (offset {off:,}) does not start like torch.save bytes "
                           f"(first bytes {head.hex(' ')}): dcp.load fails on it")
    except OSError as exc:
        report.add("incomplete", f"cannot read the items of {path}: {exc.strerror or exc}")
    finally:
        for fd in fds.values():
            if fd is not None:
                os.close(fd)


def _item_zip(fd: int, off: int, length: int) -> tuple[list, list[str]]:
    index = zipreader.read_index("", fd, off, off + length)
    return zipreader.locate_data(fd, index)


def _read_items(located: dict[str, Path], bytes_items: list[str], items_of: dict, storage: dict,
                report: FileReport) -> dict:
    """Judge every non-tensor item (``dcp.load`` hands each to ``torch.load(weights_only=False)``,
    whatever its name) with the same allowlist as a checkpoint file, and read the step counters
    among them. An item that cannot be judged (stored through a transform, past MAX_BYTES_ITEMS)
    is a reason for review, never a pass."""
    where = {fqn: (rel, off, length) for rel, items in items_of.items() for fqn, off, length in items}
    transformed = {key_text(_attrs(idx).get("fqn")) for idx, info in storage.items()
                   if _attrs(info).get("transform_descriptors")}
    found: dict = {}
    fds: dict[str, int] = {}
    try:
        for n, fqn in enumerate(bytes_items):
            if n >= MAX_BYTES_ITEMS:
                report.add("needs_review", f"{len(bytes_items):,} non-tensor items: only the first {MAX_BYTES_ITEMS:,} "
                                           "were judged (dcp.load unpickles every one it loads)")
                break
            if fqn not in where or where[fqn][0] not in located:
                continue  # its shard is missing: reported with the shard checks
            if fqn in transformed:
                report.add("needs_review", f"item {fqn} is stored through a transform (compression, ...): its pickle "
                                           "could not be judged, and dcp.load unpickles it")
                continue
            rel, off, length = where[fqn]
            if rel not in fds:
                try:
                    fds[rel] = os.open(located[rel] / rel, os.O_RDONLY)
                except OSError:
                    continue  # unreadable: reported with the shard checks
            sub = _judge_item(fds[rel], rel, fqn, off, length)
            report.findings.extend(f for f in sub.findings if f.severity in ("unsafe", "needs_review", "incomplete",
                                                                            "corrupt"))
            leaf = fqn.rsplit(".", 1)[-1]
            for k, v in sub.values.items():
                name = (k or leaf).rsplit(".", 1)[-1]
                if isinstance(v, int) and not isinstance(v, bool) and name in STEP_KEYS:
                    found.setdefault(name, v)
    finally:
        for fd in fds.values():
            os.close(fd)
    return found


def _judge_item(fd: int, rel: str, fqn: str, off: int, length: int) -> FileReport:
    """What ``torch.load`` of one item's bytes would unpickle: a torch.save zip's pickles, else the
    stacked pickles of the legacy reader (torch.load of bytes never tries the tar format)."""
    sub = FileReport(f"{rel}@{fqn}", "torch_zip")
    if os.pread(fd, 4, off) == zipreader.LOCAL_SIG:
        try:
            inspect_zip(sub, fd, off + length, False, start=off, end=off + length)
        except zipreader.ZipFormatError as exc:
            sub.add(*zipreader.split_reason(exc.reason))
        for f in sub.findings:
            f.message = f"item {fqn}: {f.message}"
        return sub
    if length > MAX_PICKLE_BYTES:
        sub.add("needs_review", f"item {fqn} in {rel} is {length:,} bytes and not a torch.save zip: its pickles were not "
                                "judged, and dcp.load unpickles them")
        return sub
    data = os.pread(fd, length, off)
    inspect_legacy(sub, io.BytesIO(data), len(data))
    for f in sub.findings:
        f.message = f"item {fqn} (not a torch.save zip: torch.load reads it as stacked pickles): {f.message}"
    return sub


def _deep_check(located: dict[str, Path], items_of: dict, report: FileReport) -> None:
    """CRC-32 of the torch.save zips inside the shards. Raw tensor items (the usual DCP payload)
    carry no checksum at all: they are counted, and the report says so."""
    checked, raw, unchecked = 0, 0, []
    for rel, items in sorted(items_of.items()):
        try:
            fd = os.open(located[rel] / rel, os.O_RDONLY)
        except OSError as exc:
            report.add("incomplete", f"shard {rel}: {exc.strerror or exc}")
            continue
        try:
            for fqn, off, length in items:
                if os.pread(fd, 4, off) != zipreader.LOCAL_SIG:
                    raw += 1  # raw tensor bytes (no container, no CRC)
                    continue
                try:
                    members, problems = _item_zip(fd, off, length)
                    crc_problems, no_crc = zipreader.check_crcs(fd, members)
                    problems += crc_problems
                    unchecked += no_crc
                    checked += len(members) - len(no_crc)
                except zipreader.ZipFormatError as exc:
                    problems = [exc.reason]
                for p in problems:
                    sev, msg = zipreader.split_reason(p)
                    report.add(sev, f"{rel} item {fqn}: {msg}")
        finally:
            os.close(fd)
    report.deep_checked = True
    report.meta["deep_checksummed_members"] = checked
    if raw or unchecked:
        report.add("warning", f"deep: CRC-32 checked {checked} zip members; {raw} raw tensor items"
                   f"{f' and {len(unchecked)} members without CRC' if unchecked else ''} carry no checksum in DCP "
                   "(a changed byte there is invisible - `gpulib ckpt seal` records checksums)")
