"""When an Xid that is usually one process's misfortune says the GPU itself is bad.

NVIDIA's catalogue answers two Xids with "restart the application" (``RESTART_APP``), and the Xid
table reads them soft; the vendor's own advice says what turns them into a device fault, and this
module reads that from the evidence, one GPU at a time:

* **Xid 94, a contained uncorrectable memory error.** The error was contained to the processes
  using the memory; the GPU stays in service and the row remap activates at its next reset (DCGM
  warns, GPUD asks for a reboot, the device plugin marks the GPU unhealthy until restarted). It is
  hard when the evidence shows more: the *driver's own line* says the GPU must be reset (``RST:
  Yes`` or ``D-RST: Yes``: drain and reset), or the GPU logs it again as a separate event (memory
  that keeps failing uncorrectably: drain, reset, replace if it returns). One event whose line
  says ``RST: No, D-RST: No`` stays soft: the job restarts, the GPU serves. (NVIDIA, "A100 GPU
  Memory Error Management": contained errors need no GPU reset; the recovery action "Reset" or
  "Drain and Reset" is what asks for one - the line's ``RST``/``D-RST``.)
* **Xid 31, a GPU memory page fault (MMU fault).** Almost always the faulting process's bug (an
  illegal address). The catalogue's test for a device: "the same GPU repeats it under different
  applications". Here: MMU faults on ONE GPU from at least ``MIN_PROCESSES`` different processes,
  while another GPU of the same node is seen in the evidence and has none - the same work ran
  elsewhere without faulting. Then the GPU is the suspect (``gpu_memory_error``, hard: drain it and
  run ``dcgmi diag -r 3``). Faults of one process, or faults on every GPU, stay the application's.

Each revision says why in the finding's title, so the operator sees the rule's reason next to the
evidence.
"""

from __future__ import annotations

import re
from collections import defaultdict

from gpulib.diagnose.context import Context
from gpulib.findings import Finding

CONTAINED = 94
MMU_FAULT = 31
#: Different processes whose MMU faults on one GPU make the GPU, not a program, the suspect.
MIN_PROCESSES = 3
#: The driver's verdict on a contained error (R535+): ``RST`` GPU reset required, ``D-RST`` drain and reset.
_RESET_SAID = re.compile(r"\b(?:D-)?RST: Yes\b")
_PID = re.compile(r"\bpid=(\d+)")


def promote(ctx: Context) -> None:
    """Harden the Xid 94 and Xid 31 findings whose GPU the evidence shows to be at fault."""
    by_gpu: dict[tuple, list[Finding]] = defaultdict(list)
    for f in ctx.findings:
        if f.xid is not None and f.gpu_pci:
            by_gpu[(f.host, f.gpu_pci)].append(f)
    for (host, _pci), found in by_gpu.items():
        _contained(found)
        others = [g for (h, p), fs in by_gpu.items() if h == host and p != _pci for g in fs]
        _mmu_faults(found, others)


def _contained(found: list[Finding]) -> None:
    events = [f for f in found if f.xid == CONTAINED and f.role == "cause"]
    for f in events:
        said = any(_RESET_SAID.search(e.text) for e in f.quotes)
        if said:
            _harden(f, "the driver's line says the GPU must be reset")
        elif len(events) > 1:
            _harden(f, f"repeated on this GPU ({len(events)} separate events): its memory keeps failing")


def _mmu_faults(found: list[Finding], others: list[Finding]) -> None:
    faults = [f for f in found if f.xid == MMU_FAULT and f.role == "cause"]
    pids = {m[1] for f in faults for e in f.quotes if (m := _PID.search(e.text))}
    if len(pids) < MIN_PROCESSES or not others or any(g.xid == MMU_FAULT for g in others):
        return
    for f in faults:
        f.category = "gpu_memory_error"
        _harden(f, f"{len(pids)} different processes faulted on this GPU and none on the node's other GPUs; "
                   "the device, not a program")
        f.actions = ["Drain the GPU and run `dcgmi diag -r 3` on it; rerun the job on another GPU "
                     "(CUDA_VISIBLE_DEVICES) to confirm the program runs there."] + f.actions


def _harden(f: Finding, why: str) -> None:
    f.interruption, f.severity = "hard", "critical"
    f.title += f" (hard: {why})"


__all__ = ["promote"]
