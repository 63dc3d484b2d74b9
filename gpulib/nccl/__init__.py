"""NCCL fabric tester: nccl-tests' numbers from torch.distributed, a verdict, and the slow link.

Run it under torchrun (``torchrun --nproc-per-node 8 -m gpulib.nccl -b 1M -e 1G``) or with
``gpulib nccl-test``. The torch-free parts (sizes, bandwidth factors, thresholds, verdict, the
slow-link analysis, the report layout) import without torch, so the parser and the notebooks
use them on any machine.
"""
