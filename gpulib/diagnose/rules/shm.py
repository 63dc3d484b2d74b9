"""A full ``/dev/shm`` and the DataLoader workers it killed: a data pipeline failure with the size to raise.

Why: PyTorch DataLoader workers hand every batch to the trainer through shared memory
(``/dev/shm``, a tmpfs). A container started with Docker's default 64 MiB, or a Kubernetes pod
without a memory-backed ``emptyDir`` there, fills it with the first few batches: a worker that
touches a page the tmpfs cannot back gets SIGBUS ("DataLoader worker ... is killed by signal: Bus
error", "unexpected bus error encountered in worker ... insufficient shared memory (shm)"), or
its write fails with ``OSError: [Errno 28] No space left on device``. The hardware is fine and
the fix is a number: how big ``/dev/shm`` must be. ``df -h`` / ``stat -f`` of ``/dev/shm`` (from
``gpulib collect``) say it was full and how big it was; the job log says what it broke.
"""

from __future__ import annotations

import math
import re

from gpulib.diagnose.context import Context, place, quote
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.findings import Finding, Quote
from gpulib.parsers.df import FsUsage

SHM = "/dev/shm"
GIB = 1 << 30
#: Docker's default ``--shm-size``: a size that names its cause.
DOCKER_DEFAULT_BYTES = 64 << 20
#: What one rank's DataLoader keeps in flight through /dev/shm, as a floor for the advice:
#: num_workers (8) x prefetch_factor (2) batches of up to 128 MiB (a batch of decoded images).
PER_RANK_BYTES = 8 * 2 * (128 << 20)
#: The smallest size worth advising (a node of 4 ranks at :data:`PER_RANK_BYTES` each).
MIN_ADVICE_BYTES = 8 * GIB

#: A job-log line that says shared memory ran out (beside the catalogue's ``shm-bus-error``).
_SHM_LINE = re.compile(r"(?i)bus error|no space left on device|insufficient shared memory|\bshm\b|/dev/shm")
_OTHER_PATH = re.compile(r"'(/(?!dev/shm)[^']+)'")


def shm_advice_bytes(size_bytes: int, ranks_on_node: int) -> int:
    """The /dev/shm size to ask for: twice what filled up, at least :data:`PER_RANK_BYTES` per rank
    on the node and at least :data:`MIN_ADVICE_BYTES`, rounded up to whole GiB. A floor, not a
    measurement: workers x prefetch x batch bytes of the real job decide; the tmpfs only takes
    host RAM as pages are written, so a generous limit costs nothing until it is used."""
    want = max(2 * size_bytes, ranks_on_node * PER_RANK_BYTES, MIN_ADVICE_BYTES)
    return math.ceil(want / GIB) * GIB


def run(ctx: Context) -> None:
    _worker_report_first(ctx)
    full = _full_shm(ctx)
    if not full:
        return
    lines = _shm_errors(ctx)
    if not lines:
        return
    for host, (file, usage) in sorted(full.items(), key=lambda kv: kv[0] or ""):
        mine = [x for x in lines if x[1] in (host, None)]
        if not mine:
            continue
        _add(ctx, host, file, usage, mine)


def _worker_report_first(ctx: Context) -> None:
    """A DataLoader worker that takes SIGBUS prints its own report ("Unexpected bus error
    encountered in worker ... insufficient shared memory (shm)") as it dies; the trainer's
    "DataLoader worker (pid N) is killed by signal: Bus error" comes after, when it notices. So the
    bus-error finding starts at the worker's report: in the same file the first one above it, else
    the first one in another file of the same host (a log kept in pieces)."""
    for f in ctx.findings:
        if not f.id.startswith("dataloader") or f.category != "data_pipeline_stall" or not f.quotes \
                or "bus error" not in f.title.lower():
            continue
        own = f.quotes[0]
        host = f.host or next((file.host for file in ctx.inputs.files if file.display == own.file), None)
        reports = [(file.display != own.file, s.line, file, s) for file in ctx.inputs.files for s in file.signals
                   if s.signature == "shm-bus-error" and _WORKER_REPORT.search(s.text)
                   and (s.host or file.host) in (host, None)
                   and (file.display != own.file or own.line is None or s.line < own.line)]
        if reports:
            _other, line, file, s = min(reports, key=lambda r: (r[0], r[1]))
            f.quotes.insert(0, quote(file, line, s.text))


#: The worker's own line (the trainer's "killed by signal: Bus error" is the other one).
_WORKER_REPORT = re.compile(r"(?i)unexpected bus error encountered in worker")


def _full_shm(ctx: Context) -> dict[str | None, tuple[InputFile, FsUsage]]:
    """host -> (file, usage) of every /dev/shm that had no space left when it was captured."""
    out: dict[str | None, tuple[InputFile, FsUsage]] = {}
    for file, rec in ctx.records(*kinds.FILESYSTEM_USAGE):
        if not isinstance(rec, FsUsage) or SHM not in ((rec.mount or "").rstrip("/"), (rec.path or "").rstrip("/")):
            continue
        if rec.full and (file.host not in out or not rec.approximate):  # stat -f's exact bytes beat df -h
            out[file.host] = (file, rec)
    return out


def _shm_errors(ctx: Context) -> list[tuple[InputFile, str | None, int | None, str | None, int, str]]:
    """(file, host, rank, time, line, text) of the job-log lines where shared memory ran out."""
    out, seen = [], set()
    for f in ctx.inputs.files:
        for s in f.signals:
            if s.signature == "shm-bus-error" and (f.display, s.line) not in seen:
                seen.add((f.display, s.line))
                out.append((f, s.host or f.host, s.rank, s.time_utc, s.line, s.text))
    for f, e in ctx.records(kinds.TRAINING_LOG):
        if (f.display, e.line) in seen:
            continue
        what = f"{e.details.get('what', '')} {e.text}"
        bus = e.kind == "dataloader_error" and "bus error" in what.lower()
        nospace = e.kind == "exception" and "no space left on device" in e.text.lower() \
            and not _OTHER_PATH.search(e.text)  # a full checkpoint disk names its own path
        if (bus or nospace) and _SHM_LINE.search(e.text):
            seen.add((f.display, e.line))
            host = e.host or (ctx.ids.locate(rank=e.rank).host if e.rank is not None else None) or f.host
            out.append((f, host, e.rank, e.time_utc, e.line, e.text))
    return sorted(out, key=lambda x: (x[3] or "~", x[4]))


def _add(ctx: Context, host: str | None, file: InputFile, usage: FsUsage, errors: list) -> Finding:
    ranks_on_node = sum(1 for r in ctx.ids.ranks.values() if r.host == host) if host else 0
    advice = shm_advice_bytes(usage.size_bytes, max(ranks_on_node, 1))
    size, gib = _human(usage.size_bytes), advice // GIB
    why = " (Docker's default --shm-size)" if usage.size_bytes == DOCKER_DEFAULT_BYTES else ""
    f0, _h, rank, when, line, text = errors[0]
    ranks = sorted({r for _f, _h2, r, *_x in errors if r is not None})
    df_line = (f"{usage.filesystem or usage.fs_type or 'tmpfs'} {size} used {_human(usage.used_bytes)} "
               f"avail {_human(usage.avail_bytes)} {usage.use_pct:.0f}% {usage.mount or usage.path}")
    finding = ctx.add(
        "shm-full", severity="error", category="data_pipeline_stall", interruption="soft",
        title=f"/dev/shm on {host} was full ({size}{why}) and the DataLoader workers ran out of shared memory"
              + (f" on rank(s) {', '.join(map(str, ranks[:8]))}" if ranks else ""),
        host=host, rank=rank, time=when,
        quotes=[quote(f, ln, t) for f, _h2, _r, _w, ln, t in errors[:3]] + [quote(file, usage.line, df_line)],
        actions=[f"Raise /dev/shm on {host or 'the node'} from {size} to at least {gib} GiB "
                 f"({max(ranks_on_node, 1)} rank(s) there; each keeps num_workers x prefetch_factor batches in it): "
                 f"`docker run --shm-size={gib}g` (or `--ipc=host`); Kubernetes: an emptyDir with medium: Memory, "
                 f"sizeLimit: {gib}Gi, mounted at /dev/shm; bare metal: `mount -o remount,size={gib}G /dev/shm` "
                 "(and the size= option in /etc/fstab)",
                 "Or need less of it: lower num_workers or prefetch_factor, or smaller batches per worker",
                 "Before relaunching, remove stale segments a killed run left behind (`ls -la /dev/shm`: "
                 "torch_* files of no running process)"])
    place(ctx, finding, rank=rank, host=host)
    cited = {(f.display, ln) for f, _h2, _r, _w, ln, _t in errors}
    _demote(ctx, finding, cited)
    return finding


def _demote(ctx: Context, root: Finding, cited: set[tuple[str, int]]) -> None:
    """The job rules' findings on the same lines (a DataLoader error, an OSError) are how the full
    /dev/shm looked from inside the job: symptoms of it, not causes of their own."""
    for f in ctx.findings:
        if f is root or f.role != "cause" or not any((e.file, e.line) in cited for e in f.quotes):
            continue
        f.role, f.interruption, f.caused_by = "symptom", None, root.id
        root.quotes.extend(e for e in f.quotes if e not in root.quotes and isinstance(e, Quote))


def _human(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) or value >= 10 else f"{value:.1f} {unit}"
    return f"{n} B"
