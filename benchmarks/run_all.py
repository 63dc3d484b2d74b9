"""Run every benchmark of this folder in turn (``make bench``) and say which ones failed.

Each benchmark prints its own ratios against its anchor; this runner only sequences them, one
at a time (they measure time, so running two at once would spoil both).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    names = argv or sorted(p.stem for p in HERE.glob("*.py") if p.stem != "run_all")
    failed = []
    for name in names:
        print(f"\n=== benchmarks/{name}.py", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / f"{name}.py")])
        print(f"=== {name}: exit {code} after {time.perf_counter() - started:.0f} s", flush=True)
        if code:
            failed.append(name)
    print(f"\n{len(names) - len(failed)} of {len(names)} benchmarks ran; failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
