"""Collection: run commands and NVML on this host and write their raw output into a bundle.

Collectors interpret nothing. Each has its own timeout; a missing tool, a refused permission,
a hang or an absent GPU becomes ``unavailable``/``failed``/``timeout`` with the reason.
Entry point: :func:`gpulib.collect.capture.collect` (re-exported here).
"""

from gpulib.collect.capture import collect

__all__ = ["collect"]
