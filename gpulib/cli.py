"""``gpulib`` command line. Each capability registers its own sub-commands.

A capability module named in :data:`COMMANDS` exposes ``register(subparsers)``, which adds its
parsers and sets ``func`` (returning the exit code) as the parser default.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback

from gpulib import __version__, exit_codes
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
    "drill": "gpulib.notebook.cli",
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
        epilog=exit_codes.epilog(), formatter_class=exit_codes.HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpulib {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _modules_for(sys.argv[1:] if argv is None else argv):
        importlib.import_module(name).register(subparsers)
    _add_exit_table(parser)
    return parser


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                yield sub
                yield from _subcommands(sub)


def _add_exit_table(parser: argparse.ArgumentParser) -> None:
    """Every command's ``--help`` ends with the one exit-code table (:mod:`gpulib.exit_codes`):
    a command that says what it returns passes ``epilog=exit_codes.epilog(...)``; any other
    gets the table alone here, so no command can lack it."""
    for sub in _subcommands(parser):
        sub.formatter_class = exit_codes.HelpFormatter
        if exit_codes.table_text() not in (sub.epilog or ""):
            sub.epilog = (sub.epilog + "\n\n" if sub.epilog else "") + exit_codes.epilog()


def _quiet_stdout() -> None:
    """The reader of our stdout left (``gpulib ... | head``): point stdout at /dev/null so that
    the interpreter's final flush cannot raise again (the Python docs' recipe for SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _flushed(code: int) -> int:
    """Flush stdout inside our own handling: a closed pipe surfaces here (not as a traceback at
    interpreter exit) and ends the command quietly with :data:`exit_codes.PIPE_CLOSED`."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        return exit_codes.PIPE_CLOSED
    return code


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version or a usage error: argparse printed and exits
        code = _flushed(exc.code if isinstance(exc.code, int) else exit_codes.USAGE)
        raise SystemExit(code) from None
    except BrokenPipeError:  # --help into a closed pipe, while argparse was writing
        _quiet_stdout()
        return exit_codes.PIPE_CLOSED
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="gpulib: %(levelname)s: %(message)s"
    )
    try:
        if not getattr(args, "func", None):
            parser.print_help()
            return _flushed(exit_codes.USAGE)
        return _flushed(int(args.func(args) or 0))
    except BrokenPipeError:
        _quiet_stdout()
        return exit_codes.PIPE_CLOSED
    except GpulibError as exc:
        print(f"gpulib {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED
    except Exception:  # noqa: BLE001 - a bug must not exit 1 ("soft": a script would relaunch)
        traceback.print_exc()
        print(f"gpulib {args.command}: internal error (a bug in gpulib, please report it with the traceback "
              f"above); exit {exit_codes.RUN_FAILED}", file=sys.stderr)
        return exit_codes.RUN_FAILED
