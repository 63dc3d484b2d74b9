"""Run many ``gpulib`` command lines in one process, each as ``gpulib.cli.main(argv)`` with its
output captured, and print one JSON line per case: the matrix pays Python's start-up once, not
per cell, and a hang or runaway read ends that case, not the test run.

Usage: ``python -m tests.adversarial.cli_child CASES.json`` where CASES.json is a list of
``{"id": ..., "argv": [...]}`` (argv items may be ``{"b": "<latin-1 text>"}`` for byte paths).
A case that runs past ``SECONDS`` is stopped by SIGALRM (a blocking ``open`` of a FIFO returns
EINTR and the handler's exception ends it) and reported as ``"hang": true``; the address space
is capped, so reading ``/dev/zero`` to its end fails fast instead of filling the machine.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import sys
import time
import traceback

SECONDS = 20
MEMORY_BYTES = 4 << 30


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so the CLI's own ``except Exception`` cannot hide it."""


def _alarm(_signum, _frame):
    raise Hang()


def _arg(item):
    return os.fsdecode(item["b"].encode("latin-1")) if isinstance(item, dict) else item


def run_case(argv: list[str]) -> dict:
    from gpulib.cli import main

    out, err = io.StringIO(), io.StringIO()
    code, hang, escaped = None, False, None
    started = time.monotonic()
    signal.alarm(SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:  # argparse: --help, usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    except Hang:
        hang = True
    except BaseException:  # noqa: BLE001 - what escaped main() is the finding
        escaped = traceback.format_exc()
    finally:
        signal.alarm(0)
    return {"code": code, "hang": hang, "out": out.getvalue()[-4000:], "err": err.getvalue()[-4000:],
            "escaped": escaped, "seconds": round(time.monotonic() - started, 2)}


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    signal.signal(signal.SIGALRM, _alarm)
    with open(sys.argv[1], encoding="utf-8") as fh:
        cases = json.load(fh)
    for case in cases:
        result = run_case([_arg(a) for a in case["argv"]])
        sys.__stdout__.write(json.dumps({"id": case["id"], **result}) + "\n")
        sys.__stdout__.flush()


if __name__ == "__main__":
    main()
