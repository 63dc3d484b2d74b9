"""``gpulib storage-probe PATH``: measure a dataset path and judge it against the job's need."""

from __future__ import annotations

import json
import os
import sys

from gpulib import exit_codes
from gpulib.cli_args import positive
from gpulib.errors import InputError
from gpulib.progress import Ticking
from gpulib.readable import require_readable
from gpulib.storage import fio, measure, scan, verdict

EXIT_CODES = ("exit status: 0 enough (or measured, no need given), 1 marginal headroom or many small files, "
              "2 bad arguments or no readable file under PATH, 3 not enough for the job (no-go)")


def probe(path: str, seconds: float, threads: int, need: verdict.Need | None, engine: str = "auto",
          max_files: int = 200_000, show_progress: bool = False) -> dict:
    """Scan, measure (fio or Python), judge; everything as one JSON-ready dict. ``show_progress``:
    the measurement's progress on stderr (the command line; a notebook shows its own output)."""
    require_readable([path], special=False, hint="give the dataset folder the job reads")  # a FIFO would block
    found = scan.scan(path, max_files=max_files)
    readable = [f for f in found.sample if os.access(f, os.R_OK)]
    if not readable:
        raise InputError(f"no readable non-empty file ({found.files} file(s), {found.unreadable} unreadable)",
                         path=path, hint="probe the folder that holds the training data, as the user the job runs as")
    with Ticking(seconds if show_progress else 0, f"measuring {path}", min_total=1):
        io = _measure(readable, seconds, threads, engine)
    judged = verdict.judge(found, io, need)
    return {"path": path, "scan": found, "io": io, "need": need, "verdict": judged}


def _measure(readable: list[str], seconds: float, threads: int, engine: str):
    """fio when asked or available, else the Python reader (saying why in its note); both carry
    out the same plan (files, blocks, readers, cache policy)."""
    plan = measure.make_plan(readable, threads)
    fallback_note = None
    io = None
    if engine in ("auto", "fio") and fio.available():
        try:
            io = fio.measure(readable, seconds, threads, plan)
        except fio.FioError as exc:
            fallback_note = f"fio failed ({exc}); measured in Python instead"
    elif engine == "fio":
        fallback_note = "fio not installed (apt-get install fio); measured in Python instead"
    if io is None:
        io = measure.measure(readable, seconds, threads, plan=plan)
        io.note = "; ".join(n for n in (fallback_note, io.note) if n) or None
    return io


def report_lines(result: dict) -> list[str]:
    found, io, judged = result["scan"], result["io"], result["verdict"]
    lines = [f"storage-probe {result['path']}: {judged.status.upper()}",
             f"  files {found.files:,}{' (scan stopped at the cap)' if found.truncated else ''}, "
             f"{found.total_bytes / (1 << 30):,.2f} GiB, median {found.median_file_bytes:,} B"
             + (f", {found.unreadable} unreadable" if found.unreadable else "")]
    for b in found.buckets:
        if b.files:
            lines.append(f"    {b.label:>13}: {b.files:>9,} files {b.bytes / (1 << 20):>12,.1f} MiB")
    lines.append(f"  {io.engine}, {io.threads} readers, {io.cache or ('O_DIRECT' if io.direct else 'buffered')}, "
                 f"{len(found.sample)} sampled files: sequential {io.seq_read_mib_s:,.1f} MiB/s "
                 f"({_size(io.seq_block_bytes)} reads, {io.seq_files} files, {io.seq_passes:g} passes); random 4 KiB "
                 f"{io.rand_read_iops:,.0f} IOPS over {io.rand_files} files, latency p50 {io.rand_lat_p50_us:,.0f} / p95 "
                 f"{io.rand_lat_p95_us:,.0f} / p99 {io.rand_lat_p99_us:,.0f} us")
    if io.note:
        lines.append(f"  note: {io.note}")
    lines += [f"  {line}" for line in judged.lines]
    return lines


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _as_json(result: dict) -> str:
    def plain(obj):
        return {k: plain(v) for k, v in vars(obj).items()} if hasattr(obj, "__dataclass_fields__") else \
            [plain(v) for v in obj] if isinstance(obj, list) else obj
    return json.dumps({k: plain(v) for k, v in result.items()}, indent=2)


def _run(args) -> int:
    given = [args.ranks, args.batch, args.sample_bytes]
    if any(v is not None for v in given) and not all(v is not None for v in given):
        print("gpulib storage-probe: error: --ranks, --batch and --sample-bytes go together", file=sys.stderr)
        return exit_codes.USAGE
    need = verdict.Need(args.ranks, args.batch, args.sample_bytes, args.step_seconds) if args.ranks else None
    result = probe(args.path, args.seconds, args.threads, need, args.engine, args.max_files, show_progress=True)
    print(_as_json(result) if args.format == "json" else "\n".join(report_lines(result)))
    return result["verdict"].exit_code


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "storage-probe", help="measure a dataset path (throughput, IOPS, latency, file sizes) against the job's need",
        description="Read-only probe of a dataset path: sequential MiB/s, random 4 KiB IOPS and latency percentiles "
                    "(fio when installed, else Python; nothing is written under PATH), a file-size histogram, and a "
                    "verdict against ranks x batch x sample size per step.", epilog=EXIT_CODES)
    p.add_argument("path", help="dataset folder (or file) the job reads")
    p.add_argument("--seconds", type=positive(float), default=10.0, help="measurement time, both phases (default 10)")
    p.add_argument("--threads", type=positive(int), default=4, help="concurrent readers (default 4)")
    p.add_argument("--ranks", type=positive(int), help="ranks reading this path at once")
    p.add_argument("--batch", type=positive(int), help="samples per rank per step")
    p.add_argument("--sample-bytes", type=positive(int), help="bytes per sample as stored")
    p.add_argument("--step-seconds", type=positive(float), default=1.0, help="seconds per training step (default 1)")
    p.add_argument("--engine", choices=("auto", "fio", "python"), default="auto",
                   help="auto: fio when installed, else Python")
    p.add_argument("--max-files", type=positive(int), default=200_000, help="stop the size scan after N files")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_run)
