"""No "none" over evidence that could not be read: a folder gpulib may not list, or a file it may
not open, could hold the Xid that explains the incident.

The top-level paths a user types are checked before anything is read (:mod:`gpulib.readable`,
exit 2); this is for what lies inside them: ``node-b/`` readable, ``node-b/nvsmi/`` owned by
another user. Whatever the rest of the evidence says, "no interruption" (exit 0, and a script
relaunches) is then a claim about files nobody read, so the verdict becomes ``unknown`` (exit 4)
naming them, with making them readable as the first thing to do. A hard or soft root cause found
in what was read stands: the unread part cannot take it back.
"""

from __future__ import annotations

from gpulib.diagnose.context import Context
from gpulib.diagnose.report import Diagnosis
from gpulib.evidence import kinds


def unread_paths(ctx: Context) -> list[str]:
    """Folders that could not be listed and files that could not be opened for lack of permission."""
    folders = [p.source for p in ctx.inputs.problems if p.message.startswith("cannot list folder")]
    files = [f.display for f in ctx.inputs.files
             if f.kind == kinds.UNREADABLE and any(p.message.startswith("permission denied") for p in f.problems)]
    return folders + files


def unless_unread(ctx: Context, diagnosis: Diagnosis) -> Diagnosis:
    """``diagnosis``, or ``unknown`` instead of ``none`` when part of the evidence was not read."""
    unread = unread_paths(ctx)
    if diagnosis.interruption != "none" or not unread:
        return diagnosis
    named = ", ".join(unread[:3]) + (f" and {len(unread) - 3} more" if len(unread) > 3 else "")
    return Diagnosis("unknown", "none", f"No failure found in what could be read, but {len(unread)} path(s) could "
                     f"not be read ({named}): the cause may be there.", None, diagnosis.findings,
                     next_steps=[f"Make {path} readable (run as root, or copy it readable) and diagnose again"
                                 for path in unread[:3]] + diagnosis.next_steps)
