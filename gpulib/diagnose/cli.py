"""``gpulib diagnose PATH... [--format text|json] [--tz ZONE]``.

Exit codes a scheduler can act on: 0 no interruption, 1 soft (relaunch is safe after the fix),
2 usage/input error, 3 hard (drain the node first), 4 unknown (collect more evidence).
"""

from __future__ import annotations

import json
import os
import sys

from gpulib.diagnose import diagnose

EXIT_CODES = {"none": 0, "soft": 1, "hard": 3, "unknown": 4}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "diagnose", help="root cause of an interrupted job from bundles, logs and tool outputs",
        description="Read evidence bundles and raw folders/files (any names), find the first failure, the "
                    "culprit host/GPU/rank, hard or soft, what to do, and the checkpoint to resume from.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="evidence bundles, folders or files")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--tz", default=None,
                   help="zone of timestamps printed without one (dmesg -T, nvidia-smi), e.g. Europe/Berlin; "
                        "default: the bundle's zone, else UTC")
    p.set_defaults(func=run)


def run(args) -> int:
    result = diagnose(args.paths, tz=args.tz)
    text = json.dumps(result.to_dict(), indent=2) + "\n" if args.format == "json" else result.to_text()
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `gpulib diagnose ... | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_CODES.get(result.interruption, 4)
