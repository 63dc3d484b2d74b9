"""Builders of hostile checkpoints, one per kind of attack, each with the real loader that falls for it.

Every payload is ``builtins.eval("exec(<write the sentinel file>) or <the value torch expects>")``:
no shell, nothing outside the test's tmp folder, and the load goes on as if nothing happened (the
realistic case: the victim never notices). ``Case.loader`` names how the real framework opens the
thing (``real_loader.py`` runs it in a subprocess with torch); ``None`` for the kinds that attack
the reader itself (memory bombs) rather than carry code. Tensors are tiny: building all of them
takes a few seconds.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import struct
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001


@dataclass
class Case:
    """One hostile checkpoint. ``path``: the file or folder gpulib is given; ``newer``: what
    ``ckpt latest`` sees beside a good older checkpoint (a folder holding both)."""

    name: str
    path: Path
    load_path: Path  # what the real loader opens (the hostile file inside a framework folder)
    loader: str | None  # torch_load | dcp_load | dcp_metadata | refused (the real loader must refuse it)
    sentinel: Path | None
    series: Path  # a folder with a good step-100 checkpoint and this one as step 200
    good: str  # the name of the good one in ``series``


class Payload:
    """Unpickles to ``value`` after writing ``sentinel`` (through eval + exec, no shell)."""

    def __init__(self, sentinel: Path, value=None):
        self.sentinel, self.value = sentinel, value

    def __reduce__(self):
        code = f"open({str(self.sentinel)!r}, 'w').write('ran')"
        return eval, (f"exec({code!r}) or {self.value!r}",)


def _payload_pickle(sentinel: Path, value=None, protocol: int = 2) -> bytes:
    return pickle.dumps(Payload(sentinel, value), protocol=protocol)


def _legacy(pickles: list[bytes]) -> bytes:
    """A legacy (pre-1.6) torch.save file without tensors: magic, protocol, sys_info, object, keys."""
    return b"".join(pickles)


def _legacy_parts(obj_pickle: bytes | None = None) -> list[bytes]:
    sys_info = {"protocol_version": LEGACY_PROTOCOL, "little_endian": True,
                "type_sizes": {"short": 2, "int": 4, "long": 4}}
    return [pickle.dumps(LEGACY_MAGIC, protocol=2), pickle.dumps(LEGACY_PROTOCOL, protocol=2),
            pickle.dumps(sys_info, protocol=2), obj_pickle or pickle.dumps({"step": 200}, protocol=2),
            pickle.dumps([], protocol=2)]


def _zip_state(torch, sentinel: Path | None, where: str) -> bytes:
    """torch.save bytes of a small state; the payload sits under ``where`` (or nowhere)."""
    state = {"model": {"w": torch.zeros(2)}, "step": 200}
    if sentinel is not None:
        state[where] = Payload(sentinel, 0)
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _rewrite_zip(data: bytes, replace: dict[str, bytes | None], add: list[tuple[str, bytes]] = (),
                 first: list[tuple[str, bytes]] = ()) -> bytes:
    """A copy of a zip with members replaced (None: dropped), added at the end or at the front."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for name, blob in first:
            dst.writestr(name, blob)
        for info in src.infolist():
            blob = replace.get(info.filename, src.read(info)) if info.filename in replace else src.read(info)
            if blob is not None:
                dst.writestr(info.filename, blob)
        for name, blob in add:
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a duplicate name is the point of one case
                dst.writestr(name, blob)
    return out.getvalue()


def _data_pkl_name(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return next(n for n in z.namelist() if n.endswith("/data.pkl"))


# --- tar format ------------------------------------------------------------------------------

def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, blob in members:
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return buf.getvalue()


def _tar_checkpoint(sentinel: Path, where: str) -> bytes:
    """The pre-1.0 format: storages (count, records, views), tensors (count, records), pickle."""
    count = _payload_pickle(sentinel, 0) if where == "storages" else pickle.dumps(0, protocol=2)
    storages = count + pickle.dumps([], protocol=2)
    tensors = pickle.dumps(0, protocol=2) if where != "tensors" else _payload_pickle(sentinel, 0)
    obj = pickle.dumps({"step": 200}, protocol=2) if where != "pickle" else _payload_pickle(sentinel, {"step": 200})
    return _tar([("storages", storages), ("tensors", tensors), ("pickle", obj)])


def _tar_polyglot(sentinel: Path) -> bytes:
    """Benign legacy pickles at the front, and the whole file a tar whose ``storages`` carries the
    payload: the front is magic, protocol, then a sys_info BINSTRING that swallows the rest of the
    first tar header; the first member's data holds its STOP, an object and a key list."""
    opener = pickle.dumps(LEGACY_MAGIC, protocol=2) + pickle.dumps(LEGACY_PROTOCOL, protocol=2) + b"\x80\x02T"
    name_field = opener + struct.pack("<I", 512 - len(opener) - 4)
    tail = b"." + pickle.dumps({"step": 200}, protocol=2) + pickle.dumps([], protocol=2)
    blob = _tar([("x", tail.ljust(512, b"\0")), ("storages", _payload_pickle(sentinel, 0) + pickle.dumps([], protocol=2)),
                 ("tensors", pickle.dumps(0, protocol=2)), ("pickle", pickle.dumps({"step": 200}, protocol=2))])
    first = bytearray(blob[:512])
    first[:100] = name_field.ljust(100, b"\0")
    first[148:156] = b" " * 8
    first[148:155] = b"%06o\0" % sum(first)
    return bytes(first) + blob[512:]


# --- safetensors -----------------------------------------------------------------------------

def _safetensors(header_json: bytes, data: bytes = b"\0" * 8) -> bytes:
    return struct.pack("<Q", len(header_json)) + header_json + data


def _deep_json(depth: int) -> bytes:
    return b'{"w": ' + b"[" * depth + b"]" * depth + b"}"


# --- the cases -------------------------------------------------------------------------------

def build(root: Path, torch) -> list[Case]:
    """Every hostile kind under ``root``; needs torch (to write real torch.save / DCP data)."""
    root.mkdir(parents=True, exist_ok=True)
    sentinels = root / "sentinels"
    sentinels.mkdir(exist_ok=True)
    templates = _templates(root / "templates", torch)
    cases: list[Case] = []

    def add(name: str, loader: str | None, write, layout: str = "file", payload: bool = True, file_name: str = "") -> None:
        sentinel = sentinels / name if payload else None
        series = root / "series" / name
        series.mkdir(parents=True)
        good, target = _place(series, layout, templates)
        write(target, sentinel)
        if layout == "accelerate" and not (series / good / file_name).exists():  # a kind the run registered: both have it
            torch.save({"state": {}}, series / good / file_name)
        load_path = target / file_name if file_name else target
        cases.append(Case(name, target, load_path, loader, sentinel, series, good))

    def file(blob_of):
        return lambda target, s: target.write_bytes(blob_of(s))

    # legacy: a payload in each of the five pickles
    for i, part in enumerate(("magic", "protocol", "sys_info", "object", "keys")):
        values = [LEGACY_MAGIC, LEGACY_PROTOCOL, {"little_endian": True}, {"step": 200}, []]

        def legacy(s, i=i, values=values):
            parts = _legacy_parts()
            parts[i] = _payload_pickle(s, values[i])
            return _legacy(parts)
        add(f"legacy_{part}_pickle", "torch_load", file(legacy))
    add("legacy_object_protocol4_memo", "torch_load", file(lambda s: _legacy(
        _legacy_parts()[:3] + [_payload_pickle(s, {"step": 200}, protocol=4), pickle.dumps([], protocol=2)])))
    add("plain_pickle_as_pt", "torch_load", file(lambda s: _payload_pickle(s, {"step": 200})))
    add("protocol0_text_pickle", "torch_load", file(lambda s: (
        b"c__builtin__\neval\n(V" + f"exec({f'open({str(s)!r}, {chr(39)}w{chr(39)}).write({chr(39)}ran{chr(39)})'!r}) or 0"
        .encode() + b"\ntR.")))
    add("protocol0_getattr_chain", "torch_load", file(lambda s: (  # the stand-in of getattr(...) is not callable
        b"c__builtin__\ngetattr\n(c__builtin__\n__import__\n(Vbuiltins\ntRVexec\ntR(V"
        + f"open({str(s)!r}, 'w').write('ran')".encode() + b"\ntR.")))
    add("pickle_framed_without_proto", "torch_load", file(lambda s: (  # no PROTO: starts with FRAME, not 0x80
        b"\x95" + struct.pack("<Q", 0) + _payload_pickle(s, 0, protocol=4)[2:])))
    # tar format
    add("tar_payload_in_pickle", "torch_load", file(lambda s: _tar_checkpoint(s, "pickle")))
    add("tar_payload_in_tensors", "torch_load", file(lambda s: _tar_checkpoint(s, "tensors")))
    add("tar_payload_in_storages", "torch_load", file(lambda s: _tar_checkpoint(s, "storages")))
    add("tar_polyglot_legacy_front", "torch_load", file(_tar_polyglot))
    # zip
    good_zip = _zip_state(torch, None, "")
    add("zip_data_pkl", "torch_load", file(lambda s: _zip_state(torch, s, "extra")))
    add("zip_payload_in_optimizer_key", "torch_load", file(lambda s: _zip_state(torch, s, "optimizer")))

    def nested(s):
        """data.pkl calls torch.storage._load_from_bytes on a legacy pickle that carries the payload."""
        state = {"model": {"w": torch.zeros(2)}, "step": 200, "extra": _Nested(_payload_pickle(s, 0))}
        buf = io.BytesIO()
        torch.save(state, buf)
        return buf.getvalue()
    add("zip_nested_load_from_bytes", "torch_load", file(nested))

    def duplicate(s):
        name = _data_pkl_name(good_zip)
        evil = zipfile.ZipFile(io.BytesIO(_zip_state(torch, s, "extra"))).read(_data_pkl_name(_zip_state(torch, s, "extra")))
        return _rewrite_zip(good_zip, {}, add=[(name, evil)])
    add("zip_duplicate_data_pkl", "torch_load", file(duplicate))

    def unknown_gadget(s):
        """dataclasses._create_fn (on no denylist) builds a function from source; REDUCE then calls it."""
        code = f"open({str(s)!r}, 'w').write('ran')"
        gadget = (b"\x80\x02}q\x00(X\x04\x00\x00\x00stepK\xc8X\x05\x00\x00\x00extracdataclasses\n_create_fn\n"
                  + b"X\x01\x00\x00\x00f]" + b"]X" + struct.pack("<I", len("return " + code)) + ("return " + code).encode()
                  + b"a\x87R)Ru.")
        return _rewrite_zip(good_zip, {_data_pkl_name(good_zip): gadget})
    add("zip_unknown_gadget_needs_review", "torch_load", file(unknown_gadget))
    # DCP
    add("dcp_metadata_payload", "dcp_load", lambda t, s: _dcp(t, torch, s, "metadata"), layout="dcp")
    add("dcp_item_under_any_name", "dcp_load", lambda t, s: _dcp(t, torch, s, "zz_extra"), layout="dcp")
    add("dcp_item_train_state", "dcp_load", lambda t, s: _dcp(t, torch, s, "train_state"), layout="dcp")
    add("dcp_item_plain_pickle_bytes", "dcp_load", lambda t, s: _dcp(t, torch, s, "plain"), layout="dcp")
    # framework folders: a payload in a file the resume opens, or that it does not
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "rng_state_3.pth", "scaler.pt", "training_args.bin",
                 "extra_state.pt"):
        add(f"hf_{name.replace('.', '_')}", "torch_load", _folder_file(name, torch), layout="hf", file_name=name)
    for name in ("optimizer.bin", "random_states_0.pkl", "custom_checkpoint_0.pkl", "scheduler.bin"):
        add(f"accelerate_{name.replace('.', '_')}", "torch_load", _folder_file(name, torch), layout="accelerate",
            file_name=name)
    for name in ("mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        add(f"deepspeed_{name.split('.')[0]}", "torch_load", _folder_file(name, torch), layout="deepspeed",
            file_name=name)
    def index_outside(folder: Path, sentinel: Path) -> None:
        """The sharded-weights index names ../shard.bin: transformers torch.loads whatever is there."""
        (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {"w": "../shard.bin"}}))
        _folder_file("shard.bin", torch)(folder.parent, sentinel)
    add("hf_index_names_a_shard_outside", "torch_load", index_outside, layout="hf_weights", file_name="../shard.bin")
    # not a checkpoint at all
    add("json_as_pt", "refused", file(lambda s: json.dumps({"error": "403 Forbidden", "step": 300}).encode()),
        payload=False)
    add("text_log_starting_with_bracket", "refused", file(lambda s: b"[rank0]: step 300 loss 2.1\n" * 4), payload=False)
    add("json_as_model_safetensors", "safetensors_load", lambda t, s: (t / "model.safetensors").write_bytes(
        json.dumps({"error": "403 Forbidden", "step": 300}).encode()), layout="hf_weights", payload=False,
        file_name="model.safetensors")
    # malformed safetensors headers (the real reader refuses each)
    for name, header in (
        ("offsets_strings", b'{"w":{"dtype":"F32","shape":[2],"data_offsets":["a","b"]}}'),
        ("offsets_null", b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,null]}}'),
        ("offsets_5000_digits", b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,' + b"9" * 5000 + b"]}}"),
        ("deep_json_200k", _deep_json(200_000)),
        ("metadata_not_strings", b'{"__metadata__":{"step":300},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'),
        ("offsets_reversed", b'{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}'),
        ("shape_bool", b'{"w":{"dtype":"F32","shape":[true,2],"data_offsets":[0,8]}}'),
    ):
        add(f"safetensors_{name}", "safetensors_load", lambda t, s, h=header: (t / "model.safetensors").write_bytes(
            _safetensors(h)), layout="hf_weights", payload=False, file_name="model.safetensors")
    # memory bombs (attack the reader, carry no code)
    for name, blob in bombs().items():
        add(f"bomb_{name}", None, file(lambda s, b=blob: b), payload=False)
    return cases


def bombs() -> dict[str, bytes]:
    """Pickles whose bytes are few and whose objects are many (up to 30 MB of pickle)."""
    big_list = b"\x80\x02(" + b"N" * 1_000_000 + b"lq\x01"
    key = b"k" * 199
    return {
        "empty_dicts_10mb": b"\x80\x02(" + b"}" * 10_000_000 + b"l.",
        "reduce_stand_ins_16mb": b"\x80\x02cfoo\nbar\nq\x00(" + b"h\x00)R" * 4_000_000 + b"l.",
        "distinct_globals": b"\x80\x02(" + b"".join(b"cm\nn%d\n" % i for i in range(400_000)) + b"l.",
        "set_of_memoised_list": big_list + b"(cbuiltins\nset\nq\x02" + b"h\x02h\x01\x85R" * 2_000 + b"l.",
        "forged_shapes": (b"\x80\x02(" + b"K\x01" * 1_000_000 + b"lq\x01ctorch._utils\n_rebuild_tensor_v2\nq\x02("
                          + b"h\x02(NK\x00h\x01h\x01\x89NtR" * 2_000 + b"l."),
        "memo_slot_9_bytes": b"\x80\x02Nr\xff\xff\xff\x7f.",
        # 60 nested dicts under one memoised 199-char key, then 100,000 leaves: 12 KB of path per leaf
        "long_paths": (b"\x80\x02}X" + struct.pack("<I", len(key)) + key + b"q\x00" + b"}h\x00" * 59 + b"}("
                       + b"".join(b"J" + struct.pack("<i", i) + b"N" for i in range(100_000)) + b"u" + b"s" * 60 + b"."),
        "legacy_object_30mb": _legacy(_legacy_parts(b"\x80\x02(" + b"]" * 30_000_000 + b"l.")),
    }


def _folder_file(name: str, torch):
    """Write a framework folder whose ``name`` carries the payload (written by torch.save)."""
    def write(folder: Path, sentinel: Path) -> None:
        buf = io.BytesIO()
        torch.save({"state": {}, "payload": Payload(sentinel, 0)}, buf)
        (folder / name).write_bytes(buf.getvalue())
    return write


def _dcp(folder: Path, torch, sentinel: Path, where: str) -> None:
    import warnings

    import torch.distributed.checkpoint as dcp

    state = {"model": {"w": torch.zeros(2)}, "train_state": {"step": 200}}
    if where not in ("metadata", "plain"):
        state[where] = Payload(sentinel, {"step": 200})
    if where == "plain":
        state["zz_extra"] = "x" * 400  # one bytes item (a dict would be flattened into per-key items)
    shutil.rmtree(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, checkpoint_id=str(folder))
    if where == "metadata":
        meta = (folder / ".metadata").read_bytes()
        # the same Metadata, unpickled through eval (which first writes the sentinel)
        (folder / ".metadata").write_bytes(pickle.dumps(_MetaPayload(sentinel, meta), protocol=2))
    if where == "plain":
        _replace_item(folder, "zz_extra", _payload_pickle(sentinel, {"step": 200}))


class _Nested:
    def __init__(self, blob: bytes):
        self.blob = blob

    def __reduce__(self):
        import torch.storage

        return torch.storage._load_from_bytes, (self.blob,)


class _MetaPayload:
    def __init__(self, sentinel: Path, meta: bytes):
        self.sentinel, self.meta = sentinel, meta

    def __reduce__(self):
        code = f"open({str(self.sentinel)!r}, 'w').write('ran')"
        return eval, (f"exec({code!r}) or __import__('pickle').loads({self.meta!r})",)


def _replace_item(folder: Path, fqn: str, blob: bytes) -> None:
    """Overwrite one non-tensor item's bytes inside its shard (padded to its length)."""
    import torch.distributed.checkpoint as dcp

    meta = dcp.FileSystemReader(str(folder)).read_metadata()
    for idx, info in meta.storage_data.items():
        if idx.fqn == fqn:
            assert len(blob) <= info.length, (len(blob), info.length)
            with open(folder / info.relative_path, "r+b") as fh:
                fh.seek(info.offset)
                fh.write(blob.ljust(info.length, b"\0"))
            return
    raise AssertionError(f"no item {fqn}")


# --- good older checkpoints, to prove `ckpt latest` still recommends one ---------------------

def _templates(root: Path, torch) -> dict[str, Path]:
    """One good checkpoint per layout, copied as step 100 next to each hostile step 200."""
    import warnings

    import torch.distributed.checkpoint as dcp

    root.mkdir(parents=True, exist_ok=True)
    out = {}
    f = root / "ckpt_step_100.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "step": 100}, f)
    out["file"] = f
    hf = root / "checkpoint-100"
    hf.mkdir()
    _hf_folder(hf, torch, 100)
    out["hf"] = hf
    acc = root / "checkpoint_0"
    acc.mkdir()
    _accelerate_folder(acc, torch)
    out["accelerate"] = acc
    ds = root / "global_step100"
    ds.mkdir()
    _deepspeed_folder(ds, torch, 100)
    out["deepspeed"] = ds
    d = root / "step-100"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"model": {"w": torch.zeros(2)}, "train_state": {"step": 100}}, checkpoint_id=str(d))
    out["dcp"] = d
    return out


def _hf_folder(folder: Path, torch, step: int) -> None:
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    torch.save(opt.state_dict(), folder / "optimizer.pt")
    torch.save({"last_epoch": step}, folder / "scheduler.pt")
    torch.save({"cpu": torch.get_rng_state()}, folder / "rng_state.pth")


def _accelerate_folder(folder: Path, torch) -> None:
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    torch.save(opt.state_dict(), folder / "optimizer.bin")
    torch.save({"step": 0, "torch_manual_seed": torch.get_rng_state()}, folder / "random_states_0.pkl")


def _deepspeed_folder(folder: Path, torch, step: int) -> None:
    torch.save({"module": {"w": torch.zeros(2)}, "global_steps": step, "dp_world_size": 1, "mp_world_size": 1,
                "optimizer": {"state": {}}, "ds_config": {"zero_optimization": {"stage": 0}}},
               folder / "mp_rank_00_model_states.pt")


def _place(series: Path, layout: str, templates: dict[str, Path]) -> tuple[str, Path]:
    """Copy the good step-100 checkpoint into ``series``; return its name and where the hostile one goes."""
    kind = {"hf_weights": "hf"}.get(layout, layout)
    good = templates[kind]
    if good.is_dir():
        shutil.copytree(good, series / good.name)
    else:
        shutil.copy2(good, series / good.name)
    if layout == "file":
        return good.name, series / "ckpt_step_200.pt"
    newer = {"hf": "checkpoint-200", "hf_weights": "checkpoint-200", "accelerate": "checkpoint_1",
             "deepspeed": "global_step200", "dcp": "step-200"}[layout]
    target = series / newer
    shutil.copytree(good, target)
    if layout == "hf":
        (target / "trainer_state.json").write_text(json.dumps({"global_step": 200}))
    if layout == "hf_weights":
        (target / "trainer_state.json").write_text(json.dumps({"global_step": 200}))
        (target / "model.safetensors").unlink()
    if layout == "deepspeed":
        os.unlink(target / "mp_rank_00_model_states.pt")
        _deepspeed_folder(target, __import__("torch"), 200)
    return good.name, target
