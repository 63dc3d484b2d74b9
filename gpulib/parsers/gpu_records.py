"""Typed records for GPU state, shared by every nvidia-smi parser and the NVML collector.

A :class:`GpuState` is one GPU in one snapshot (``nvidia-smi -q``, ``-q -x``, the default table,
a ``--query-gpu`` CSV row, an NVML read). A :class:`GpuSample` is one row of a time series
(``--query-gpu -l``, ``dmon``, NVML sampling). Every reading is optional: nvidia-smi reports
``N/A`` for what a board does not have (ECC on GeForce, utilization under MIG, retired pages on
Ampere, which remaps rows instead), and a GPU that fell off the bus reports nothing at all.
``None`` means "not reported", never zero.

Why the throttle reasons matter: a GPU whose clocks drop because of ``hw_slowdown`` (thermal or
power-brake), ``sw_thermal_slowdown`` or ``hw_power_brake_slowdown`` makes its rank a straggler,
and the other ranks then time out waiting for it; ``gpu_idle`` and ``sw_power_cap`` at low load
are normal.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpulib.nvml_fields import SLOWDOWN_REASONS, THROTTLE_BITS, canonical_reason, decode_throttle_bitmask

__all__ = ["SLOWDOWN_REASONS", "THROTTLE_BITS", "canonical_reason", "decode_throttle_bitmask"]

def encode_throttle_reasons(reasons: list[str]) -> int:
    """Inverse of :func:`decode_throttle_bitmask` for the known names."""
    by_name = {name: bit for bit, name in THROTTLE_BITS.items()}
    return sum(by_name.get(name, 0) for name in set(reasons))


@dataclass
class GpuProcess:
    """A process holding a GPU context. ``used_mib`` is None where the driver cannot tell
    (Windows WDDM, unprivileged MIG)."""

    pid: int | None
    name: str | None = None
    used_mib: float | None = None
    type: str | None = None  # "C" compute, "G" graphics, "C+G"
    gpu_index: int | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None


#: :class:`GpuState` error counters that only grow (ECC, retired pages, row remaps, PCIe replays):
#: the health report records them per GPU and ``gpulib archive diff`` flags any that grew.
ERROR_COUNTERS = (
    "ecc_volatile_sbe", "ecc_volatile_dbe", "ecc_aggregate_sbe", "ecc_aggregate_dbe",
    "retired_pages_sbe", "retired_pages_dbe", "remapped_rows_correctable", "remapped_rows_uncorrectable",
    "pcie_replay_count",
)


@dataclass
class GpuState:
    """One GPU in one snapshot. Units are in the field names; None = not reported."""

    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None  # normalised '0000:ab:00.0'
    serial: str | None = None
    minor_number: int | None = None  # the N of /dev/nvidiaN (fuser output); NOT the index
    lost: bool = False  # "GPU is lost", "Unable to determine the device handle", ERR! everywhere
    lost_reason: str | None = None
    #: Readings the tool printed as ``ERR!`` (``fan_pct``, ``temp_c``, ``power_draw_w``, ``util_gpu_pct``):
    #: the driver asked the board and got no answer. Not the same as N/A (the board has no sensor).
    unreadable: list[str] = field(default_factory=list)
    mig_enabled: bool | None = None
    fan_pct: float | None = None  # None on passively cooled boards (A100/H100) and on ERR!
    temp_c: float | None = None
    temp_memory_c: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    temp_max_operating_c: float | None = None
    # Hopper/Ada with recent drivers print margins to T.Limit instead of absolute thresholds:
    # temp_tlimit_margin_c is how far the GPU is below its limit (smaller = hotter); the
    # *_tlimit_c thresholds are margins too (slowdown at -2 C means 2 C past T.Limit).
    temp_tlimit_margin_c: float | None = None
    temp_slowdown_tlimit_c: float | None = None
    temp_shutdown_tlimit_c: float | None = None
    temp_max_operating_tlimit_c: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    util_gpu_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    throttle_reasons: list[str] = field(default_factory=list)  # ACTIVE ones, canonical names
    throttle_bitmask: int | None = None  # when the source gave the raw mask (CSV, NVML)
    throttle_counters_us: dict[str, int] = field(default_factory=dict)  # v13 / 595+ drivers
    ecc_mode_enabled: bool | None = None
    ecc_volatile_sbe: int | None = None
    ecc_volatile_dbe: int | None = None
    ecc_aggregate_sbe: int | None = None
    ecc_aggregate_dbe: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_count: int | None = None
    processes: list[GpuProcess] = field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None
    captured_at: str | None = None  # UTC ISO with Z, or naive ISO when the zone is unknown
    time_note: str | None = None  # says when captured_at is naive (nvidia-smi prints no zone)
    host: str | None = None
    source: str | None = None  # file the state was read from
    line: int | None = None  # 1-based line where this GPU starts in the source

    @property
    def slowed_by(self) -> list[str]:
        """Active reasons that mean heat or power delivery is slowing the GPU."""
        return [r for r in self.throttle_reasons if r in SLOWDOWN_REASONS]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class GpuSample:
    """One time-series row for one GPU (``--query-gpu -l``, ``dmon``, NVML sampling)."""

    time_utc: str | None  # UTC ISO with Z; naive ISO when the source printed no zone (see time_note)
    index: int | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None
    temp_c: float | None = None
    temp_memory_c: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_draw_w: float | None = None
    util_gpu_pct: float | None = None
    mem_used_mib: float | None = None
    throttle_bitmask: int | None = None
    throttle_reasons: list[str] = field(default_factory=list)
    time_note: str | None = None
    host: str | None = None
    line: int | None = None

    @property
    def slowed_by(self) -> list[str]:
        return [r for r in self.throttle_reasons if r in SLOWDOWN_REASONS]

    def to_dict(self) -> dict:
        return asdict(self)
