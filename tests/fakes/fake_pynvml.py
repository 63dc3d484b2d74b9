"""A fake ``pynvml`` whose answers replay real recorded ``nvidia-smi -q -x`` output.

The GPU is the only thing gpulib may fake. This module reads the XML of a real capture (from
``../shared/corpus/recorded/nvidia-smi/xml``) with ElementTree and answers the subset of the
pynvml API that :mod:`gpulib.collect.nvml` calls. ``N/A`` in the XML becomes the exception real
NVML raises for it (``NVMLError_NotSupported``). Constants and exception classes are the real
ones from the installed nvidia-ml-py, so ``except pynvml.NVMLError`` and the error codes behave
exactly as on a GPU machine.

Scenarios are built with :class:`FakeNvml` options: ``lost`` (GPU indexes whose every call
raises ``GPU is lost``), ``unsupported``/``no_permission`` (function names that raise for every
GPU), ``init_error`` (no driver), ``hang_s`` (``nvmlDeviceGetCount`` blocks, like a wedged driver),
``function_not_found`` (functions an old driver lacks), ``absent`` (functions an old
nvidia-ml-py does not define at all) and ``nvlink_status`` (a recorded ``nvidia-smi nvlink -s``
whose ``Link N: 25 GB/s`` / ``<inactive>`` lines answer ``nvmlDeviceGetNvLinkState``).
"""

from __future__ import annotations

import re
import sys
import threading
import time
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pynvml as real

from gpulib.parsers.gpu_records import canonical_reason, encode_throttle_reasons

_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
# Real pynvml names we copy into the fake: every constant and every exception class.
_COPIED = re.compile(r"^(NVML_|NVMLError|nvmlClocks|nvmlMemory_v)")


def _error(code: int) -> real.NVMLError:
    return real.NVMLError(code)


class _Gpu:
    """One ``<gpu>`` element: ``value(path)`` returns the text or raises NotSupported for N/A."""

    def __init__(self, element: ET.Element):
        self.el = element

    def text(self, *paths: str) -> str:
        for path in paths:
            found = self.el.findtext(path)
            if found is not None and found.strip() and found.strip() not in ("N/A", "Unknown Error"):
                return found.strip()
        raise _error(real.NVML_ERROR_NOT_SUPPORTED)

    def number(self, *paths: str) -> float:
        match = _NUMBER.match(self.text(*paths))
        if not match:
            raise _error(real.NVML_ERROR_NOT_SUPPORTED)
        return float(match[1])

    def integer(self, *paths: str) -> int:
        return int(self.number(*paths))

    def flag(self, *paths: str) -> int:
        return int(self.text(*paths).lower() in ("enabled", "yes", "active"))

    def ecc_total(self, counter: str, corrected: bool) -> int:
        """v11 XML: ``volatile/single_bit/total``; v12+: ``volatile/{sram,dram}_correctable``."""
        legacy = f"ecc_errors/{counter}/{'single_bit' if corrected else 'double_bit'}/total"
        if self.el.find(legacy) is not None:
            return self.integer(legacy)
        kind = "correctable" if corrected else "uncorrectable"
        parts = [f"ecc_errors/{counter}/sram_{kind}", f"ecc_errors/{counter}/dram_{kind}"]
        return sum(self.integer(p) for p in parts)

    def throttle_mask(self) -> int:
        block = self.el.find("clocks_event_reasons")
        if block is None:
            block = self.el.find("clocks_throttle_reasons")
        if block is None:
            raise _error(real.NVML_ERROR_NOT_SUPPORTED)
        active = [canonical_reason(child.tag) for child in block if (child.text or "").strip() == "Active"]
        return encode_throttle_reasons([name for name in active if name])


def _nvlink_states(text: str, links_per_gpu: int) -> list[list[int]]:
    """Per GPU, per link: 1 active / 0 inactive, from ``nvidia-smi nvlink -s`` text."""
    gpus: list[list[int]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("GPU "):
            gpus.append([])
        elif gpus and "all links are inactive" in stripped:
            gpus[-1] = [0] * links_per_gpu
        elif gpus and stripped.startswith("Link "):
            gpus[-1].append(0 if "inactive" in stripped else 1)
    return gpus


class FakeNvml:
    """Build with a recorded XML file and scenario options; ``module()`` is the fake pynvml."""

    def __init__(self, xml_path: str | Path, *, lost: set[int] = frozenset(), unsupported: set[str] = frozenset(),
                 no_permission: set[str] = frozenset(), init_error: int | None = None, hang_s: float = 0.0,
                 function_not_found: set[str] = frozenset(), absent: set[str] = frozenset(),
                 nvlink_status: str | Path | None = None, links_per_gpu: int = 12):
        root = ET.parse(xml_path).getroot()
        self.source = Path(xml_path).name
        self.driver_version = root.findtext("driver_version")
        self.cuda_version = root.findtext("cuda_version")
        self.gpus = [_Gpu(el) for el in root.findall("gpu")]
        self.lost = set(lost)
        self.unsupported = set(unsupported)
        self.no_permission = set(no_permission)
        self.init_error = init_error
        self.hang_s = hang_s
        self.function_not_found = set(function_not_found)
        self.absent = set(absent)
        self.nvlinks = _nvlink_states(Path(nvlink_status).read_text(), links_per_gpu) if nvlink_status else []
        self.calls: dict[int, int] = {}  # per GPU index: NVML calls made with its handle
        self.initialised = 0
        self._lock = threading.Lock()

    # --- plumbing -------------------------------------------------------------------------
    def _device(self, name: str, handle: int) -> _Gpu:
        with self._lock:
            self.calls[handle] = self.calls.get(handle, 0) + 1
        if handle in self.lost:
            raise _error(real.NVML_ERROR_GPU_IS_LOST)
        if name in self.function_not_found:
            raise _error(real.NVML_ERROR_FUNCTION_NOT_FOUND)
        if name in self.unsupported:
            raise _error(real.NVML_ERROR_NOT_SUPPORTED)
        if name in self.no_permission:
            raise _error(real.NVML_ERROR_NO_PERMISSION)
        return self.gpus[handle]

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml", f"fake pynvml replaying {self.source}")
        for name, value in vars(real).items():
            if _COPIED.match(name):
                setattr(mod, name, value)
        for name in dir(self):
            if name.startswith("nvml") and name not in self.absent:
                setattr(mod, name, getattr(self, name))
        mod.FAKE = self
        return mod

    def install(self, monkeypatch) -> FakeNvml:
        monkeypatch.setitem(sys.modules, "pynvml", self.module())
        return self

    # --- system ---------------------------------------------------------------------------
    def nvmlInit(self):
        if self.init_error is not None:
            raise _error(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self):
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self):
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self):
        major, minor = (self.cuda_version or "0.0").split(".")[:2]
        return int(major) * 1000 + int(minor) * 10

    def nvmlSystemGetNVMLVersion(self):
        return f"{self.cuda_version}.{self.driver_version}"

    def nvmlDeviceGetCount(self):
        if self.hang_s:
            time.sleep(self.hang_s)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.gpus):
            raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
        return index

    def nvmlSystemGetProcessName(self, pid):
        for gpu in self.gpus:
            for proc in gpu.el.iter("process_info"):
                if proc.findtext("pid") == str(pid):
                    return proc.findtext("process_name")
        raise _error(real.NVML_ERROR_NOT_FOUND)

    # --- identity -------------------------------------------------------------------------
    def nvmlDeviceGetName(self, h):
        return self._device("nvmlDeviceGetName", h).text("product_name")

    def nvmlDeviceGetUUID(self, h):
        return self._device("nvmlDeviceGetUUID", h).text("uuid")

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=self._device("nvmlDeviceGetPciInfo", h).text("pci/pci_bus_id"))

    def nvmlDeviceGetSerial(self, h):
        return self._device("nvmlDeviceGetSerial", h).text("serial")

    def nvmlDeviceGetMinorNumber(self, h):
        return self._device("nvmlDeviceGetMinorNumber", h).integer("minor_number")

    def nvmlDeviceGetVbiosVersion(self, h):
        return self._device("nvmlDeviceGetVbiosVersion", h).text("vbios_version")

    def nvmlDeviceGetPersistenceMode(self, h):
        return self._device("nvmlDeviceGetPersistenceMode", h).flag("persistence_mode")

    def nvmlDeviceGetPerformanceState(self, h):
        return int(self._device("nvmlDeviceGetPerformanceState", h).text("performance_state").lstrip("P"))

    def nvmlDeviceGetMigMode(self, h):
        gpu = self._device("nvmlDeviceGetMigMode", h)
        return [gpu.flag("mig_mode/current_mig"), gpu.flag("mig_mode/pending_mig")]

    # --- thermal, clocks, power -----------------------------------------------------------
    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._device("nvmlDeviceGetTemperature", h).integer("temperature/gpu_temp")

    _THRESHOLDS = {
        real.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: "temperature/gpu_temp_max_threshold",
        real.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: "temperature/gpu_temp_slow_threshold",
        real.NVML_TEMPERATURE_THRESHOLD_MEM_MAX: "temperature/gpu_temp_max_mem_threshold",
        real.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: "temperature/gpu_temp_max_gpu_threshold",
    }

    def nvmlDeviceGetTemperatureThreshold(self, h, kind):
        return self._device("nvmlDeviceGetTemperatureThreshold", h).integer(self._THRESHOLDS[kind])

    def nvmlDeviceGetMarginTemperature(self, h):
        return self._device("nvmlDeviceGetMarginTemperature", h).integer("temperature/gpu_temp_tlimit")

    _CLOCKS = {real.NVML_CLOCK_SM: "sm_clock", real.NVML_CLOCK_MEM: "mem_clock", real.NVML_CLOCK_GRAPHICS: "graphics_clock"}

    def nvmlDeviceGetClockInfo(self, h, clock):
        return self._device("nvmlDeviceGetClockInfo", h).integer(f"clocks/{self._CLOCKS[clock]}")

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return self._device("nvmlDeviceGetMaxClockInfo", h).integer(f"max_clocks/{self._CLOCKS[clock]}")

    def nvmlDeviceGetPowerUsage(self, h):
        gpu = self._device("nvmlDeviceGetPowerUsage", h)
        return round(1000 * gpu.number("power_readings/power_draw", "gpu_power_readings/power_draw",
                                       "gpu_power_readings/average_power_draw"))

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        gpu = self._device("nvmlDeviceGetEnforcedPowerLimit", h)
        return round(1000 * gpu.number("power_readings/enforced_power_limit", "gpu_power_readings/current_power_limit"))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        gpu = self._device("nvmlDeviceGetPowerManagementDefaultLimit", h)
        return round(1000 * gpu.number("power_readings/default_power_limit", "gpu_power_readings/default_power_limit"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._device("nvmlDeviceGetCurrentClocksEventReasons", h).throttle_mask()

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):  # the name before driver 535
        return self._device("nvmlDeviceGetCurrentClocksThrottleReasons", h).throttle_mask()

    # --- utilization, memory, ECC ---------------------------------------------------------
    def nvmlDeviceGetUtilizationRates(self, h):
        gpu = self._device("nvmlDeviceGetUtilizationRates", h)
        return types.SimpleNamespace(gpu=gpu.integer("utilization/gpu_util"), memory=gpu.integer("utilization/memory_util"))

    def nvmlDeviceGetMemoryInfo(self, h):
        gpu = self._device("nvmlDeviceGetMemoryInfo", h)
        total, used = gpu.integer("fb_memory_usage/total") << 20, gpu.integer("fb_memory_usage/used") << 20
        return types.SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetEccMode(self, h):
        gpu = self._device("nvmlDeviceGetEccMode", h)
        return [gpu.flag("ecc_mode/current_ecc"), gpu.flag("ecc_mode/pending_ecc")]

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter_type):
        gpu = self._device("nvmlDeviceGetTotalEccErrors", h)
        counter = "volatile" if counter_type == real.NVML_VOLATILE_ECC else "aggregate"
        return gpu.ecc_total(counter, error_type == real.NVML_MEMORY_ERROR_TYPE_CORRECTED)

    def nvmlDeviceGetRetiredPages(self, h, cause):
        gpu = self._device("nvmlDeviceGetRetiredPages", h)
        block = ("multiple_single_bit_retirement" if cause == real.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
                 else "double_bit_retirement")
        return [0x1000 * (i + 1) for i in range(gpu.integer(f"retired_pages/{block}/retired_count"))]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return self._device("nvmlDeviceGetRetiredPagesPendingStatus", h).flag("retired_pages/pending_retirement")

    def nvmlDeviceGetRemappedRows(self, h):
        gpu = self._device("nvmlDeviceGetRemappedRows", h)
        return (gpu.integer("remapped_rows/remapped_row_corr"), gpu.integer("remapped_rows/remapped_row_unc"),
                gpu.flag("remapped_rows/remapped_row_pending"), gpu.flag("remapped_rows/remapped_row_failure"))

    # --- PCIe, NVLink, processes ----------------------------------------------------------
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._device("nvmlDeviceGetCurrPcieLinkGeneration", h).integer("pci/pci_gpu_link_info/pcie_gen/current_link_gen")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._device("nvmlDeviceGetMaxPcieLinkGeneration", h).integer("pci/pci_gpu_link_info/pcie_gen/max_link_gen")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._device("nvmlDeviceGetCurrPcieLinkWidth", h).integer(
            "pci/pci_gpu_link_info/link_widths/current_link_width")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._device("nvmlDeviceGetMaxPcieLinkWidth", h).integer("pci/pci_gpu_link_info/link_widths/max_link_width")

    def nvmlDeviceGetPcieReplayCounter(self, h):
        return self._device("nvmlDeviceGetPcieReplayCounter", h).integer("pci/replay_counter")

    def nvmlDeviceGetNvLinkState(self, h, link):
        self._device("nvmlDeviceGetNvLinkState", h)
        if h >= len(self.nvlinks):  # no nvlink recording: as on a PCIe board
            raise _error(real.NVML_ERROR_NOT_SUPPORTED)
        if link >= len(self.nvlinks[h]):
            raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
        return self.nvlinks[h][link]

    def nvmlDeviceGetNvLinkErrorCounter(self, h, link, counter):
        self._device("nvmlDeviceGetNvLinkErrorCounter", h)
        raise _error(real.NVML_ERROR_NOT_SUPPORTED)  # nvlink -s carries no error counters

    _TLIMIT_TAGS = {
        real.NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT: "temperature/gpu_temp_max_tlimit_threshold",
        real.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT: "temperature/gpu_temp_slow_tlimit_threshold",
        real.NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT: "temperature/gpu_temp_max_mem_tlimit_threshold",
        real.NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT: "temperature/gpu_temp_max_gpu_tlimit_threshold",
    }

    def nvmlDeviceGetFieldValues(self, h, field_ids):
        gpu = self._device("nvmlDeviceGetFieldValues", h)
        out = []
        for field_id in field_ids:
            entry = types.SimpleNamespace(fieldId=field_id, valueType=real.NVML_VALUE_TYPE_SIGNED_INT,
                                          nvmlReturn=real.NVML_SUCCESS, value=types.SimpleNamespace(siVal=0))
            try:
                entry.value.siVal = gpu.integer(self._TLIMIT_TAGS[field_id])
            except real.NVMLError as exc:
                entry.nvmlReturn = exc.value
            out.append(entry)
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        gpu = self._device("nvmlDeviceGetComputeRunningProcesses", h)
        procs = []
        for proc in gpu.el.iter("process_info"):
            if "C" not in (proc.findtext("type") or "C"):
                continue
            used = _NUMBER.match(proc.findtext("used_memory") or "")
            procs.append(types.SimpleNamespace(pid=int(proc.findtext("pid")),
                                               usedGpuMemory=int(float(used[1])) << 20 if used else None))
        return procs
