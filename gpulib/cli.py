"""``gpulib`` command line. Each capability registers its own sub-commands.

A capability module named in :data:`COMMANDS` exposes ``register(subparsers)``, which adds its
parsers and sets ``func`` (returning the exit code) as the parser default.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from gpulib import __version__
from gpulib.errors import GpulibError

#: command name -> the module that registers it. Only the module of the command being run is
#: imported, so ``gpulib ckpt`` starts without pandas/plotly/papermill (start-up is most of its time).
COMMANDS = {
    "collect": "gpulib.collect.cli",
    "verify": "gpulib.collect.cli",
    "diagnose": "gpulib.diagnose.cli",
    "ckpt": "gpulib.checkpoints.cli",
    "nccl-test": "gpulib.nccl.cli",
    "nccl-parse": "gpulib.nccl.cli",
    "run": "gpulib.runbooks.cli",
    "archive": "gpulib.runbooks.cli",
    "fleet": "gpulib.fleet.cli",
    "storage-probe": "gpulib.storage.cli",
    "watch": "gpulib.watch.cli",
    "slurm": "gpulib.slurm.cli",
}


def _modules_for(argv: list[str]) -> list[str]:
    """The module of the first command word in ``argv``, or every module (for help and errors)."""
    for word in argv:
        if word in COMMANDS:
            return [COMMANDS[word]]
    return sorted(set(COMMANDS.values()))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpulib",
        description="Runbook for interrupted multi-GPU training: collect, diagnose, recover, relaunch.",
    )
    parser.add_argument("--version", action="version", version=f"gpulib {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _modules_for(sys.argv[1:] if argv is None else argv):
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="gpulib: %(levelname)s: %(message)s"
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except GpulibError as exc:
        print(f"gpulib {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
