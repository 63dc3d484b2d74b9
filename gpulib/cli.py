"""``gpulib`` command line. Each capability registers its own sub-commands.

A capability module listed in :data:`COMMAND_MODULES` exposes ``register(subparsers)``, which
adds its parsers and sets ``func`` (returning the exit code) as the parser default.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from gpulib import __version__
from gpulib.errors import GpulibError

COMMAND_MODULES = (
    "gpulib.checkpoints.cli",
    "gpulib.collect.cli",
    "gpulib.diagnose.cli",
    "gpulib.fleet.cli",
    "gpulib.nccl.cli",
    "gpulib.runbooks.cli",
    "gpulib.watch.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpulib",
        description="Runbook for interrupted multi-GPU training: collect, diagnose, recover, relaunch.",
    )
    parser.add_argument("--version", action="version", version=f"gpulib {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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
