"""The bandwidth model: what busbw a healthy run of this shape should reach at this message size.

Why a model and not only a table of minimums: a table names a few (GPU, node count, message size)
combinations a fleet has measured; every other run - another SKU, two nodes instead of one, a run
that stopped at 1 GiB - was "not judged". The model derives the expectation from what the hardware
is: the GPU's NVLink or PCIe rate (``expectations.yaml``, with the vendor source of each number),
the NICs of each node, the share of the raw rate nccl-tests' busbw reaches on healthy systems, and a
message-size curve. The smaller of the intra-node and inter-node bounds is the *bound*; naming it
tells the operator where to look when a run falls short.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import yaml

from gpulib.nccl.sizes import format_size, parse_size

DEFAULT_FILE = "expectations.yaml"
#: Collectives whose busbw the model predicts (busbw of gather/scatter/hypercube is not link-comparable).
MODELLED = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")


@dataclass(frozen=True)
class GpuSpec:
    """One row of the GPU table: link rates in GB/s per direction, and where the numbers come from."""

    id: str
    match: tuple[str, ...]
    nvlink_gbps: float
    nvls: bool
    pcie_gen: int
    source: str
    mesh: bool = False
    nvlink_domain_gpus: int | None = None
    reference_nics: str | None = None  # "8x400": count x Gb/s

    def reference_nic_gbps(self) -> tuple[int, float] | None:
        if not self.reference_nics:
            return None
        count, rate = self.reference_nics.lower().split("x")
        return int(count), float(rate)


@dataclass(frozen=True)
class Nics:
    """Compute NICs of one node: ``count`` x ``rate_gbit`` (Gb/s). ``origin`` says how we know."""

    count: int
    rate_gbit: float
    origin: str

    @property
    def node_gbps(self) -> float:
        """GB/s per node (bits / 8)."""
        return self.count * self.rate_gbit / 8.0


@dataclass(frozen=True)
class ModelTable:
    gpus: tuple[GpuSpec, ...]
    fractions: dict[str, float]
    half_bytes: dict[str, int]
    min_fraction_to_judge: float
    pass_at_least: float
    fail_below: float
    unknown_nic_floor_gbps: float
    pcie_x16_gbps: dict[int, float]
    unknown_gpu_reference: str = "h100"  # the GpuSpec id a run without a GPU model is measured against

    def reference_gpu(self) -> GpuSpec:
        return next(g for g in self.gpus if g.id == self.unknown_gpu_reference)

    def pcie_floor_gbps(self) -> float:
        """The slowest healthy intra-node fabric: a ring over PCIe gen3 x16 slots."""
        return min(self.pcie_x16_gbps.values()) * self.fractions["pcie"]

    def gpu(self, name: str) -> GpuSpec | None:
        low = name.lower()
        return next((g for g in self.gpus if any(m.lower() in low for m in g.match)), None)


@dataclass
class Expectation:
    """busbw a healthy run should reach: ``plateau_gbps`` at large messages, ``at(size)`` below that."""

    plateau_gbps: float
    bound: str  # "intra-node NVLink", "intra-node PCIe", "inter-node network", "NVLink domain"
    half_bytes: int
    gpu: GpuSpec
    intra_gbps: float
    inter_gbps: float | None
    nics: Nics | None
    nics_assumed: bool
    notes: list[str] = field(default_factory=list)
    path: str = ""  # the curve's name in verdict lines: "NVLS", "NVLink", "PCIe gen4", "8x400 Gb/s network"

    def label(self, gpus_per_node: int, nodes: int) -> str:
        """``8×H100 NVLS``, ``2×8 H100 8x400 Gb/s network``: the shape and the path whose curve judged the run."""
        gpu = self.gpu.id.upper()
        shape = f"{gpus_per_node}×{gpu}" if nodes <= 1 else f"{nodes}×{gpus_per_node} {gpu}"
        return f"{shape} {self.path}".strip()

    def fraction_at(self, size_bytes: int) -> float:
        """Share of the plateau a message of this size reaches: S / (S + half)."""
        return size_bytes / (size_bytes + self.half_bytes) if size_bytes > 0 else 0.0

    def at(self, size_bytes: int) -> float:
        return self.plateau_gbps * self.fraction_at(size_bytes)

    def judgeable_from_bytes(self, min_fraction: float) -> int:
        """Smallest message whose expectation is at least ``min_fraction`` of the plateau."""
        return math.ceil(self.half_bytes * min_fraction / (1 - min_fraction))

    def curve(self, sizes: list[int]) -> list[tuple[int, float]]:
        return [(s, round(self.at(s), 3)) for s in sizes]

    def describe(self) -> str:
        parts = [f"intra-node {self.intra_gbps:.0f} GB/s"]
        if self.inter_gbps is not None:
            nic = f"{self.nics.count} x {self.nics.rate_gbit:g} Gb/s NICs ({self.nics.origin})" if self.nics else "NICs"
            parts.append(f"inter-node {self.inter_gbps:.0f} GB/s from {nic}")
        return f"model {self.plateau_gbps:.0f} GB/s, bound by {self.bound} ({'; '.join(parts + self.notes)}; {self.gpu.id})"


@lru_cache(maxsize=1)
def load() -> ModelTable:
    """The packaged ``expectations.yaml`` (data, with a vendor source on every GPU row)."""
    data = yaml.safe_load(resources.files("gpulib.nccl").joinpath(DEFAULT_FILE).read_text())
    gpus = tuple(GpuSpec(id=g["id"], match=tuple(g["match"]), nvlink_gbps=float(g["nvlink_gbps"]), nvls=bool(g["nvls"]),
                         pcie_gen=int(g["pcie_gen"]), source=g["source"], mesh=bool(g.get("mesh", False)),
                         nvlink_domain_gpus=g.get("nvlink_domain_gpus"), reference_nics=g.get("reference_nics"))
                 for g in data["gpus"])
    return ModelTable(
        gpus=gpus,
        fractions={k: float(v["value"]) for k, v in data["fractions"].items()},
        half_bytes={k: parse_size(v) for k, v in data["curve"]["half_bytes"].items()},
        min_fraction_to_judge=float(data["curve"]["min_fraction_to_judge"]),
        pass_at_least=float(data["bands"]["pass_at_least"]),
        fail_below=float(data["bands"]["fail_below"]),
        unknown_nic_floor_gbps=float(data["unknown_nic_floor_gbps"]),
        pcie_x16_gbps={int(k): float(v) for k, v in data["pcie_x16_gbps"].items()},
        unknown_gpu_reference=str(data["unknown_gpu"]["reference"]),
    )


def _intra(gpu: GpuSpec, table: ModelTable, collective: str, gpus_per_node: int) -> tuple[float, str, str, str]:
    """(GB/s, bound name, curve path) inside one node (or one NVLink domain)."""
    pcie = table.pcie_x16_gbps[gpu.pcie_gen]
    if gpu.nvlink_gbps <= 0:
        return pcie * table.fractions["pcie"], f"intra-node PCIe gen{gpu.pcie_gen}", "pcie", f"PCIe gen{gpu.pcie_gen}"
    link = gpu.nvlink_gbps
    if gpu.mesh and gpus_per_node < 8:
        link = gpu.nvlink_gbps * max(1, gpus_per_node - 1) / 7  # a hybrid cube mesh: a few of the 6 links per GPU
    key = "nvls" if gpu.nvls and collective == "all_reduce" and gpus_per_node > 2 else "nvlink_ring"
    return link * table.fractions[key], "intra-node NVLink", "nvlink", "NVLS" if key == "nvls" else "NVLink"


def expect(*, gpu_name: str, collective: str, gpus_per_node: int, nodes: int, nranks: int | None = None,
           nics: Nics | None = None, table: ModelTable | None = None) -> Expectation | None:
    """The expectation for one run shape; None when the GPU is not in the table or the collective not modelled."""
    table = table or load()
    gpu = table.gpu(gpu_name)
    if gpu is None or collective not in MODELLED:
        return None
    nranks = nranks or gpus_per_node * nodes
    scale = math.sqrt(max(1.0, nranks / 8))
    in_domain = gpu.nvlink_domain_gpus is not None and nranks <= gpu.nvlink_domain_gpus
    per_node = nranks if in_domain else gpus_per_node
    intra, bound, path, name = _intra(gpu, table, collective, per_node)
    notes: list[str] = []
    if nodes <= 1 or in_domain:
        if nodes > 1:
            bound = "NVLink domain"
            notes.append(f"{nodes} hosts inside one {gpu.nvlink_domain_gpus}-GPU NVLink domain: no NIC on the path")
        if gpus_per_node <= 1 and nodes <= 1:
            notes.append("one rank: nothing crosses a link")
        return Expectation(intra, bound, int(table.half_bytes[path] * scale), gpu, intra, None, None, False, notes, name)
    assumed = nics is None
    if nics is None:
        ref = gpu.reference_nic_gbps()
        nics = Nics(ref[0], ref[1], f"assumed: {gpu.id} reference platform") if ref else None
    inter = None
    if nics is not None:
        if collective == "alltoall":
            inter = nics.rate_gbit / 8.0 * table.fractions["alltoall"]  # one NIC's rate: alltoall cannot aggregate
        else:
            # network traffic of a node also crosses its GPUs' PCIe links (one GPU per node: its slot is the limit)
            pcie_total = gpus_per_node * table.pcie_x16_gbps[gpu.pcie_gen]
            inter = min(nics.node_gbps, pcie_total) * table.fractions["net"]
    if inter is None:
        notes.append("no NIC information and no reference platform for this GPU: only the intra-node bound is known")
        return Expectation(intra, f"{bound} (network unknown)", int(table.half_bytes[path] * scale), gpu, intra, None,
                           None, True, notes, name)
    if inter < intra:
        return Expectation(inter, "inter-node network", int(table.half_bytes["net"] * scale), gpu, intra, inter, nics,
                           assumed, notes, f"{nics.count}x{nics.rate_gbit:g} Gb/s network")
    return Expectation(intra, bound, int(table.half_bytes[path] * scale), gpu, intra, inter, nics, assumed, notes, name)


def smallest_judgeable(exp: Expectation, table: ModelTable | None = None) -> str:
    table = table or load()
    size = exp.judgeable_from_bytes(table.min_fraction_to_judge)
    power = 1 << max(0, (size - 1).bit_length())
    return format_size(power)
