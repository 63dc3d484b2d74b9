"""``python -m gpulib.checkpoints inspect|verify|latest ...``: the ``gpulib ckpt`` commands without
importing gpulib's other capabilities - the quickest start, for scripts that check many files."""

from __future__ import annotations

import argparse
import sys

from gpulib.checkpoints.cli import register
from gpulib.terminal import escaped_output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpulib.checkpoints")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ckpt", *(sys.argv[1:] if argv is None else argv)])
    with escaped_output():  # tensor names and pickle keys are free text: printed safe
        return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
