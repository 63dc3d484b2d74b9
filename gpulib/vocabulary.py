"""The shared words of every finding (docs/ARCHITECTURE.md "Words"): one home, no imports.

The diagnosis, the notebooks' step checks and the runbook archive all judge findings with these
tuples. This module imports nothing, so a notebook kernel or ``gpulib run`` can check a finding's
words without loading the diagnosis engine.
"""

#: Most to least urgent; a runbook's exit code follows the most urgent one recorded.
SEVERITIES = ("critical", "error", "warning", "info")

#: What failed first. ``none`` is a healthy run; anything new must be added to docs/ARCHITECTURE.md first.
CATEGORIES = (
    "gpu_fell_off_bus", "gpu_memory_error", "gpu_firmware_error", "nvlink_error", "thermal_throttling",
    "power_fault", "cuda_oom", "host_oom", "network_fabric", "driver_mismatch", "application_error",
    "data_pipeline_stall", "node_lost", "none",
)

#: Categories whose culprit is one GPU: a PCI id or device index named on the fault's line, or near
#: it, names that GPU (a NIC's PCI id on a link fault does not; a link or power fault of a node is
#: no one rank's).
GPU_CATEGORIES = frozenset({"cuda_oom", "gpu_fell_off_bus", "gpu_memory_error", "gpu_firmware_error",
                            "thermal_throttling", "power_fault", "nvlink_error"})

#: The severity a cause carries follows what it interrupted, in one place (``gpulib.findings.weigh``),
#: so the diagnosis, the runbook's no-go, the report and a drill tell one verdict: a ``hard`` cause
#: (the machine or a GPU failed) is ``critical``, the word that drains a node; a ``soft`` cause (the
#: process failed, the hardware is fine) is at most ``error``: the job's owner fixes and relaunches.
SEVERITY_CEILING = {"hard": "critical", "soft": "error"}

#: Words of an action that takes hardware out of service (drain, RMA, replace the GPU): asked only
#: of a hard cause. Told of a soft one they send a healthy node to the repair queue.
OUT_OF_SERVICE = ("drain", "rma", "replace the gpu")
