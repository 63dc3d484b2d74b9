"""``nvml/snapshot.json`` of an evidence bundle (schema ``gpulib.nvml-snapshot/1``, written by
:mod:`gpulib.collect.nvml`) read back into :class:`~gpulib.parsers.gpu_records.GpuState` records.

Why it matters: on a node where ``nvidia-smi`` hangs or is missing, the NVML snapshot is the
only GPU state in the bundle, and it is the most exact one (integer counters, the raw
clocks-event bitmask). The collector already writes the :class:`GpuState` field names, so this
reader only picks the known fields, decodes the bitmask where the reasons are missing, and
keeps a GPU NVML could not read as ``lost`` with its reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields

from gpulib.identity import normalize_pci
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.gpu_records import GpuProcess, GpuState, decode_throttle_bitmask

KIND = "nvml_snapshot"
_GPUS = re.compile(r'"gpus":\s*\[')
SCHEMA_PREFIX = "gpulib.nvml-snapshot/"
_STATE_FIELDS = {f.name for f in fields(GpuState)} - {"processes", "throttle_reasons", "pci_bus_id", "line",
                                                     "source", "host"}
#: Snapshot keys whose GpuState name differs.
_RENAMED = {"mig_mode_current": "mig_enabled", "ecc_mode_current": "ecc_mode_enabled"}


def looks_like(head: str) -> bool:
    """The schema tag (keys are written sorted, so in a large snapshot it comes last) or the
    top-level keys that only this document has together."""
    if not head.lstrip().startswith("{"):
        return False
    return SCHEMA_PREFIX in head or ('"cuda_driver_version"' in head and _GPUS.search(head) is not None)


def _state(gpu: dict, doc: dict, source: str) -> GpuState:
    values = {name: gpu[name] for name in _STATE_FIELDS if gpu.get(name) is not None}
    values.update({new: gpu[old] for old, new in _RENAMED.items() if gpu.get(old) is not None})
    state = GpuState(**values)
    state.pci_bus_id = normalize_pci(gpu.get("pci_bus_id") or gpu.get("pci_bus_id_nvml"))
    reasons = gpu.get("throttle_reasons")
    if reasons is None and isinstance(gpu.get("throttle_bitmask"), int):
        reasons = decode_throttle_bitmask(gpu["throttle_bitmask"])
    state.throttle_reasons = list(reasons or [])
    state.processes = [GpuProcess(p.get("pid"), p.get("name"), p.get("used_mib"), "C", state.index,
                                  state.pci_bus_id, state.uuid)
                       for p in gpu.get("processes") or [] if isinstance(p, dict)]
    state.driver_version = doc.get("driver_version")
    state.cuda_version = doc.get("cuda_driver_version")
    state.captured_at = doc.get("captured_at")
    state.source = source
    return state


def parse(text: str, source: str = "<text>") -> ParseResult[GpuState]:
    """One :class:`GpuState` per GPU of the snapshot; a broken or foreign document is a problem."""
    result: ParseResult[GpuState] = ParseResult(KIND)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        result.problems.append(Problem(source, f"broken JSON (a capture cut short?): {exc}"))
        return result
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        result.problems.append(Problem(source, "not an NVML snapshot: no 'gpus' list"))
        return result
    schema = str(doc.get("schema", ""))
    if schema and not schema.startswith(SCHEMA_PREFIX):
        result.problems.append(Problem(source, f"unknown schema {schema!r}; read as {SCHEMA_PREFIX}1"))
    for number, gpu in enumerate(doc["gpus"]):
        if not isinstance(gpu, dict):
            result.problems.append(Problem(source, f"GPU entry {number} is not an object"))
            continue
        try:
            result.records.append(_state(gpu, doc, source))
        except (TypeError, ValueError) as exc:
            result.problems.append(Problem(source, f"GPU entry {number} unreadable: {exc}"))
    if doc.get("gpu_count") is None and doc.get("errors"):
        result.problems.append(Problem(source, f"NVML could not count the GPUs: {doc['errors']}"))
    return result
