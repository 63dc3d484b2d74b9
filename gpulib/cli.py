"""``gpulib`` command line. Each capability registers its own sub-commands.

A capability module named in :data:`COMMANDS` exposes ``register(subparsers)``, which adds its
parsers and sets ``func`` (returning the exit code) as the parser default.

Start-up is most of the time of a quick command (``gpulib ckpt inspect`` reads a checkpoint's
index in milliseconds), so only what the command line names is imported: the module of the
command being run, or none at all for ``gpulib --help``, whose list is this file's table (kept
equal to each module's own help by tests/test_cli.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

import gpulib
from gpulib import __version__, exit_codes, terminal
from gpulib.errors import GpulibError

#: command name -> (the module that registers it with ``register(subparsers)``, its one line in
#: ``gpulib --help`` as that module registers it).
COMMANDS = {
    "ckpt": ("gpulib.checkpoints.cli",
             "inspect / verify checkpoints and find the newest complete one (no torch, no unpickling)"),
    "verify": ("gpulib.collect.cli", "re-hash an evidence bundle and report changed or missing files"),
    "collect": ("gpulib.collect.cli", "capture an evidence bundle of this host (freeze the scene before any restart)"),
    "diagnose": ("gpulib.diagnose.cli", "root cause of an interrupted job from bundles, logs and tool outputs"),
    "fleet": ("gpulib.fleet.cli", "many nodes: config diff across a job, GPU ledger across incidents"),
    "nccl-test": ("gpulib.nccl.cli", "NCCL/gloo bus bandwidth like nccl-tests, with a PASS/WARN/FAIL verdict"),
    "nccl-parse": ("gpulib.nccl.cli", "read nccl-tests output (any historical layout) and judge it"),
    "run": ("gpulib.runbooks.cli",
            "run a runbook's notebooks headless and archive them (exit 0 ok, 1 warn, 3 no-go, 5 failed)"),
    "archive": ("gpulib.runbooks.cli", "list, show (and re-verify) or diff archived runbook runs"),
    "storage-probe": ("gpulib.storage.cli",
                      "measure a dataset path (throughput, IOPS, latency, file sizes) against the job's need"),
    "watch": ("gpulib.watch.cli",
              "follow training logs; alert on silence, error signatures, slow steps; capture + diagnose"),
    "slurm": ("gpulib.slurm.cli", "Slurm hooks: Epilog capture and HealthCheckProgram drain/resume"),
    "drill": ("gpulib.notebook.cli",
              "set up a triage drill on an incident folder (the answer hidden until the trainee commits)"),
    "notebooks": ("gpulib.notebook.cli", "copy the runbook's notebooks into a folder to open them in JupyterLab"),
    "lab": ("gpulib.notebook.cli",
            "open a runbook notebook in JupyterLab (also as root, as on GPU nodes and in containers)"),
}


def _command_in(argv: list[str]) -> str | None:
    """The first command word in ``argv``, if any."""
    return next((word for word in argv if word in COMMANDS), None)


class _Parser(argparse.ArgumentParser):
    """Sub-command parsers (and theirs, which inherit the class) format with
    :class:`exit_codes.HelpFormatter` from the start: argparse's own formatter imports ``shutil``."""

    def __init__(self, *args, formatter_class=exit_codes.HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: the named command's module registers it (every option, its help);
    without a command word, each command is listed from :data:`COMMANDS` and nothing is imported."""
    parser = argparse.ArgumentParser(
        prog="gpulib",
        description="Runbook for interrupted multi-GPU training: collect, diagnose, recover, relaunch.",
        epilog=exit_codes.epilog(), formatter_class=exit_codes.HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpulib {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    command = _command_in(sys.argv[1:] if argv is None else argv)
    if command is not None:
        importlib.import_module(COMMANDS[command][0]).register(subparsers)
    else:
        for name, (_module, summary) in COMMANDS.items():
            subparsers.add_parser(name, help=summary)
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
    """Run one command; everything it prints on stdout and stderr passes :func:`gpulib.terminal.safe`
    (no control sequence from the evidence reaches the terminal raw; JSON stays the same JSON)."""
    with terminal.escaped_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version or a usage error: argparse printed and exits
        code = _flushed(exc.code if isinstance(exc.code, int) else exit_codes.USAGE)
        raise SystemExit(code) from None
    except BrokenPipeError:  # --help into a closed pipe, while argparse was writing
        _quiet_stdout()
        return exit_codes.PIPE_CLOSED
    # INFO (20) with -v, else WARNING (30); applied by gpulib.logs when a module that logs is
    # imported (now, if one already is): a command that never logs never imports logging
    gpulib.cli_log_level = 20 if args.verbose else 30
    if "gpulib.logs" in sys.modules:
        sys.modules["gpulib.logs"].configure_cli()
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
        import traceback  # noqa: PLC0415 - only a bug pays for it

        traceback.print_exc()
        print(f"gpulib {args.command}: internal error (a bug in gpulib, please report it with the traceback "
              f"above); exit {exit_codes.RUN_FAILED}", file=sys.stderr)
        return exit_codes.RUN_FAILED
