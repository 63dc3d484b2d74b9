"""Start JupyterLab on a runbook notebook, also as root: ``gpulib lab`` and ``gpulib drill --lab``.

Why a command of its own: GPU nodes and containers run as root, and ``jupyter lab`` refuses to
start as root ("Running as root is not recommended. Use --allow-root.", exit 1). The README's
first notebook command then fails on exactly the machines the runbook is for. Here
``--allow-root`` is added when the effective uid is 0 (and only then: elsewhere Jupyter's own
guard stays in force).

Why JupyterLab runs as a child rather than replacing this process: its exit status must mean
what ``gpulib``'s one exit table says (0 ended normally, 5 it failed to start or crashed, with
Jupyter's message above), not Jupyter's own numbers. Ctrl-C belongs to JupyterLab while it runs
(it asks to confirm a shutdown), so this process waits on through it until JupyterLab has ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpulib import exit_codes
from gpulib.errors import InputError

LAB_EXIT = ("0 JupyterLab started and was shut down normally (Ctrl-C twice, or File > Shut Down)\n"
            "2 the notebook or folder does not exist\n"
            "5 JupyterLab failed to start or crashed (its message above)")


def lab_argv(target: Path, *, euid: int | None = None) -> list[str]:
    """The ``jupyter lab`` command line for ``target`` (a notebook or a folder); ``--allow-root``
    when running as root. JupyterLab serves the notebook's folder and opens the notebook."""
    argv = [sys.executable, "-m", "jupyter", "lab", str(target)]
    if (os.geteuid() if euid is None else euid) == 0:
        argv.append("--allow-root")
    return argv


def shown(argv: list[str]) -> str:
    """The command as an engineer types it (``jupyter lab ...``, not the interpreter's path)."""
    return " ".join(["jupyter", "lab", *argv[4:]])


def require_target(path: str | Path) -> Path:
    target = Path(path).expanduser()
    if not target.exists():
        raise InputError("no such notebook or folder", path=str(path),
                         hint="give a notebook (.ipynb) or a folder of notebooks; without one, gpulib lab opens "
                              "notebooks/00_triage.ipynb of this gpulib")
    return target.resolve()


def start(argv: list[str]) -> int:
    """Run JupyterLab until it ends; its failure is :data:`exit_codes.RUN_FAILED`."""
    sys.stdout.flush()
    proc = subprocess.Popen(argv)
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:
            continue  # JupyterLab got the same Ctrl-C (one process group): it asks to confirm, or stops
    if code == 0:
        return exit_codes.OK
    print(f"gpulib: jupyter lab exited with status {code} (its message is above); exit {exit_codes.RUN_FAILED}",
          file=sys.stderr)
    return exit_codes.RUN_FAILED
