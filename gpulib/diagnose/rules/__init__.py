"""The diagnosis rules, in the order they run: an explicit list, like the parser registry.

Why a list with phases: a rule may read the findings of the rules before it (the catalogue's
rule says only what the kind-specific rules did not; Slurm's node-lost defers to the kernel's;
Ray's and srun's rules revise what the others named), so the order is part of what a rule
means. :data:`RULES` is that order, grouped by :data:`PHASES`; within a phase the rules run as
listed. A new ``rules/<topic>.py`` module is one :class:`RuleSpec` here, in the first phase
whose findings it does not need (``tests/diagnose/test_registry.py`` checks that every module of
this package is listed once and the phases never go back).

What lives here and what does not: this package holds exactly the modules :data:`RULES` lists.
What the rules share (``context``, ``joins``, ``neighbourhood``, ``addresses``, ``generic``) and
the passes that run once after all of them, on the findings they made (``verdict``,
``diverged``, ``first_batch``, ``unread``), stay in :mod:`gpulib.diagnose`, whose
``diagnose()`` calls them in its short pipeline.

``kinds`` are the files whose records a rule reads (:mod:`gpulib.evidence.kinds`); a rule that
also reads the catalogue's signals, which every readable file carries, says so with
``signals=True``. Both are what a reader needs to know before changing a parser; the pipeline
runs every rule on every evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpulib.diagnose.context import Context
from gpulib.diagnose.rules import (
    boots,
    bootstrap,
    cuda_stack,
    data_wait,
    fabric,
    gpu,
    gsp,
    held_memory,
    ibverbs,
    job,
    kernel,
    memory,
    memory_pressure,
    nccl_tests,
    netfs,
    nvlink_status,
    other,
    outage,
    pcie_p2p,
    psu,
    query_time,
    ray,
    sel,
    shm,
    short_node,
    signatures,
    slurm,
    srun,
    stall,
    throughput,
    wtmp,
)
from gpulib.evidence import kinds as k

#: records: the kernel, GPU and job rules over their own files; joins: rules that place other
#: files' facts (BMC, Slurm, storage, boots, power) against what those found; catalogue: what the
#: signature catalogue says that no rule said; revisions: rules that re-read the findings so far.
PHASES = ("records", "joins", "catalogue", "revisions")


@dataclass(frozen=True)
class RuleSpec:
    name: str
    phase: str
    kinds: tuple[str, ...]
    run: Callable[[Context], None]
    signals: bool = False


RULES: tuple[RuleSpec, ...] = (
    RuleSpec("kernel", "records", (*k.KERNEL, k.DCGM_EXPORTER), kernel.run),
    RuleSpec("gpu", "records", k.GPU_STATE, gpu.run),
    RuleSpec("job", "records", k.JOB_LOGS, job.run, signals=True),
    RuleSpec("data_wait", "records", (k.TRAINING_LOG,), data_wait.run),
    RuleSpec("nvlink_status", "records", (k.NVIDIA_SMI_NVLINK,), nvlink_status.run),
    RuleSpec("other", "joins", (k.SLURM_SINFO, k.DCGMI_DIAG, k.FLIGHT_RECORDER, k.FUSER, k.IBSTAT, k.IPMITOOL_SDR,
                                k.KERNEL_LOG, k.TRAINING_LOG), other.run),
    RuleSpec("slurm", "joins", (k.SLURM_JOB, k.SACCT, k.SLURM_SINFO), slurm.run),
    RuleSpec("sel", "joins", (k.IPMITOOL_SEL, k.IPMITOOL_SEL_TIME, k.TRAINING_LOG), sel.run),
    RuleSpec("shm", "joins", (*k.FILESYSTEM_USAGE, k.TRAINING_LOG), shm.run, signals=True),
    RuleSpec("netfs", "joins", (*k.FILESYSTEM_USAGE, k.TRAINING_LOG), netfs.run, signals=True),
    RuleSpec("wtmp", "joins", (k.WTMP, k.TRAINING_LOG), wtmp.run),
    RuleSpec("psu", "joins", (k.NVIDIA_SMI_CSV, k.NVIDIA_SMI_XML, k.NVML_SNAPSHOT), psu.run, signals=True),
    RuleSpec("boots", "joins", (k.JOURNAL_BOOTS,), boots.run),
    RuleSpec("query_time", "joins", (k.GPU_QUERY_TIME,), query_time.run),
    RuleSpec("held_memory", "joins", (*k.GPU_SNAPSHOT_ROWS, k.NCCL_TESTS, k.TRAINING_LOG),
             held_memory.run, signals=True),
    RuleSpec("short_node", "joins", k.GPU_SNAPSHOT_ROWS, short_node.run, signals=True),
    RuleSpec("stall", "joins", (*k.GPU_SNAPSHOT_ROWS, k.TRAINING_LOG), stall.run, signals=True),
    RuleSpec("nccl_tests", "joins", (k.NCCL_TESTS, k.TRAINING_LOG), nccl_tests.run),
    RuleSpec("pcie_p2p", "joins", (*k.JOB_LOGS, k.NVIDIA_SMI_TOPO), pcie_p2p.run, signals=True),
    RuleSpec("memory_pressure", "joins", (k.HOST_MEMORY,), memory_pressure.run, signals=True),
    RuleSpec("ibverbs", "joins", (), ibverbs.run, signals=True),
    RuleSpec("signatures", "catalogue", (), signatures.run, signals=True),
    RuleSpec("throughput", "catalogue", (*k.FILESYSTEM_USAGE, k.TRAINING_LOG), throughput.run),
    RuleSpec("fabric", "catalogue", (k.TRAINING_LOG,), fabric.run, signals=True),
    RuleSpec("bootstrap", "catalogue", (k.TRAINING_LOG,), bootstrap.run),
    RuleSpec("gsp", "revisions", (), gsp.run, signals=True),
    RuleSpec("ray", "revisions", (), ray.run),
    RuleSpec("memory", "revisions", (), memory.run),
    RuleSpec("srun", "revisions", (), srun.run, signals=True),
    RuleSpec("outage", "revisions", (), outage.run),
    RuleSpec("cuda_stack", "revisions", (), cuda_stack.run, signals=True),
)
