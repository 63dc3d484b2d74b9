"""Headless runbook speed: ``gpulib run incident`` vs executing as many empty notebooks with papermill.

The anchor is the floor any papermill-based runner pays: one kernel start, parameter injection
and output write per notebook. Both sides run in this process, one after the other:

- anchor: N sequential ``papermill.execute_notebook`` calls on an empty notebook (one empty,
  ``parameters``-tagged cell), N = the number of steps of the incident runbook;
- gpulib: the full incident runbook (validation, parallel execution with ``--jobs`` = cores,
  offline HTML report, findings, manifest, read-only archive) on the bundled example incident.

Prints both times and the ratio (gpulib / anchor); the target is <= 1.5.
Usage: ``.venv/bin/python benchmarks/runbook_headless.py [EVIDENCE] [--jobs N]``
(EVIDENCE defaults to the bundled examples/incident-gpu-fell-off-bus).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import papermill

from gpulib.runbooks import run_runbook
from gpulib.runbooks.execute import KERNEL_NAME
from gpulib.runbooks.spec import find_runbook, load_runbook

REPO = Path(__file__).resolve().parents[1]


def empty_notebook(path: Path) -> Path:
    cell = nbformat.v4.new_code_cell("", metadata={"tags": ["parameters"]})
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": {"name": KERNEL_NAME, "language": "python",
                                                                           "display_name": "Python 3"}})
    nbformat.write(nb, str(path))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evidence", nargs="?", default=str(REPO / "examples" / "incident-gpu-fell-off-bus"))
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if not Path(args.evidence).exists():
        print(f"evidence {args.evidence} not found; pass an incident folder", file=sys.stderr)
        return 2
    steps = len(load_runbook(find_runbook("incident")).steps)
    with tempfile.TemporaryDirectory(prefix="gpulib-bench-") as tmp:
        tmp = Path(tmp)
        empty = empty_notebook(tmp / "empty.ipynb")
        started = time.perf_counter()
        for n in range(steps):
            papermill.execute_notebook(str(empty), str(tmp / f"empty-{n}.ipynb"), parameters={"interactive": False},
                                       kernel_name=KERNEL_NAME, cwd=str(tmp), progress_bar=False,
                                       start_timeout=60, execution_timeout=600,
                                       extra_arguments=["--IPKernelApp.log_level=ERROR"])
        anchor = time.perf_counter() - started
        started = time.perf_counter()
        outcome = run_runbook("incident", values={"evidence": str(Path(args.evidence).resolve())},
                              archive_root=tmp / "archive", jobs=args.jobs, cwd=REPO)
        ours = time.perf_counter() - started
        jobs = json.loads((outcome.path / "manifest.json").read_text())["jobs"]
    failed = [s.id for s in outcome.steps if s.status != "ok"]
    print(f"anchor  {steps} x papermill on an empty notebook: {anchor:7.2f} s")
    print(f"gpulib  run incident ({steps} notebooks, --jobs {jobs}, exit {outcome.exit_code}"
          + (f", failed: {', '.join(failed)}" if failed else "") + f"): {ours:7.2f} s")
    print(f"ratio   {ours / anchor:.2f}x  (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
