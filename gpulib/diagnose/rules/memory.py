"""One line, two readings: when the catalogue knows a CUDA error is an *allocation* failure.

The job rules read any ``CUDA error: <text>`` as a CUDA error of the application (an illegal
address, a device assert). Some of these texts are GPU memory running out under another name:
cuBLAS failing to allocate its workspace when it creates a handle (``CUBLAS_STATUS_ALLOC_FAILED``)
is the classic one - the batch grew, or another process holds the GPU's memory. The catalogue row
``framework-gpu-oom`` reads the same line as ``cuda_oom``; this module drops the generic reading of
a line the OOM reading also holds, so the operator is told to free GPU memory rather than to hunt
for a kernel bug.
"""

from __future__ import annotations

from gpulib.diagnose.context import Context
from gpulib.findings import Finding

#: Findings of the job rules that read a CUDA error's text generically.
GENERIC_CUDA_ERROR = "cuda-error"


def run(ctx: Context) -> None:
    oom_lines = {(e.file, e.line) for f in ctx.findings if f.category == "cuda_oom" and f.role == "cause"
                 and f.id.startswith("sig-") for e in f.quotes}
    if not oom_lines:
        return

    def told_twice(f: Finding) -> bool:
        return (f.id.startswith(GENERIC_CUDA_ERROR) and f.category == "application_error" and bool(f.quotes)
                and all((e.file, e.line) in oom_lines for e in f.quotes))

    ctx.findings[:] = [f for f in ctx.findings if not told_twice(f)]


__all__ = ["run"]
