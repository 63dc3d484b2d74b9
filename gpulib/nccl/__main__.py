"""``torchrun --nproc-per-node N -m gpulib.nccl ...``: one tester worker per rank."""

from gpulib.nccl.cli import main

raise SystemExit(main())
