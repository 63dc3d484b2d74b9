"""A GPU that failed to initialise because its GSP firmware did not boot: a firmware fault, not a lost GPU.

Why: ``RmInitAdapter failed`` says only that the driver could not bring a GPU up; alone it reads as
a GPU gone from the bus. On GPUs that run the driver's firmware on their GSP (the GPU System
Processor: Turing and later with the open or GSP-enabled driver) the driver says why in the lines
just before it: ``_kgspBootGspRm: unexpected WPR2 already up``, ``Cannot initialize GSP firmware
RM``. The GPU still answers on PCIe; its firmware is in a state a warm reboot or a crashed driver
left behind. That is ``gpu_firmware_error`` (hard): the fix is a GPU reset or a cold power cycle,
then a driver/firmware update or an RMA if it fails again - not the reseat a lost GPU needs. The
GSP lines name the GPU by the driver's own instance number (``NVRM: GPU6``), which is not
nvidia-smi's index; the ``RmInitAdapter failed`` line names its PCI id, so the failure keeps that.
"""

from __future__ import annotations

from gpulib.diagnose.context import Context, quote

#: The catalogue's rows: the init failure with the GPU's PCI id, and the GSP boot failure before it.
INIT_FAILED = "rminit-failed"
GSP_FAILED = "gsp-boot-failed"
#: How many lines before the init failure the driver's reason is looked for.
REASON_LINES = 8


def run(ctx: Context) -> None:
    files = {f.display: f for f in ctx.inputs.files}
    for f in ctx.findings:
        if f.role != "cause" or not f.id.startswith(f"sig-{INIT_FAILED}") or not f.quotes:
            continue
        q = f.quotes[0]
        file = files.get(q.file)
        if file is None or q.line is None:
            continue
        gsp = [s for s in file.signals if s.signature == GSP_FAILED and q.line - REASON_LINES <= s.line < q.line]
        if not gsp:
            continue
        first = gsp[0]
        f.category = "gpu_firmware_error"
        f.title = (f"GPU {f.gpu_pci or ''} could not be initialised: its GSP firmware did not boot "
                   f"('{first.text.split('NVRM:', 1)[-1].strip()[:100]}')")
        f.quotes.insert(0, quote(file, first.line, first.text))
        f.actions = ["Reset the GPU with nothing running on it (`nvidia-smi -r -i <index>`) or power-cycle the node "
                     "(a cold boot: a warm reboot can leave the GSP's protected memory region up)",
                     "If it fails again after a cold boot: update the driver and the GPU firmware, then RMA the GPU",
                     "Check `nvidia-smi -q` for the GPU before resuming the node"]
        for other in ctx.findings:  # the GSP lines' own finding is this failure's reason, not a second one
            if other.id.startswith(f"sig-{GSP_FAILED}") and other.host == f.host:
                other.caused_by = f.id
                other.gpu_pci, other.gpu_index = f.gpu_pci, f.gpu_index  # not the driver's instance number


__all__ = ["run"]
