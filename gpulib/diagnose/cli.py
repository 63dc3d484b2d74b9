"""``gpulib diagnose PATH... [--format text|json] [--tz ZONE]``.

Exit codes a scheduler can act on: 0 no interruption, 1 soft (relaunch is safe after the fix),
2 usage/input error, 3 hard (drain the node first), 4 unknown (collect more evidence).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpulib import exit_codes
from gpulib.diagnose.cache import Evidence
from gpulib.parsers.logtime import zone_argument
from gpulib.readable import require_readable

THIS_COMMAND = """0 no interruption (positive evidence of a normal end, or no failure line and no log that stops mid-run)
1 soft (the process failed, hardware fine: fix and relaunch)
2 a path that does not exist or cannot be read, a bad flag
3 hard (a GPU or node failed: drain it first)
4 unknown (failure lines without an explained cause, or nothing readable: collect more)"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "diagnose", help="root cause of an interrupted job from bundles, logs and tool outputs",
        description="Read evidence bundles and raw folders/files (any names), find the first failure, the "
                    "culprit host/GPU/rank, hard or soft, what to do, and the checkpoint to resume from.",
        epilog=exit_codes.epilog(THIS_COMMAND))
    p.add_argument("paths", nargs="+", metavar="PATH", help="evidence bundles, folders or files")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--tz", default=None, type=zone_argument,
                   help="zone of timestamps printed without one (dmesg -T, nvidia-smi), e.g. Europe/Berlin; "
                        "default: the bundle's zone, else UTC")
    p.add_argument("--write-digest", action="store_true",
                   help="write each PATH's digest.json (one node's parsed evidence) instead of diagnosing; "
                        "`gpulib collect --digest` runs this on every node")
    p.set_defaults(func=run)


def _write_digests(args) -> int:
    from gpulib.diagnose import node_digest  # noqa: PLC0415 - only this mode needs the writer

    for path in args.paths:
        if not Path(path).is_dir():
            sys.stderr.write(f"gpulib diagnose: {path}: a digest is written into a node's folder or bundle\n")
            return exit_codes.USAGE
        print(f"digest {node_digest.write(path, tz=args.tz)}")
    return exit_codes.OK


def run(args) -> int:
    # a typo must not read as "nothing wrong": a script would relaunch on exit 0 (gpulib.cli: exit 2)
    require_readable(args.paths, what="evidence", special=False)
    if args.write_digest:
        return _write_digests(args)
    result = Evidence(args.paths, args.tz, full_series=False).diagnose()  # lean: a node's digest for its files
    # a reader that leaves early (`| head`) is handled once, in gpulib.cli.main
    if args.format == "json":
        write_json(result.to_dict(), sys.stdout)
    else:
        sys.stdout.write(result.to_text())
    return exit_codes.for_interruption(result.interruption)


#: A list longer than this is written one compact item a line.
LONG_LIST = 256


def write_json(doc: dict, out) -> None:
    """``doc`` as indented JSON, written as it is encoded. Why not ``json.dumps(doc, indent=2)``:
    indenting runs Python's pure-Python encoder, which holds every piece of the text until it joins
    them - for a 10,000-node incident (80,000 ``inputs``) ~80 MiB and ~4 s, more than the diagnosis
    of the digests needed. A long list's items are each encoded by the C encoder on one line
    (still valid JSON, still one item a line to ``grep``)."""
    out.write("{")
    for n, (key, value) in enumerate(doc.items()):
        out.write(f'{"," if n else ""}\n  {json.dumps(key)}: ')
        if isinstance(value, list) and len(value) > LONG_LIST:
            out.write("[")
            for i, item in enumerate(value):
                out.write(f'{"," if i else ""}\n    {json.dumps(item)}')
            out.write("\n  ]")
        else:
            out.write(json.dumps(value, indent=2).replace("\n", "\n  "))
    out.write("\n}\n" if doc else "}\n")
