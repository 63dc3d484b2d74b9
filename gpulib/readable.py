"""Check the paths a user typed before a command reads them: a typo must be an error, not a result.

Why before: an analysis that skips what it cannot read and reports on the rest turns
``gpulib diagnose /shared/inc-24`` (meant: ``inc-42``) into "no interruption", exit 0, and a
script relaunches the job. So every command that takes paths calls :func:`require_readable`
first; the error names each path and what is wrong with it, and the CLI exits 2 (usage or
input error, :mod:`gpulib.exit_codes`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from gpulib.errors import InputError

_KIND = {"dir": "folder", "file": "file"}


def node_kind(mode: int) -> str:
    """What a non-folder is, in the words of the error (``stat`` mode in): a FIFO is not "a file"."""
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def unreadable_reason(path: str | os.PathLike, want: str | None = None, *, special: bool = True) -> str | None:
    """Why ``path`` cannot be read (None when it can). ``want``: ``"dir"``, ``"file"`` or None (either).

    Reading is tried, not inferred from permission bits (which say nothing for root, ACLs or
    network file systems); a FIFO or device is never opened (that could block, or never end),
    only its access rights are checked. ``special=False`` (and ``want="file"``): a FIFO or device
    is refused outright, for commands that read what they are given to its end (a log, a table).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a dangling symbolic link" if os.path.islink(path) else "no such file or folder"
    except PermissionError:
        return "permission denied (a folder above it cannot be entered)"
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISDIR(st.st_mode):
        if want == "file":
            return "is a folder, a file was expected"
        try:
            with os.scandir(path) as entries:
                next(entries, None)
        except OSError as exc:
            return f"folder cannot be listed: {exc.strerror or exc}"
        return None
    if want == "dir":
        return f"is {node_kind(st.st_mode)}, a folder was expected"
    if stat.S_ISSOCK(st.st_mode):
        return "is a socket, not a file"
    if not stat.S_ISREG(st.st_mode):
        if want == "file" or not special:
            return f"is {node_kind(st.st_mode)}, not a regular file (never opened: reading it could block or never end)"
        return None if os.access(path, os.R_OK) else "permission denied"
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    return None


def require_readable(paths: Iterable[str | os.PathLike], want: str | None = None, *, what: str | None = None,
                     hint: str | None = None, special: bool = True) -> None:
    """Raise :class:`InputError` naming every unusable path of ``paths``; return when all can be read.
    (``os.path`` only, no ``pathlib``: a quick command such as ``ckpt inspect`` pays for every import.)"""
    paths = list(paths)
    bad = [(p, reason) for p in paths if (reason := unreadable_reason(p, want, special=special))]
    if not bad:
        return
    label = what or _KIND.get(want, "path")
    if len(bad) == 1:
        raise InputError(bad[0][1], path=str(bad[0][0]), hint=hint)
    listed = "; ".join(f"{p}: {reason}" for p, reason in bad)
    raise InputError(f"{len(bad)} of {len(paths)} {label} paths are unusable: {listed}", hint=hint)
