"""``gpulib verify`` (and, once built, ``gpulib collect``)."""

from __future__ import annotations

from gpulib.evidence import verify


def _verify(args) -> int:
    worst = 0
    for root in args.bundle:
        report = verify(root)
        print("\n".join(report.lines()))
        worst = worst or (0 if report.ok else 1)
    return worst


def register(subparsers) -> None:
    p = subparsers.add_parser("verify", help="re-hash an evidence bundle and report changed or missing files")
    p.add_argument("bundle", nargs="+", help="bundle directory (contains manifest.json)")
    p.set_defaults(func=_verify)
