"""A fresh clone's ``make demo``: wall time (target < 60 s with the wheels in pip's cache), venv size, no torch.

What a new user pays before seeing the first report: ``git clone``, then ``make demo`` creates the
venv, installs gpulib with what the demo imports, registers the kernel and runs the incident
runbook on the bundled example. The clone is made in a temp dir from this repository's HEAD
(committed files only) and deleted after. The first ``make demo`` fills pip's cache (it is not
timed as the result); the venv is then removed and ``make demo`` is timed again from scratch:
that second figure is "a fresh clone with the wheels on disk".

Usage: ``python benchmarks/make_demo.py [--runs N]`` (any Python >= 3.10 with ``make`` and ``git``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 60.0


def _size_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / (1 << 20)


def _make_demo(clone: Path) -> tuple[float, int, str]:
    started = time.perf_counter()
    proc = subprocess.run(["make", "demo", f"PYTHON={sys.executable}"], cwd=clone, capture_output=True, text=True)
    return time.perf_counter() - started, proc.returncode, proc.stdout[-1500:] + proc.stderr[-1500:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="timed fresh runs after the cache-filling one (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpulib-make-demo-") as tmp:
        clone = Path(tmp) / "gpulib"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        warm, code, tail = _make_demo(clone)
        print(f"first make demo (fills pip's cache): {warm:.1f} s, exit {code}")
        if code:
            print(tail)
            return 1
        times = []
        for _ in range(args.runs):
            shutil.rmtree(clone / ".venv")
            shutil.rmtree(clone / "archive", ignore_errors=True)
            took, code, tail = _make_demo(clone)
            if code:
                print(tail)
                return 1
            times.append(took)
        venv = clone / ".venv"
        torch = sorted(p.name for p in venv.glob("lib/python*/site-packages/torch*"))
        print(f"fresh make demo, wheels cached: {', '.join(f'{t:.1f}' for t in times)} s "
              f"(target < {TARGET_S:.0f} s: {'met' if max(times) < TARGET_S else 'NOT met'})")
        print(f"venv: {_size_mib(venv):,.0f} MiB; torch installed: {'yes ' + str(torch) if torch else 'no'}")
        return 0 if max(times) < TARGET_S and not torch else 1


if __name__ == "__main__":
    raise SystemExit(main())
