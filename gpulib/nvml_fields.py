"""NVML fields as numbers and bits mean them: shared by the NVML collector and the parsers.

The collector (:mod:`gpulib.collect.nvml`) writes raw readings; the parsers read them back. Both
need the same decoding of the clocks-event bitmask and the same sample columns, and neither may
import the other (collect writes, parsers interpret), so the decoding lives here, below both.
"""

from __future__ import annotations

from functools import lru_cache

#: The header of ``nvml/samples.csv``, written by the NVML sampler and read by
#: :mod:`gpulib.parsers.nvml_samples` (one source of truth for writer and reader).
SAMPLE_COLUMNS = ("time_utc", "index", "pci_bus_id", "temp_c", "sm_clock_mhz", "sm_clock_max_mhz", "power_draw_w",
                  "util_gpu_pct", "mem_used_mib", "throttle_bitmask", "throttle_reasons")

#: NVML ``nvmlClocksEventReason*`` bits (identical to the deprecated ``nvmlClocksThrottleReason*``),
#: in the canonical names every gpulib parser uses.
THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

#: Reasons that mean the GPU is slowed by heat or power delivery (not by being idle or capped by
#: the administrator). ``sw_power_cap`` is left out: it is routine under full load.
SLOWDOWN_REASONS = frozenset(
    {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)

# Spellings of the same reason in -q labels, XML tags, CSV columns and dcgm-exporter labels.
_REASON_ALIASES = {
    "idle": "gpu_idle",
    "gpu_idle": "gpu_idle",
    "applications_clocks_setting": "applications_clocks_setting",
    "clocks_setting": "applications_clocks_setting",
    "user_defined_clocks": "applications_clocks_setting",
    "sw_power_cap": "sw_power_cap",
    "power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "sw_thermal": "sw_thermal_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_thermal": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "hw_power_brake": "hw_power_brake_slowdown",
    "display_clock_setting": "display_clock_setting",
    "display_clocks_setting": "display_clock_setting",
    "display_clocks": "display_clock_setting",
}


@lru_cache(maxsize=1024)  # the same few labels, once per GPU per sample: decide each once
def canonical_reason(label: str) -> str | None:
    """Canonical throttle-reason name for any tool's spelling, or None when unknown.

    >>> canonical_reason("HW Power Brake Slowdown"), canonical_reason("clocks_event_reason_gpu_idle")
    ('hw_power_brake_slowdown', 'gpu_idle')
    """
    key = "_".join(label.strip().lower().replace("-", " ").split())
    for prefix in ("clocks_event_reasons_", "clocks_throttle_reasons_", "clocks_event_reason_",
                   "clocks_throttle_reason_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
            break
    return _REASON_ALIASES.get(key)


def decode_throttle_bitmask(mask: int) -> list[str]:
    """Active reasons in an NVML clocks-event bitmask, e.g. ``0x68`` ->
    ``['hw_slowdown', 'sw_thermal_slowdown', 'hw_thermal_slowdown']`` (bit order).

    Bits outside the known set (``0x200`` board limit, ``0x400`` reliability on old drivers)
    come back as ``'bit_0x200'`` so they are never silently dropped.
    """
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(THROTTLE_BITS.get(bit, f"bit_{bit:#x}"))
        bit <<= 1
    return names
