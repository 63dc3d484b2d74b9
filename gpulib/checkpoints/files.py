"""One entry point for one path: detect the format from the bytes, never from the name, and
return a :class:`FileReport` - never raise, whatever the input (missing, no permission, a
directory, empty, git-lfs pointer, an HTML error page, zeros, binary junk)."""

from __future__ import annotations

import importlib
import os
import stat
import struct

from gpulib.checkpoints import seal
from gpulib.checkpoints.contents import ContentSummary
from gpulib.checkpoints.records import FileReport
from gpulib.safe_pickle import MAX_PICKLE_BYTES, stub_load

#: The reader of each layout, imported when a file of that layout is met: ``ckpt inspect`` of one
#: torch.save file (most of whose time is interpreter start-up) loads neither the DCP nor the
#: safetensors reader.
READERS = {"dcp": "gpulib.checkpoints.dcp", "torch": "gpulib.checkpoints.torch_save",
           "safetensors": "gpulib.checkpoints.safetensors"}


def _reader(layout: str):
    return importlib.import_module(READERS[layout])

HEAD_BYTES = 512  # a tar header block (torch.load tries the tar format first); the other formats need 64
NO_CHECKSUM_FORMATS = {
    "safetensors": "the format has a JSON header and raw bytes, no CRC",
    "torch_legacy": "pre-1.6 torch.save: stacked pickles and raw storages, no CRC",
    "pickle": "a pickle has no CRC",
}
#: First opcodes of a pickle without a PROTO opcode (every protocol-0/1 pickle, and any other that
#: leaves it out - ``pickle.load`` does not require it): those that can start a valid stream.
PICKLE_STARTS = frozenset(bytes([c]) for c in b"(c}])ISVNFLJKMGTUXBC") | frozenset(
    bytes([c]) for c in (0x88, 0x89, 0x8A, 0x8B, 0x8C, 0x8D, 0x8E, 0x8F, 0x95, 0x96))


def _is_pickle(fh) -> bool:
    """Protocol 0/1 pickles carry no magic: they are pickles if they unpickle (with stand-ins), or
    if they name a global at all - a payload the stand-ins trip over (``getattr(...)(...)``: a
    stand-in is not callable) still runs under ``torch.load``, so it must be judged, not called junk."""
    fh.seek(0)
    result = stub_load(fh)
    return result.error is None or bool(result.globals)


TAR_BLOCK = 512


def looks_like_tar(block: bytes) -> bool:
    """Whether ``tarfile.open(mode="r:")`` would accept this first block (its header checksum,
    computed as tarfile does): then ``torch.load`` reads the file as the pre-1.0 tar format - it
    tries that before the stacked pickles, whatever the file's first bytes say."""
    if len(block) < TAR_BLOCK or not block[:TAR_BLOCK].strip(b"\0"):
        return False
    field = block[148:156]
    if field[:1] in (b"\x80", b"\xff"):
        return True  # a base-256 checksum: let tarfile itself decide
    try:
        want = int(field.split(b"\0", 1)[0].decode("ascii").strip() or "0", 8)
    except (UnicodeDecodeError, ValueError):
        return False
    rest = block[:148] + b" " * 8 + block[156:TAR_BLOCK]
    return want in (sum(rest), sum(struct.unpack("512b", rest)))


def _classify_junk(head: bytes) -> tuple[str, str]:
    if head.startswith(b"version https://git-lfs"):
        return "incomplete", "git-lfs pointer, not the checkpoint itself: run `git lfs pull`"
    if head.lstrip()[:1] == b"<":
        return "corrupt", "an HTML/XML page saved under a checkpoint name (a failed download?)"
    if head.lstrip()[:1] in (b"{", b"["):
        return "corrupt", ("JSON (or text starting like it), not a checkpoint: neither torch.load nor safetensors opens "
                           "it (an error response or a log saved under a checkpoint name?)")
    if not head.strip(b"\0"):
        return "corrupt", "starts with zero bytes: a hole or a lost write (delayed allocation after a crash)"
    return "corrupt", f"unknown format (first bytes {head[:8].hex(' ')}): not torch.save, safetensors or pickle"


def inspect_path(path: str | os.PathLike, deep: bool = False) -> FileReport:
    """Inspect a checkpoint file or DCP directory. ``deep`` adds per-member CRC-32 checks. A
    sealed path (``gpulib ckpt seal``) is compared with its seal: sizes always, checksums with
    ``deep``; a file that differs from its seal is corrupt, by name. Never raises: whatever a
    hostile file makes a reader trip over is a named finding on that file (corrupt: never resumed)."""
    path = os.fspath(path)  # os.path, not pathlib: one import fewer on every `ckpt inspect` start
    try:
        report = _inspect(path, deep)
    except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop `ckpt latest` judging the others
        report = FileReport(path, "unknown")
        report.add("corrupt", f"gpulib could not read it ({type(exc).__name__}: {str(exc)[:200]}): treated as damaged "
                              "and never recommended")
    if report.format == "missing":
        return report
    try:
        sealed = seal.check(path, checksums=deep)
    except OSError as exc:
        report.add("warning", f"its seal could not be read: {exc.strerror or exc}")
        return report
    if not sealed.sealed:
        return report
    for warning in sealed.warnings:
        report.add("warning", f"its seal {sealed.seal_name}: {warning}")
    for problem in sealed.problems:
        report.add("corrupt", f"differs from its seal {sealed.seal_name}: {problem}")
    if sealed.ok:
        report.findings = [f for f in report.findings  # what "deep" could not checksum, the seal did
                           if not (sealed.checked and f.severity == "warning" and f.message.startswith("deep: "))]
        how = (f"{sealed.algorithm} of {len(sealed.checked)} file(s) match {sealed.seal_name}" if sealed.checked
               else f"sizes match {sealed.seal_name} (--deep compares the {sealed.algorithm} too)")
        report.add("info", f"sealed: {how}")
    return report


def _inspect(path: str, deep: bool) -> FileReport:
    report = FileReport(path, "unknown")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        report.format = "missing"
        report.add("incomplete", "does not exist" + (" (dangling symlink)" if os.path.islink(path) else ""))
        return report
    except OSError as exc:
        report.add("incomplete", f"cannot stat: {exc.strerror or exc}")
        return report
    if stat.S_ISDIR(st.st_mode):
        dcp = _reader("dcp")
        if dcp.is_dcp_dir(path):
            return dcp.inspect_dcp(path, deep)
        report.format = "directory"
        report.add("corrupt", "a directory, not a checkpoint file (and not a DCP directory: no .metadata or .distcp); "
                   "for checkpoint folders use `gpulib ckpt latest DIR`")
        return report
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block open() forever; frameworks' isfile() says "absent"
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        report.format = "special"
        report.add("incomplete", f"{kind}, not a regular file: not read (the frameworks' os.path.isfile() treats it as "
                                 "absent; torch.load would block or fail)")
        return report
    report.size_bytes = st.st_size
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, fd shared with pread users
    except OSError as exc:
        report.add("incomplete", f"cannot open: {exc.strerror or exc}")
        return report
    with fh:
        try:
            head = fh.read(HEAD_BYTES)
        except OSError as exc:
            report.add("incomplete", f"cannot read: {exc.strerror or exc}")
            return report
        size = st.st_size
        if size == 0:
            report.add("incomplete", "empty file (0 bytes): the save never wrote data (torch.load says 'EOFError: Ran out of "
                                     "input')")
            return report
        try:
            if head.startswith(b"PK\x03\x04"):
                report.format = "torch_zip"
                _reader("torch").inspect_zip(report, fh.fileno(), size, deep)
            elif looks_like_tar(head) and _reader("torch").inspect_tar(report, fh, size):
                pass  # torch.load reads any non-zip file as a tar first, whatever its first bytes say
            elif len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5:
                fh.seek(0)
                _reader("torch").inspect_legacy(report, fh, size)
            elif (safetensors := _reader("safetensors")).looks_like_safetensors(head, os.path.basename(path)):
                safetensors.inspect_safetensors(report, fh.fileno(), size)
                report.summary = ContentSummary(tensors=len(report.tensors),
                                                tensor_bytes=sum(t.nbytes for t in report.tensors),
                                                categories=["model"] if report.tensors else [],
                                                model_tensors=len(report.tensors))
            else:
                severity, message = _classify_junk(head)
                if head.lstrip()[:1] in (b"{", b"["):
                    report.format = "json"
                    report.add(severity, message)
                elif head[:1] in PICKLE_STARTS and size <= MAX_PICKLE_BYTES and _is_pickle(fh):
                    fh.seek(0)
                    _reader("torch").inspect_legacy(report, fh, size)  # protocol 0/1 pickle (no PROTO opcode)
                else:
                    report.add(severity, message)
        except OSError as exc:
            report.add("incomplete", f"read error: {exc.strerror or exc}")
    if deep and report.format in NO_CHECKSUM_FORMATS:
        report.add("warning", f"deep: {report.format} files carry no checksum ({NO_CHECKSUM_FORMATS[report.format]}): "
                   "a flipped byte in tensor data is invisible - `gpulib ckpt seal` records one")
    return report
