"""``gpulib ckpt inspect|verify|latest``.

inspect  lists tensors and state without reading tensor data or executing anything (exit 0 when
         the file is structurally valid and safe, 1 when damaged, 3 when UNSAFE or needs review).
verify   the same exit codes, with reasons; ``--deep`` adds the CRC-32 of every zip member.
         3 beats 1: ``gpulib ckpt verify f && torch.load(f, weights_only=False)`` never loads a
         file whose pickles name code gpulib does not know as safe.
latest   the newest complete checkpoint across one directory per node, what it lacks, and the
         resume command (exit 0 when one was found, 1 when none, 3 when none and some were refused
         as UNSAFE / needs review).
seal     a sidecar manifest of each file's size and CRC-32/sha256; verify and latest then call a
         file that differs from it corrupt, by name (exit 0 sealed, 2 a path that cannot be).
Imports stay light: ``gpulib ckpt`` loads this module (and ``gpulib --help`` every command's),
the checkpoint readers only when a sub-command runs.
"""

from __future__ import annotations

import sys

from gpulib import exit_codes
from gpulib.readable import require_readable

FILES_EXIT = """0 every checkpoint is valid (structure; with --deep also every CRC-32) and safe to load
1 at least one is invalid or incomplete (the reasons are printed)
2 a path that does not exist or cannot be read
3 no-go: at least one is UNSAFE or NEEDS REVIEW - a pickle in it names code that loading would run
  (dangerous, or not known to gpulib as safe); never torch.load(weights_only=False) it"""
LATEST_EXIT = """0 a resumable checkpoint was found (its resume command is printed)
1 none is resumable (why, and every candidate's reasons, are printed)
2 a folder that does not exist or cannot be listed
3 none is resumable and at least one was refused as UNSAFE / NEEDS REVIEW (never load those)"""


def register(subparsers) -> None:
    p = subparsers.add_parser("ckpt", help="inspect / verify checkpoints and find the newest complete one (no torch, no "
                                           "unpickling)")
    sub = p.add_subparsers(dest="ckpt_command", metavar="ACTION", required=True)
    ins = sub.add_parser("inspect", help="list tensors and state of a checkpoint file or DCP directory",
                         epilog=exit_codes.epilog(FILES_EXIT))
    ins.add_argument("paths", nargs="+", metavar="PATH")
    ins.add_argument("--format", choices=("text", "json"), default="text")
    ins.add_argument("--limit", type=int, default=40, help="tensors to list per file in text mode (default 40; 0 = all)")
    ins.set_defaults(func=cmd_inspect)
    ver = sub.add_parser("verify", help="check a checkpoint is complete and uncorrupted (exit 0 valid, 1 invalid)",
                         epilog=exit_codes.epilog(FILES_EXIT))
    ver.add_argument("paths", nargs="+", metavar="PATH")
    ver.add_argument("--deep", action="store_true", help="also CRC-32 every zip member (reads all bytes)")
    ver.add_argument("--format", choices=("text", "json"), default="text")
    ver.set_defaults(func=cmd_verify)
    sl = sub.add_parser("seal", help="write a sidecar manifest (size + CRC-32 or sha256 per file) that verify and "
                                     "latest check the checkpoint against")
    sl.add_argument("paths", nargs="+", metavar="DIR|FILE")
    sl.add_argument("--checksum", choices=("crc32", "sha256"), default="crc32",
                    help="crc32 (zlib: as fast as the disk; default) or sha256 (also resists tampering)")
    sl.set_defaults(func=cmd_seal)
    lat = sub.add_parser("latest", help="newest complete checkpoint across DIRs (one per node) and the resume command",
                         epilog=exit_codes.epilog(LATEST_EXIT))
    lat.add_argument("dirs", nargs="+", metavar="DIR")
    lat.add_argument("--deep", action="store_true", help="CRC-check the chosen checkpoint before recommending it")
    lat.add_argument("--format", choices=("text", "json"), default="text")
    lat.set_defaults(func=cmd_latest)


def _human(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def _print_report(r, limit: int | None) -> None:
    s = r.summary
    print(f"{r.path}: {r.format}, {_human(r.size_bytes)}" + (" [deep-checked]" if r.deep_checked else ""))
    if s:
        print(f"  {s.tensors:,} tensors, {_human(s.tensor_bytes)}; contains: {', '.join(s.categories) or 'nothing recognised'}")
        print(f"  step: {s.step if s.step is not None else '?'}" + (f" ({s.step_key})" if s.step_key else "")
              + (f", epoch: {s.epoch}" if s.epoch is not None else "")
              + (f"; RNG: {', '.join(s.rng_kinds)}" if s.rng_kinds else "")
              + (f" (cuda x{s.cuda_rng_devices})" if s.cuda_rng_devices else "")
              + (f"; model key prefix '{s.model_prefix}'" if s.model_prefix else ""))
    for k in ("serialization_id", "data/serialization_id", "version", "byteorder"):
        if k in r.meta:
            print(f"  {k}: {r.meta[k]}")
    if limit is not None:
        shown = r.tensors if limit == 0 else r.tensors[:limit]
        for t in shown:
            where = f"  [{t.location}]" if t.location and t.location != "cpu" else ""
            print(f"    {t.name:<60} {t.dtype:<10} {str(tuple(t.shape)):<22} {_human(t.nbytes)}{where}")
        if len(shown) < len(r.tensors):
            print(f"    ... {len(r.tensors) - len(shown):,} more (--limit 0 shows all)")
        values = sorted(r.values.items(), key=lambda kv: kv[0].count(".") + kv[0].count("["))  # shallow first
        shown_values = values if limit == 0 else values[:limit]
        if shown_values:
            print("  other entries:")
        for k, v in shown_values:
            print(f"    {k or '<top>':<60} {v!r:.70}")
        if len(shown_values) < len(values):
            print(f"    ... {len(values) - len(shown_values):,} more")
    for f in r.findings:
        print(f"  {f.severity.upper()}: {f.message}")
    if r.untrusted:
        verdict = "UNSAFE" if r.unsafe else "NEEDS REVIEW"
        print(f"  => {verdict}: never torch.load(weights_only=False) it - it would run code named in its pickles "
              f"(structure {'valid' if r.valid else 'invalid'})")
    else:
        print(f"  => {'VALID' if r.valid else 'INVALID'}")


def _run_files(args, deep: bool, limit: int | None) -> int:
    from gpulib.checkpoints.files import inspect_path
    from gpulib.progress import Progress

    require_readable(args.paths, what="checkpoint")
    with Progress(len(args.paths) if deep else 0, "deep-verifying", "checkpoints", min_total=2) as bar:
        reports = []
        for p in args.paths:
            reports.append(inspect_path(p, deep))
            bar.update()
    if args.format == "json":
        import json  # noqa: PLC0415 - only --json pays for it

        json.dump([r.to_dict(with_tensors=limit is not None) for r in reports], sys.stdout, indent=1, default=str)
        print()
    else:
        for r in reports:
            _print_report(r, limit)
        if deep:
            print(_deep_line(reports))
    return files_exit(reports)


def files_exit(reports) -> int:
    """3 (no-go) when any file is UNSAFE or needs review, else 1 when any is invalid, else 0."""
    if any(r.untrusted for r in reports):
        return exit_codes.HARD
    return exit_codes.OK if all(r.valid for r in reports) else exit_codes.SOFT


def _deep_line(reports) -> str:
    """One line saying what --deep looked at, over every file given."""
    checked = sum(r.meta.get("deep_checksummed_members", 0) for r in reports)
    total = sum(r.meta.get("deep_members", r.meta.get("deep_checksummed_members", 0)) for r in reports)
    bare = [r for r in reports if not r.deep_checked]
    line = f"deep: CRC-32 of {checked:,} of {total:,} zip members checked in {len(reports) - len(bare)} file(s)"
    if bare:
        line += f"; {len(bare)} file(s) not CRC-checked (no checksum in the format, or unreadable)"
    return line


def cmd_inspect(args) -> int:
    return _run_files(args, False, args.limit)


def cmd_verify(args) -> int:
    return _run_files(args, args.deep, None)


def cmd_seal(args) -> int:
    """Seal each path (exit 0), or say which could not be sealed (exit 2: a missing or unreadable path)."""
    from gpulib.checkpoints.seal import SealError, seal

    code = 0
    for path in args.paths:
        try:
            target = seal(path, args.checksum)
        except SealError as exc:
            print(f"gpulib ckpt seal: error: {exc}", file=sys.stderr)
            code = 2
            continue
        print(f"{path}: sealed ({args.checksum}) -> {target}")
    return code


def cmd_latest(args) -> int:
    from gpulib.checkpoints.latest import find_latest

    require_readable(args.dirs, "dir", what="checkpoint folder",
                     hint="ckpt latest takes the checkpoint folder of each node; `gpulib ckpt verify FILE` checks one file")
    report = find_latest(args.dirs, deep=args.deep)
    if args.format == "json":
        import json  # noqa: PLC0415 - only --json pays for it

        json.dump(report.to_dict(), sys.stdout, indent=1, default=str)
        print()
    else:
        print(report.to_text())
    if report.resume_from:
        return exit_codes.OK
    return exit_codes.HARD if any(c.untrusted for c in report.candidates) else exit_codes.SOFT
