"""Checks before a relaunch that need no GPU run: the job's NCCL environment against the nodes
(:mod:`nccl_env`) and the job's CUDA runtime against each node's driver (:mod:`cuda_compat`).
Both take records (environment dicts, parsed ``ip link``/``ibstat``, version strings) and
return typed findings, each with the exact line to change."""
