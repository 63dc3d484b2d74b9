"""A file-system error on a network file system: the shared storage, not the job's code.

Why: a checkpoint of a multi-node job is written by many ranks into one directory on shared
storage. On NFS, each client caches what a directory holds (attribute and lookup caching, 3-60 s
by default): rank 0 creates ``step_1000/`` and the ranks of the other nodes, told to write into it,
get ``FileNotFoundError`` for a directory that exists - their client has not looked again yet. A
server that restarted or an export that moved makes old handles fail with ``Stale file handle``
(ESTALE); a FUSE or CIFS client whose daemon or server went away answers ``Transport endpoint is
not connected`` (ENOTCONN); a client that gave up on its server returns ``Input/output error``
(EIO). Read alone, each looks like a bug in the job (a wrong path); the evidence that the path lies
on a network file system (``mount``, ``/proc/mounts``, ``df -T``) says it is the storage's
behaviour: a data-path failure (``data_pipeline_stall``, the vocabulary's storage class), soft -
the hardware is fine, the fix is a mount option or another file system for checkpoints.

What counts: an ``OSError`` of the job (``FileNotFoundError``, ``PermissionError``, ``OSError:
[Errno N]``, ...) that names a path under a network mount of the evidence - a missing path only
while saving or loading a checkpoint (elsewhere a missing path on NFS is as likely a wrong path in
the config); or an error only network file systems raise (ESTALE, ENOTCONN), wherever it is. A
missing path on a local disk stays the job's own error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.findings import Finding
from gpulib.parsers.df import FsUsage
from gpulib.parsers.linescan import lines_up_to
from gpulib.parsers.unwrap import unwrap

#: File-system types served over a network (a FUSE mount is one unless the evidence says otherwise).
NETWORK_TYPES = re.compile(r"^(?:nfs\d?|lustre|gpfs|beegfs|cifs|smb\d?|smbfs|ceph|glusterfs|panfs|wekafs|"
                           r"9p|afs|fuse(?:\.[\w-]+)?|fuseblk)$")
#: ``mount``: ``srv:/export on /mnt/x type nfs4 (rw,...)``; ``/proc/mounts`` and fstab:
#: ``srv:/export /mnt/x nfs4 rw,... 0 0``.
_MOUNT = re.compile(r"^\s*(?P<src>\S+) on (?P<mount>/\S*) type (?P<type>\S+) \("
                    r"|^\s*(?P<src2>\S+)\s+(?P<mount2>/\S*)\s+(?P<type2>[\w.-]+)\s+(?:rw|ro|defaults)\b")
#: The job's errors of the OSError family (Python's names; ``[Errno N]`` in any class's message).
OS_ERRORS = frozenset({"OSError", "IOError", "FileNotFoundError", "FileExistsError", "PermissionError",
                       "IsADirectoryError", "NotADirectoryError", "BlockingIOError", "InterruptedError"})
#: Errors no local disk gives: a stale NFS handle, a FUSE/CIFS client that lost its server.
_NETWORK_ONLY = re.compile(r"(?i)stale (?:nfs )?file handle|\bESTALE\b|\[Errno 116\]|transport endpoint is not "
                           r"connected|\bENOTCONN\b|\[Errno 107\]")
#: Errors that say the storage failed (not that a path is wrong): on a network path, the storage's.
_STORAGE_FAILED = re.compile(r"(?i)input/output error|\bEIO\b|\[Errno 5\]|timed out|\[Errno 110\]")
#: A checkpoint being written or read, in the error, its traceback or the line announcing the step.
_CHECKPOINT = re.compile(r"(?i)checkpoint|\bckpt|state_dict|torch\.save|\bsave\b|safetensors|\.distcp\b")
_PATH = re.compile(r"(?<![\w.:/])(/[^\s'\"`,;()\[\]]+)")
#: How far back from the error its traceback and the announcing line are looked for (lines).
TRACEBACK_WINDOW = 40
#: Files larger than this are not re-read for mount lines; bytes re-read in all.
MAX_BYTES = 4 << 20
TOTAL_BYTES = 16 << 20


@dataclass(frozen=True)
class Mount:
    """A network file system mounted at ``mount`` (type ``fs_type``), as a file of the evidence showed it."""

    mount: str
    fs_type: str
    file: InputFile
    line: int | None
    text: str

    def holds(self, path: str) -> bool:
        root = self.mount.rstrip("/")
        return bool(root) and (path == root or path.startswith(root + "/"))


@dataclass(frozen=True)
class OsError:
    """One error line of the job: where, its exception class, and when and by which rank."""

    file: InputFile
    line: int
    text: str
    cls: str | None
    time: str | None
    rank: int | None


def run(ctx: Context) -> None:
    errors = _errors(ctx)
    if not errors:
        return
    mounts = network_mounts(ctx)
    for err in errors:
        if _judge(ctx, err, mounts) is not None:
            return


def _errors(ctx: Context) -> list[OsError]:
    """The job's OSError-family lines, first first: the job rules' exceptions of a training log, and
    the catalogue's exception lines of any other file (a pasted traceback, a worker's console)."""
    found: dict[tuple[str, int], OsError] = {}
    for fl, e in ctx.records(kinds.TRAINING_LOG):
        if e.kind == "exception":
            found[(fl.display, e.line)] = OsError(fl, e.line, e.text, e.details.get("class"), e.time_utc, e.rank)
    for fl in ctx.inputs.files:
        for sig in fl.signals:
            if sig.signature == "python-exception" and (fl.display, sig.line) not in found:
                found[(fl.display, sig.line)] = OsError(fl, sig.line, sig.text,
                                                        sig.fields.get("what", "").rsplit(".", 1)[-1] or None,
                                                        sig.time_utc, sig.rank)
    return sorted((x for x in found.values() if x.cls in OS_ERRORS or "[Errno" in x.text
                   or _NETWORK_ONLY.search(x.text)), key=lambda x: (x.time or "~", x.file.display, x.line))


def _judge(ctx: Context, err: OsError, mounts: list[Mount]) -> Finding | None:
    paths = _PATH.findall(err.text)
    where = next(((m, p) for p in paths for m in sorted(mounts, key=lambda m: -len(m.mount)) if m.holds(p)), None)
    network_only = bool(_NETWORK_ONLY.search(err.text))
    if where is None and not network_only:
        return None
    if not network_only and not _STORAGE_FAILED.search(err.text) and not _in_checkpoint(err):
        return None  # a missing path on shared storage outside a checkpoint is as likely a wrong path
    mount, path = where if where else (None, next(iter(paths), None))
    on = f" on {mount.fs_type} {mount.mount}" if mount else " on a network file system"
    found = ctx.add("netfs-error", severity="error", category="data_pipeline_stall", interruption="soft",
                    role="cause", title=f"{err.cls or 'OSError'} on {(path or 'a path')[:120]}{on}: the shared "
                    "storage, not the job's code - other clients see a network file system's directories late "
                    "(attribute caching) or lose their handles",
                    time=err.time, quotes=[quote(err.file, err.line, err.text)]
                    + ([quote(mount.file, mount.line, mount.text)] if mount else []),
                    actions=_actions(mount))
    found.tier = 3  # the storage slowed or failed the job; a fault that needs service comes first
    _demote(ctx, found, err)
    return found


def _actions(mount: Mount | None) -> list[str]:
    nfs = mount is None or mount.fs_type.startswith("nfs")
    first = ("Mount the checkpoint directory with attribute caching off (`actimeo=0`, or `lookupcache=positive`/"
             "`noac` on the NFS client) so every node sees a directory as soon as rank 0 creates it" if nfs else
             f"Check the {mount.fs_type} client on every node (`mount`, its daemon, the server's health) and remount")
    return [first,
            "Write distributed checkpoints to a parallel file system (Lustre, GPFS, WEKA) or node-local disk and copy "
            "them out after the save, not to a plain NFS export",
            "Check the mount on each node (`mount | grep <path>`, `df -T <path>`, `dmesg | grep -i nfs`): a stale handle "
            "or a lost server needs a remount, then relaunch from the last complete checkpoint"]


def _demote(ctx: Context, root: Finding, err: OsError) -> None:
    """The job rule's exception finding on the same line is how the storage looked from inside the job."""
    for f in ctx.findings:
        if f is not root and f.role == "cause" and any(q.file == err.file.display and q.line == err.line
                                                       for q in f.quotes):
            f.role, f.interruption, f.caused_by = "symptom", None, root.id


def _in_checkpoint(err: OsError) -> bool:
    """Whether the error was raised saving or loading a checkpoint: said by the error itself, the frames
    of its traceback or the lines before it (``Saving checkpoint to ...``)."""
    if _CHECKPOINT.search(err.text):
        return True
    _first, lines = lines_up_to(err.file.path, err.line, TRACEBACK_WINDOW)
    return any(_CHECKPOINT.search(t) for t in lines)


def network_mounts(ctx: Context) -> list[Mount]:
    """Network mounts the evidence shows: ``df -T`` rows with a network type, and ``mount`` or
    ``/proc/mounts`` lines in any readable text file (a pasted ``kubectl exec ... mount``)."""
    out = [Mount(rec.mount, rec.fs_type, fl, rec.line, f"{rec.filesystem} {rec.fs_type} {rec.mount}")
           for fl, rec in ctx.records(*kinds.FILESYSTEM_USAGE)
           if isinstance(rec, FsUsage) and rec.mount and rec.fs_type and NETWORK_TYPES.match(rec.fs_type)]
    budget = TOTAL_BYTES
    for fl in ctx.inputs.of_kind(kinds.TRAINING_LOG, kinds.TEXT):
        size = _size(fl)
        if size > min(MAX_BYTES, budget):
            continue
        budget -= size
        for n, line in enumerate(_lines(fl), 1):
            m = _MOUNT.match(line)
            kind = m and (m["type"] or m["type2"])
            if kind and NETWORK_TYPES.match(kind):
                out.append(Mount(m["mount"] or m["mount2"], kind, fl, n, line.strip()))
    return out


def _size(fl: InputFile) -> int:
    try:
        return fl.path.stat().st_size
    except OSError:
        return MAX_BYTES + 1


def _lines(fl: InputFile) -> list[str]:
    try:
        return unwrap(fl.path.read_text(errors="replace")).text.splitlines()
    except OSError:
        return []


__all__ = ["NETWORK_TYPES", "OS_ERRORS", "Mount", "OsError", "network_mounts", "run"]
