"""How full are ``/dev/shm``, the dataset and the checkpoint folder? (``df -h`` and ``stat -f``)

Why: DataLoader workers pass batches through ``/dev/shm`` (a container's default is 64 MiB: the
workers die with a bus error); a checkpoint folder at 100 % truncates the next save; a dataset
of millions of small files can run out of inodes. ``df -h`` is what people read, ``stat -f`` has
the exact bytes and the inodes.

Both are commands (never an in-process ``statvfs``): a dead NFS mount blocks ``statfs`` in the
kernel, and only a separate process can be killed at the timeout. A path that does not exist
makes both tools exit 1 while still printing the others; that is ``failed`` with the tool's
reason, and the rows that were printed are kept.
"""

from __future__ import annotations

from pathlib import Path

from gpulib.collect.core import Collector, Outcome, Sink

SHM = Path("/dev/shm")


def filesystems_collector(paths: list[Path]) -> Collector:
    """``/dev/shm`` plus ``paths`` (dataset, checkpoints), each file system once."""
    targets = [str(p) for p in dict.fromkeys([SHM, *paths])]

    def run(sink: Sink, timeout_s: float) -> Outcome:
        df = sink.run(["df", "-h", *targets], timeout_s / 2, "filesystems/df-h.txt")
        stat = sink.run(["stat", "-f", *targets], timeout_s / 2, "filesystems/stat-f.txt")
        bad = [r for r in (df, stat) if r.status != "ok"]
        if not bad:
            return Outcome("ok")
        worst = "timeout" if any(r.status == "timeout" for r in bad) else bad[0].status
        return Outcome(worst, "; ".join(f"{r.argv[0]}: {r.reason}" for r in bad))

    return Collector("filesystems", 30, run)
