"""Judging busbw when the GPU is unknown: the interconnect's bounds for the run's shape.

Why: a paste that starts below ``# Using devices`` names no GPU, and some GPUs are not in the model's
table; "not judged" sent back a healthy 8-GPU run at 480 GB/s and a 2-node run over TCP at 3 GB/s
alike. What the output does show - the rank count, the nodes (rank lines or the hosts that printed
NCCL lines), NVLS, NET/IB or NET/Socket in NCCL_DEBUG lines - bounds what a healthy run can reach:

- **clearly healthy**: at least the model's pass band of the reference node for this shape
  (``expectations.yaml`` ``unknown_gpu``: 8 GPUs on NVLink4 with NVLS, 8 x 400G NICs). Whatever the run
  ran on, it is near the best widely deployed fabric of its shape.
- **clearly broken**: below the slowest healthy fabric of the shape at that message size - a PCIe
  gen3 x16 ring inside a multi-GPU node, one 100 Gb/s NIC between nodes (the lower of the two when
  the nodes are unknown). Also below the fail band of the reference when the output proves the
  reference applies (NVLS in use: an NVSwitch gen3+ node) or names a cause (TCP sockets, a VM
  without PCI topology, GPU and NIC on different sockets).
- **in between**: WARN, with both bounds and what settles it (``--gpu MODEL``, the rank lines).
"""

from __future__ import annotations

from gpulib.nccl.causes import Cause, Fabric, name_causes
from gpulib.nccl.model import Expectation, ModelTable, expect
from gpulib.nccl.report import Check, Row
from gpulib.nccl.sizes import format_size


def _curve(size: int, half: int) -> float:
    return size / (size + half) if size > 0 else 0.0


def bounds_check(rows: list[Row], *, collective: str, gpus_per_node: int, nodes: int, nodes_known: bool,
                 nranks: int | None, fabric: Fabric, nics, model: ModelTable,
                 shape_kind: str) -> tuple[Check, Expectation | None, list[Cause]]:
    """PASS near the reference node, FAIL below the slowest healthy fabric (or a named cause), WARN between."""
    largest = max(rows, key=lambda r: r.size_bytes)
    got, size = largest.best_busbw_gbps, largest.size_bytes
    ref = model.reference_gpu()
    exp = expect(gpu_name=ref.match[0], collective=collective, gpus_per_node=gpus_per_node, nodes=nodes,
                 nranks=nranks, nics=nics, table=model)
    if exp is None:
        return Check("busbw", "SKIP", f"no bounds for {collective}: bandwidth not judged"), None, []
    want = exp.at(size)
    ratio = got / want if want > 0 else 0.0
    intra_floor = model.pcie_floor_gbps() * _curve(size, model.half_bytes["pcie"])
    inter_floor = model.unknown_nic_floor_gbps * _curve(size, model.half_bytes["net"])
    if not nodes_known:
        floor, floor_name = min(intra_floor, inter_floor), "the slowest healthy fabric (PCIe gen3 ring or one 100 Gb/s NIC)"
    elif nodes > 1:
        floor, floor_name = inter_floor, "one 100 Gb/s NIC between nodes"
    else:
        floor, floor_name = intra_floor, "a PCIe gen3 x16 ring inside a node"
    label = exp.label(gpus_per_node, nodes)
    where = f"{got:.1f} GB/s at {format_size(size)}"
    layout = "" if nodes_known else " (nodes unknown: no rank lines or NCCL lines name the hosts)"
    head = (f"{where} = {ratio:.2f} of the {label} reference curve at that size ({want:.0f} GB/s; GPU unknown, so "
            f"judged by the interconnect's bounds for {shape_kind}{layout}")
    causes = name_causes(fabric, nodes=nodes, has_nvlink=bool(fabric.nvls or fabric.nvlink_in_topology),
                         nvlink_domain=False, busbw_gbps=got, pcie_gbps=model.pcie_floor_gbps(),
                         floor_gbps=model.unknown_nic_floor_gbps)
    settle = "; give --gpu MODEL (or paste the '# Using devices' lines) for the GPU's own model"
    if ratio >= model.pass_at_least:
        return Check("busbw", "PASS", f"{head}; PASS >= {model.pass_at_least:.0%} of it)"), exp, []
    why = "; likely cause: " + "; ".join(c.render() for c in causes) if causes else ""
    if got < floor:
        return Check("busbw", "FAIL", f"{head}): below {floor:.1f} GB/s, what {floor_name} carries at that size"
                     f"{why}"), exp, causes
    if exp.fraction_at(size) < model.min_fraction_to_judge:
        return Check("busbw", "WARN", f"{head}): {format_size(size)} is too small to judge against the reference "
                     f"curve; rerun with a larger -e{settle}"), exp, causes
    proven = fabric.nvls is not None and nodes <= 1
    strong = [c for c in causes if c.strong]
    if ratio < model.fail_below and (proven or strong):
        because = (f"the output shows NVLS in use [line {fabric.nvls.line}: NCCL INFO {fabric.nvls.text}], so the "
                   "reference's NVLS curve applies" if proven and not strong else "the output names the cause")
        return Check("busbw", "FAIL", f"{head}): below {model.fail_below:.0%} of it and {because}{why}"), exp, causes
    return Check("busbw", "WARN", f"{head}): between {floor:.1f} GB/s ({floor_name}) and "
                 f"{model.pass_at_least * want:.0f} GB/s (the reference's pass band): neither clearly healthy nor "
                 f"clearly broken{why}{settle}"), exp, causes
