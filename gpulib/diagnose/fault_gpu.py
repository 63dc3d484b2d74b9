"""The GPU of a rank's own GPU error, from the one GPU of its node whose own record shows that fault.

A rank's traceback says ``CUDA error: uncorrectable ECC error encountered`` and names no GPU; the
node's ``nvidia-smi -q`` (or ``nvidia-bug-report``) has a section per GPU, and one of them counts
uncorrectable DRAM errors. The GPU rules read that section into a finding on that host and GPU
(bus id, index from its Minor Number); the job rules read the traceback into the root cause with a
rank and, once the neighbourhood named its node (:mod:`.neighbourhood`), a host. This joins the two
records on host and fault category, the way an operator reads the bug report: the GPU to reset or
replace is the one GPU of that node that shows the same fault, and the root cause says so.
"""

from __future__ import annotations

from gpulib.diagnose.context import Context, place
from gpulib.findings import Finding
from gpulib.vocabulary import GPU_CATEGORIES


def adopt_hardware_gpu(ctx: Context, root: Finding) -> None:
    """Give ``root`` (a rank's GPU error on a known host, naming no GPU) the GPU of the one hardware
    finding of its category on that host; nothing when none or several GPUs there show it."""
    if root.gpu_index is not None or root.gpu_pci or not root.host or root.category not in GPU_CATEGORIES:
        return
    gpus: dict[object, Finding] = {}
    for f in ctx.findings:
        if f is root or not f.hardware or f.category != root.category or f.host != root.host:
            continue
        key = f.gpu_pci or f.gpu_index
        if key is not None:
            gpus.setdefault(key, f)
    if len(gpus) != 1:
        return
    seen = next(iter(gpus.values()))
    root.gpu_pci = seen.gpu_pci
    root.gpu_index = seen.gpu_index
    root.gpu_uuid = root.gpu_uuid or seen.gpu_uuid
    place(ctx, root, host=root.host, pci=root.gpu_pci)
    where = ", ".join(f"{e.file}:{e.line}" if e.line else e.file for e in seen.quotes[:2]) or seen.title
    said = f"the one GPU on {root.host} whose own record shows this fault ({where})"
    root.extra.setdefault("identified_by", {}).update(gpu_index=said, gpu_pci=said)
