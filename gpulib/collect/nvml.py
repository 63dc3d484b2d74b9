"""NVML snapshot and time-series sampling. The only module in gpulib that imports ``pynvml``
(from the ``nvidia-ml-py`` package).

Why NVML as well as ``nvidia-smi -q -x``: NVML gives exact integers (bitmasks, mW, bytes) and
answers per field, so one unsupported reading costs one field, not the whole snapshot; and it
can be sampled at 1 Hz to catch throttling that a single snapshot misses.

Degradation rules (each one is a real failure mode on a sick node):

* ``NotSupported`` / ``NoPermission`` / a function missing from an old driver → the field is
  ``null`` and ``errors[field]`` says why (ECC on GeForce, utilization under MIG, remapped rows
  before Ampere are *normal* absences).
* ``GPU is lost`` / ``Reset required`` on one GPU → that GPU is marked ``lost`` and not queried
  further (each call on a lost GPU can take seconds); the other GPUs are still read.
* no driver / no library → the collector is ``unavailable`` with the reason; a
  library/driver version mismatch or a permission problem is ``failed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpulib.collect.core import Collector, Outcome, Sink
from gpulib.identity import normalize_pci, utc_now_iso
from gpulib.nvml_fields import SAMPLE_COLUMNS, decode_throttle_bitmask
from gpulib.progress import Progress

SNAPSHOT_SCHEMA = "gpulib.nvml-snapshot/1"
_MIB = 1 << 20


class NvmlUnavailable(Exception):
    """NVML cannot be used on this host; ``status`` is the bundle status to record."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _text(value) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def load_nvml():
    """Import ``pynvml`` and initialise NVML, or raise :class:`NvmlUnavailable` with the reason."""
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable("unavailable", f"nvidia-ml-py is not installed ({exc})") from exc
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code in (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED):
            raise NvmlUnavailable("unavailable", f"no NVIDIA driver ({exc})") from exc
        if code == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
            raise NvmlUnavailable(
                "failed", f"NVML library and kernel driver versions differ ({exc}): the driver was upgraded "
                          "without a reboot; reboot or reload the nvidia module") from exc
        if code == pynvml.NVML_ERROR_NO_PERMISSION:
            raise NvmlUnavailable("failed", f"no permission to open the NVIDIA device files ({exc})") from exc
        raise NvmlUnavailable("failed", f"nvmlInit failed: {exc}") from exc
    return pynvml


class _Reader:
    """Calls NVML functions for one GPU, turning each error into ``errors[field]``."""

    def __init__(self, nv):
        self.nv = nv
        self.errors: dict[str, str] = {}
        self.lost: str | None = None
        self._stop_codes = {nv.NVML_ERROR_GPU_IS_LOST, getattr(nv, "NVML_ERROR_RESET_REQUIRED", 16)}

    def __call__(self, field: str, names: str | tuple[str, ...], *args, convert: Callable | None = None):
        """Value of the first available function in ``names`` (new name first, deprecated after)."""
        if self.lost:
            self.errors[field] = self.lost
            return None
        names = (names,) if isinstance(names, str) else names
        missing = None
        for name in names:
            fn = getattr(self.nv, name, None)
            if fn is None:
                missing = f"{name} is not in this nvidia-ml-py"
                continue
            try:
                value = fn(*args)
            except self.nv.NVMLError as exc:
                if getattr(exc, "value", None) == self.nv.NVML_ERROR_FUNCTION_NOT_FOUND:
                    missing = f"{name} is not in this driver"
                    continue
                self.errors[field] = str(exc)
                if getattr(exc, "value", None) in self._stop_codes:
                    self.lost = str(exc)
                return None
            return convert(value) if convert and value is not None else value
        self.errors[field] = missing or "no function"
        return None


def _watts(milliwatts) -> float:
    return round(milliwatts / 1000.0, 3)


def _mib(value) -> int:
    return round(value / _MIB)


#: Hopper/Ada thresholds as margins below T.Limit (what ``nvidia-smi -q`` prints as
#: ``GPU Shutdown T.Limit Temp : -8 C``), read through field values: NVML's header calls
#: ``nvmlDeviceGetTemperatureThreshold`` "no longer the preferred interface" on Ada and later.
_TLIMIT_FIELDS = (("temp_shutdown_tlimit_c", "NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT"),
                  ("temp_slowdown_tlimit_c", "NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT"),
                  ("temp_mem_max_tlimit_c", "NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT"),
                  ("temp_max_operating_tlimit_c", "NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT"))
#: ``nvmlValue_t`` member for each ``NVML_VALUE_TYPE_*`` (double, uint, ulong, ulonglong, slonglong, sint, ushort).
_VALUE_MEMBER = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def _read_fields(nv, read: _Reader, handle, fields: tuple[tuple[str, str], ...]) -> dict:
    """Several ``nvmlDeviceGetFieldValues`` readings in one call; each field fails on its own."""
    ids = [getattr(nv, const, None) for _, const in fields]
    if None in ids:
        read.errors.update({field: f"{const} is not in this nvidia-ml-py" for field, const in fields})
        return dict.fromkeys((field for field, _ in fields))
    values = read("field_values", "nvmlDeviceGetFieldValues", handle, ids)
    out = {}
    for index, (field, _) in enumerate(fields):
        value = values[index] if values is not None else None
        if value is None:
            out[field] = None
            read.errors[field] = read.errors.get("field_values", "no value")
        elif value.nvmlReturn != nv.NVML_SUCCESS:
            out[field] = None
            read.errors[field] = str(nv.NVMLError(value.nvmlReturn))
        else:
            out[field] = getattr(value.value, _VALUE_MEMBER[value.valueType])
    read.errors.pop("field_values", None)
    return out


def _read_nvlink(nv, read: _Reader, handle) -> list[dict] | None:
    """State and error counters of each NVLink. A GPU without NVLink answers NotSupported
    for link 0; unused links answer NotSupported / InvalidArgument and are skipped."""
    links = []
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        probe = _Reader(nv)
        state = probe(f"nvlink{link}", "nvmlDeviceGetNvLinkState", handle, link)
        if probe.lost:
            read.lost = probe.lost
            read.errors["nvlink"] = probe.lost
            return None
        if state is None:
            continue
        entry = {"link": link, "active": bool(state)}
        for counter, name in ((0, "dl_replay"), (1, "dl_recovery"), (2, "crc_flit"), (3, "crc_data")):
            entry[f"{name}_errors"] = probe(f"{name}", "nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
        links.append(entry)
    if not links:
        read.errors["nvlink"] = "Not Supported"
        return None
    return links


def _read_processes(nv, read: _Reader, handle) -> list[dict] | None:
    procs = read("processes", ("nvmlDeviceGetComputeRunningProcesses",), handle)
    if procs is None:
        return None
    out = []
    for proc in procs:
        used = getattr(proc, "usedGpuMemory", None)
        name = _Reader(nv)("name", "nvmlSystemGetProcessName", proc.pid, convert=_text)
        out.append({"pid": proc.pid, "name": name, "used_mib": _mib(used) if used is not None else None})
    return out


def read_gpu(nv, index: int) -> dict:
    """Everything NVML says about GPU ``index``; never raises for an NVML error."""
    read = _Reader(nv)
    gpu: dict = {"index": index}
    handle = read("handle", "nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        gpu.update(lost=True, lost_reason=read.errors["handle"], errors=read.errors)
        return gpu
    gpu["name"] = read("name", "nvmlDeviceGetName", handle, convert=_text)
    gpu["uuid"] = read("uuid", "nvmlDeviceGetUUID", handle, convert=_text)
    pci = read("pci_bus_id", "nvmlDeviceGetPciInfo", handle)
    gpu["pci_bus_id_nvml"] = _text(pci.busId) if pci is not None else None
    gpu["pci_bus_id"] = normalize_pci(gpu["pci_bus_id_nvml"])
    gpu["serial"] = read("serial", "nvmlDeviceGetSerial", handle, convert=_text)
    gpu["minor_number"] = read("minor_number", "nvmlDeviceGetMinorNumber", handle)
    gpu["vbios_version"] = read("vbios_version", "nvmlDeviceGetVbiosVersion", handle, convert=_text)
    gpu["persistence_mode"] = read("persistence_mode", "nvmlDeviceGetPersistenceMode", handle, convert=bool)
    gpu["performance_state"] = read("performance_state", "nvmlDeviceGetPerformanceState", handle)
    mig = read("mig_mode", "nvmlDeviceGetMigMode", handle)
    gpu["mig_mode_current"], gpu["mig_mode_pending"] = (bool(mig[0]), bool(mig[1])) if mig is not None else (None, None)

    gpu["temp_c"] = read("temp_c", "nvmlDeviceGetTemperature", handle, nv.NVML_TEMPERATURE_GPU)
    for field, threshold in (("temp_shutdown_c", "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN"),
                             ("temp_slowdown_c", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN"),
                             ("temp_mem_max_c", "NVML_TEMPERATURE_THRESHOLD_MEM_MAX"),
                             ("temp_max_operating_c", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX")):
        gpu[field] = read(field, "nvmlDeviceGetTemperatureThreshold", handle, getattr(nv, threshold))
    # Hopper/Ada report thresholds relative to T.Limit; the margin is the distance to slowdown.
    gpu["temp_tlimit_margin_c"] = read("temp_tlimit_margin_c", "nvmlDeviceGetMarginTemperature", handle)
    gpu.update(_read_fields(nv, read, handle, _TLIMIT_FIELDS))

    gpu["sm_clock_mhz"] = read("sm_clock_mhz", "nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_SM)
    gpu["sm_clock_max_mhz"] = read("sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", handle, nv.NVML_CLOCK_SM)
    gpu["mem_clock_mhz"] = read("mem_clock_mhz", "nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_MEM)
    gpu["mem_clock_max_mhz"] = read("mem_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", handle, nv.NVML_CLOCK_MEM)
    gpu["power_draw_w"] = read("power_draw_w", "nvmlDeviceGetPowerUsage", handle, convert=_watts)
    gpu["power_limit_w"] = read("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", handle, convert=_watts)
    gpu["power_default_limit_w"] = read("power_default_limit_w", "nvmlDeviceGetPowerManagementDefaultLimit", handle,
                                        convert=_watts)
    mask = read("throttle_bitmask", ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
                handle)
    gpu["throttle_bitmask"] = mask
    gpu["throttle_reasons"] = decode_throttle_bitmask(mask) if mask is not None else None

    util = read("util_gpu_pct", "nvmlDeviceGetUtilizationRates", handle)
    gpu["util_gpu_pct"], gpu["util_mem_pct"] = (util.gpu, util.memory) if util is not None else (None, None)
    mem = read("mem_used_mib", "nvmlDeviceGetMemoryInfo", handle)
    gpu["mem_used_mib"], gpu["mem_total_mib"] = (_mib(mem.used), _mib(mem.total)) if mem is not None else (None, None)

    ecc = read("ecc_mode", "nvmlDeviceGetEccMode", handle)
    gpu["ecc_mode_current"], gpu["ecc_mode_pending"] = (bool(ecc[0]), bool(ecc[1])) if ecc is not None else (None, None)
    for field, kind, counter in (("ecc_volatile_sbe", "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC"),
                                 ("ecc_volatile_dbe", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC"),
                                 ("ecc_aggregate_sbe", "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_AGGREGATE_ECC"),
                                 ("ecc_aggregate_dbe", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_AGGREGATE_ECC")):
        gpu[field] = read(field, "nvmlDeviceGetTotalEccErrors", handle, getattr(nv, kind), getattr(nv, counter))
    for field, cause in (("retired_pages_sbe", "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS"),
                         ("retired_pages_dbe", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR")):
        gpu[field] = read(field, "nvmlDeviceGetRetiredPages", handle, getattr(nv, cause), convert=len)
    gpu["retired_pages_pending"] = read("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", handle,
                                        convert=bool)
    rows = read("remapped_rows", "nvmlDeviceGetRemappedRows", handle)
    (gpu["remapped_rows_correctable"], gpu["remapped_rows_uncorrectable"], gpu["remapped_rows_pending"],
     gpu["remapped_rows_failure"]) = (rows[0], rows[1], bool(rows[2]), bool(rows[3])) if rows is not None else (None,) * 4

    gpu["pcie_gen_current"] = read("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration", handle)
    gpu["pcie_gen_max"] = read("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", handle)
    gpu["pcie_width_current"] = read("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth", handle)
    gpu["pcie_width_max"] = read("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", handle)
    gpu["pcie_replay_count"] = read("pcie_replay_count", "nvmlDeviceGetPcieReplayCounter", handle)
    gpu["nvlink"] = None if read.lost else _read_nvlink(nv, read, handle)
    gpu["processes"] = None if read.lost else _read_processes(nv, read, handle)
    gpu["lost"] = read.lost is not None
    gpu["lost_reason"] = read.lost
    gpu["errors"] = read.errors
    return gpu


def _cuda_version(value: int) -> str:
    """NVML encodes the CUDA driver API version as 1000*major + 10*minor (12020 -> "12.2")."""
    return f"{value // 1000}.{value % 1000 // 10}"


def snapshot(nv) -> dict:
    """The ``gpulib.nvml-snapshot/1`` document for every GPU NVML can see."""
    system = _Reader(nv)
    doc = {
        "schema": SNAPSHOT_SCHEMA,
        "captured_at": utc_now_iso(),
        "driver_version": system("driver_version", "nvmlSystemGetDriverVersion", convert=_text),
        "cuda_driver_version": system("cuda_driver_version", "nvmlSystemGetCudaDriverVersion", convert=_cuda_version),
        "nvml_version": system("nvml_version", "nvmlSystemGetNVMLVersion", convert=_text),
    }
    count = system("gpu_count", "nvmlDeviceGetCount")
    doc["gpu_count"] = count
    doc["gpus"] = [read_gpu(nv, index) for index in range(count or 0)]
    doc["errors"] = system.errors
    return doc


def _shutdown(nv) -> None:
    try:
        nv.nvmlShutdown()
    except nv.NVMLError:
        pass


def snapshot_collector() -> Collector:
    """``nvml/snapshot.json``: one JSON document, every GPU, every field NVML can answer."""

    def run(sink: Sink, timeout_s: float) -> Outcome:
        try:
            nv = load_nvml()
        except NvmlUnavailable as exc:
            return Outcome(exc.status, exc.reason)
        try:
            doc = snapshot(nv)
        finally:
            _shutdown(nv)
        sink.write_json("nvml/snapshot.json", doc)
        bad = [f"GPU {g['index']} ({g['lost_reason']})" for g in doc["gpus"] if g["lost"]]
        if doc["gpu_count"] is None:
            return Outcome("failed", f"NVML could not count the GPUs: {doc['errors'].get('gpu_count')}")
        if bad:
            return Outcome("ok", f"{len(bad)} of {doc['gpu_count']} GPUs unreadable: {', '.join(bad)}")
        return Outcome("ok", None if doc["gpu_count"] else "NVML sees no GPU")

    return Collector("nvml", 60, run)


def _sample_row(nv, index: int, handle, sm_max) -> list:
    read = _Reader(nv)
    mask = read("throttle", ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), handle)
    pci = read("pci", "nvmlDeviceGetPciInfo", handle)
    util = read("util", "nvmlDeviceGetUtilizationRates", handle)
    mem = read("mem", "nvmlDeviceGetMemoryInfo", handle)
    return [
        utc_now_iso(), index, normalize_pci(_text(pci.busId)) if pci is not None else None,
        read("temp", "nvmlDeviceGetTemperature", handle, nv.NVML_TEMPERATURE_GPU),
        read("sm", "nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_SM), sm_max,
        read("power", "nvmlDeviceGetPowerUsage", handle, convert=_watts),
        util.gpu if util is not None else None, _mib(mem.used) if mem is not None else None,
        f"{mask:#x}" if mask is not None else None,
        "|".join(decode_throttle_bitmask(mask)) if mask is not None else None,
    ]


def _csv_line(values: list) -> str:
    return ",".join("" if v is None else str(v) for v in values) + "\n"


def sampling_collector(seconds: int, interval_s: float = 1.0) -> Collector:
    """``nvml/samples.csv``: temperature, SM clock, power, utilization, memory and throttle
    reasons of every GPU once per ``interval_s`` for ``seconds``; a throttling GPU shows as a
    falling SM clock with ``hw_slowdown``/``sw_thermal_slowdown`` while its temperature climbs."""

    def run(sink: Sink, timeout_s: float) -> Outcome:
        try:
            nv = load_nvml()
        except NvmlUnavailable as exc:
            return Outcome(exc.status, exc.reason)
        progress = Progress(seconds, "sampling GPUs", "s")
        try:
            count = nv.nvmlDeviceGetCount()
            gpus = []
            for index in range(count):
                read = _Reader(nv)
                handle = read("handle", "nvmlDeviceGetHandleByIndex", index)
                sm_max = read("sm_max", "nvmlDeviceGetMaxClockInfo", handle, nv.NVML_CLOCK_SM) if handle is not None else None
                gpus.append((index, handle, sm_max))
            sink.append("nvml/samples.csv", _csv_line(list(SAMPLE_COLUMNS)))
            started = time.monotonic()
            ticks = 0
            while True:
                rows = [_sample_row(nv, index, handle, sm_max) if handle is not None else [utc_now_iso(), index]
                        for index, handle, sm_max in gpus]
                sink.append("nvml/samples.csv", "".join(_csv_line(row) for row in rows))
                ticks += 1
                progress.set(min(seconds, round(ticks * interval_s)))
                if ticks * interval_s >= seconds:
                    break
                time.sleep(max(0.0, started + ticks * interval_s - time.monotonic()))
        except nv.NVMLError as exc:
            return Outcome("failed", f"NVML sampling stopped: {exc}")
        finally:
            progress.close()
            _shutdown(nv)
        return Outcome("ok", f"{ticks} samples of {len(gpus)} GPU(s) every {interval_s:g} s")

    return Collector("nvml-samples", seconds + 30, run)
