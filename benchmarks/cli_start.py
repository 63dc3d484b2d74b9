"""Start-up of the command line: ``gpulib --help`` vs ``python -c pass``, whole processes, same run.

``gpulib --help`` lists every command from ``gpulib.cli.COMMANDS`` without importing any of them;
what is left is the interpreter, ``gpulib/__init__`` (logging) and argparse. Round-robin, best of
N (shared machines are noisy). Target: ``gpulib --help`` < 0.15 s. Also times ``gpulib ckpt
--help`` (one command module). Usage: ``.venv/bin/python benchmarks/cli_start.py [RUNS]``.
"""

from __future__ import annotations

import subprocess
import sys
import time


def main(runs: int) -> int:
    cmds = {"python -c pass": [sys.executable, "-c", "pass"],
            "gpulib --help": [sys.executable, "-m", "gpulib", "--help"],
            "gpulib ckpt --help": [sys.executable, "-m", "gpulib", "ckpt", "--help"]}
    best = dict.fromkeys(cmds, float("inf"))
    for _ in range(runs):
        for name, cmd in cmds.items():
            start = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
            best[name] = min(best[name], time.perf_counter() - start)
    anchor = best["python -c pass"]
    for name, seconds in best.items():
        print(f"{name:<20} best {seconds:6.3f} s  ({seconds / anchor:4.1f}x python -c pass)")
    print(f"gpulib --help: {best['gpulib --help']:.3f} s (target < 0.15 s)")
    return 0 if best["gpulib --help"] < 0.15 else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
