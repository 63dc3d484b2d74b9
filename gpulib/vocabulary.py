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
