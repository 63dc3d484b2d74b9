"""The go / no-go gate: which findings a node self-check and a health report consist of, and the verdict.

Why here, below every face: the preflight notebook (08), the health report (09) and the Slurm
HealthCheckProgram (``gpulib slurm healthcheck``) must decide GO / NO-GO the same way, and a Slurm
hook must not import the notebook face (ipywidgets, plotly) to do it. The gate works on the
``gpulib.diagnosis/1`` dict and finding dicts (the JSON contract), never on pandas tables: each
face turns its own tables into the numbers asked for here (:func:`gpus_seen`).

Every check is a view of the diagnosis of the node's capture (the same rules as ``gpulib
diagnose``), plus what only a node check knows: whether the GPUs it expects are visible.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gpulib.evidence import kinds
from gpulib.findings import finding_dict
from gpulib.identity import normalize_pci


def from_diagnosis(diagnosis: dict, categories: Iterable[str] | None = None) -> list[dict]:
    """The diagnosis findings of the given categories (all when None)."""
    wanted = None if categories is None else set(categories)
    return [f for f in diagnosis.get("findings") or [] if wanted is None or f.get("category") in wanted]


def supported_by(diagnosis: dict, kinds: Iterable[str], categories: Iterable[str] | None = None) -> list[dict]:
    """The diagnosis findings quoting a line of a file of one of ``kinds`` (the kernel
    step shows what the kernel log says, the hardware step what the GPU snapshots say)."""
    kinds = set(kinds)
    files = {i.get("path") for i in diagnosis.get("inputs") or [] if i.get("kind") in kinds}
    return [f for f in from_diagnosis(diagnosis, categories)
            if any(e.get("file") in files for e in f.get("evidence") or [])]


def event_keys(f: dict) -> list[tuple]:
    """What makes two findings the same event: category, host and the GPU (by PCI id where both
    know it, else by index) or, for a finding about no GPU, the rank."""
    pci = f.get("gpu_pci") or f.get("pci_bus_id")
    keys = []
    if pci:
        keys.append((f.get("category"), f.get("host"), "pci", normalize_pci(pci) or pci))
    if f.get("gpu_index") is not None:
        keys.append((f.get("category"), f.get("host"), "index", int(f["gpu_index"])))
    if not keys and f.get("rank") is not None:
        keys.append((f.get("category"), f.get("host"), "rank", int(f["rank"])))
    return keys  # a fact about no GPU and no rank (a cascade summary) is nobody's event


def combine(diagnosis: dict, categories: Iterable[str] | None, *checks: Iterable[dict]) -> list[dict]:
    """The step's findings: the diagnosis findings of ``categories``, then each threshold-check
    finding that says something new. A check finding about an event the diagnosis reports too
    (same category, host and GPU) *is* that diagnosis finding: it is recorded with the
    diagnosis's id, severity and title, never as a second row."""
    out = from_diagnosis(diagnosis, categories) if categories is not None else []
    known: dict[tuple, dict] = {}
    for f in diagnosis.get("findings") or []:
        for key in event_keys(f):
            known.setdefault(key, f)
    ids = {f["id"] for f in out}
    for f in (f for group in checks for f in group):
        f = next((known[k] for k in event_keys(f) if k in known), f)
        if f["id"] not in ids:
            ids.add(f["id"])
            out.append(f)
    return out


#: The files whose lines a step's view shows: the kernel log, and the GPU state snapshots.
KERNEL_KINDS = kinds.KERNEL
GPU_STATE_KINDS = kinds.GPU_STATE
#: Categories of a GPU's own hardware (what the preflight and health report judge per GPU).
HARDWARE_CATEGORIES = ("gpu_fell_off_bus", "gpu_memory_error", "gpu_firmware_error", "nvlink_error", "power_fault")
#: What a GPU's heat and power delivery come to: the thermal step's view, part of every self-check.
THERMAL_CATEGORIES = ("thermal_throttling", "power_fault")


def kernel_findings(diagnosis: dict) -> list[dict]:
    """What the kernel log says, as the diagnosis judged it: one finding per event (a flapping GPU
    that printed the same Xid hundreds of times is one finding with its first lines), the
    catalog's meaning and action, and whether it is the root cause or part of the cascade."""
    return supported_by(diagnosis, KERNEL_KINDS)


def imbalance_findings(diagnosis: dict) -> list[dict]:
    """GPUs using more memory than their peers by the diagnosis's ``imbalance_gib`` (rule
    ``mem-imbalance``; ask :meth:`~gpulib.notebook.tables.EvidenceTables.diagnosis_at` for another
    threshold). Data-parallel ranks hold the same model: an outlier holds more activations, leaks,
    or shares its GPU with a stray process."""
    return [f for f in diagnosis.get("findings") or [] if str(f.get("id", "")).startswith("mem-imbalance")]


def held_findings(diagnosis: dict) -> list[dict]:
    """GPUs still held by processes in a snapshot taken *after* the job failed, or by a process
    ``fuser`` names, as the diagnosis found them (rules ``zombie`` and ``gpu-held``; their ``pids``
    feed the remediation's kill commands). A snapshot
    from before the crash shows the live job, not a leftover: it is not a finding.

    A leftover process blocks the relaunch (the new job OOMs at start-up or hangs on NCCL init);
    it must be found and stopped first."""
    return [f for f in diagnosis.get("findings") or [] if str(f.get("id", "")).startswith(("zombie", "gpu-held"))]


def hardware_findings(diagnosis: dict) -> list[dict]:
    """What the GPU snapshots say of each GPU's hardware, as the diagnosis judged it: lost GPUs,
    uncorrectable ECC and pending or failed row remaps, PCIe links below their maximum while busy.

    Driver/NCCL version skew across nodes is the diagnosis's finding too (rule ``version-skew``):
    take it with ``from_diagnosis(diagnosis, ["driver_mismatch"])``.
    """
    return supported_by(diagnosis, GPU_STATE_KINDS, HARDWARE_CATEGORIES)


def gpu_label(index: Any, pci: Any) -> str | None:
    """How a GPU state snapshot's GPU is told apart on its host: its index, else its PCI id."""
    return str(int(index)) if index is not None else (pci if isinstance(pci, str) else None)


def gpus_seen(snapshots: Iterable[dict]) -> int:
    """GPUs visible in GPU state snapshot records (``host``, ``index``, ``pci_bus_id``): one per
    host and :func:`gpu_label`, however many snapshots list it."""
    return len({(s.get("host"), gpu_label(s.get("index"), s.get("pci_bus_id"))) for s in snapshots})


def presence_findings(seen: int, expected: int | None = None) -> list[dict]:
    """Preflight: are the GPUs there? ``expected`` None = at least one; 0 = a node without GPUs;
    N = at least N visible.

    Evidence with no GPU in any snapshot is a no-go, not an empty (healthy) check. On a live
    capture this means nvidia-smi and NVML saw nothing: the driver is not loaded, the GPUs are off
    the bus, or this is not a GPU node. Relaunching there fails at the first CUDA call.
    """
    if expected is not None:
        if seen >= expected:
            return []
        return [finding_dict(
            "gpu-count", "critical", "gpu_fell_off_bus", f"{seen} of {expected} GPUs visible",
            actions=["Check `nvidia-smi -L` and `lspci | grep -i nvidia`: a GPU missing from both fell off the bus "
                     "(reboot or reseat); one in lspci only has a driver problem"])]
    if seen:
        return []
    return [finding_dict("no-gpu-visible", "critical", "none", "no GPU visible: no nvidia-smi or NVML snapshot lists one",
                         actions=["Run nvidia-smi on the node; check the driver (lsmod | grep nvidia) and the bus "
                                  "(lspci | grep -i nvidia); the evidence's collectors say why each tool was unavailable."])]


def self_check(diagnosis: dict, seen: int, expected: int | None = None) -> list[dict]:
    """The node self-check of the preflight (notebook 08) and of ``gpulib slurm healthcheck``: GPUs
    visible (:func:`presence_findings` of ``seen`` against ``expected``), their hardware, GPUs still
    held, memory outliers, heat and power, the kernel log, and version skew across nodes - each as
    the diagnosis of this node's capture judged it."""
    return combine(diagnosis, ["driver_mismatch", *THERMAL_CATEGORIES],
                   presence_findings(seen, expected), hardware_findings(diagnosis),
                   held_findings(diagnosis), imbalance_findings(diagnosis), kernel_findings(diagnosis))


def health_findings(diagnosis: dict) -> list[dict]:
    """What the nightly health report judges per node (notebook 09): hardware, memory outliers, heat
    and power, the kernel log, version skew across nodes."""
    return combine(diagnosis, ["driver_mismatch", *THERMAL_CATEGORIES], hardware_findings(diagnosis),
                   imbalance_findings(diagnosis), kernel_findings(diagnosis))


def go_no_go(items: Sequence[dict]) -> dict:
    """GO only when no finding is critical or an error."""
    blockers = [f for f in items if f["severity"] in ("critical", "error")]
    if blockers:
        return finding_dict("preflight-verdict", "critical", "none", f"NO-GO: {len(blockers)} blocking finding(s): "
                            + "; ".join(f["title"] for f in blockers[:3]),
                            actions=["Fix or drain what is listed, then run preflight again."], verdict="NO-GO")
    return finding_dict("preflight-verdict", "info", "none", "GO: no blocking finding", verdict="GO")
