"""Checks of the collective tester's arguments that need no torch.

They run in ``gpulib nccl-test`` before torchrun starts and again in each worker before the ranks
wait on each other, so a bad size or data type is one clear message, not N ranks timing out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpulib.errors import InputError
from gpulib.nccl import nics
from gpulib.nccl.sizes import dtype, size_sweep


def validate_args(args: argparse.Namespace) -> None:
    """Argument errors that need no torch: raised before torchrun starts or before ranks wait."""
    size_sweep(args.minbytes, args.maxbytes, args.stepfactor, args.stepbytes)
    nics.from_flags(args.nic_gbps, args.nics)
    dt = dtype(args.datatype)
    if dt.name in ("uint32", "uint64"):
        raise InputError(f"data type {dt.name} has no torch.distributed support", hint="use int32/int64")
    if args.op == "avg" and not dt.is_float:
        raise InputError("-o avg needs a floating-point type", hint="use -d float")
    if args.bundle and Path(args.bundle).exists():
        raise InputError("bundle already exists", path=args.bundle, hint="bundles are never overwritten; pick a new --bundle")
