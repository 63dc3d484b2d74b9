"""Why a run is slow: causes named from what the output itself shows.

An nccl-tests run started with ``NCCL_DEBUG=INFO`` prints how every pair of ranks is connected
(``via P2P/IPC``, ``via NET/IB/0/GDRDMA``, ``via SHM/direct/direct``, ``via NET/Socket/0``), which NICs
NCCL took (``NET/IB : Using [0]mlx5_0:1/IB ...``), its view of the PCI tree (``+ PCI[24.0] - ...``,
``+ NET[50.0] - NET/0``) and why GPUDirect RDMA is off (``GPU Direct RDMA Disabled for GPU ... /
HCA 0 (distance 7 > 4)``). Each of the usual culprits of a slow fabric leaves one of these marks;
a cause is named only with the line that shows it (its ``quote``). Without NCCL_DEBUG lines only the
numbers speak, and the cause is a weaker *hint* (``strong`` False) that says what to collect.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gpulib.nccl.model import Nics
from gpulib.parsers.nccl_tests import NcclDebugLine

_VIA = re.compile(r" via (?P<t>\S+)")
_NET_USING = re.compile(r"^NET/(?P<kind>\w+) : Using (?P<list>.*?)(?: ?; OOB .*)?$")
_NIC_ITEM = re.compile(r"\[\d+\](?P<name>[^\s\[;]+)")
_TOPO_NET = re.compile(r"\+ NET\[(?P<gbps>[\d.]+)\] - NET/(?P<id>[\w-]+)")
_TOPO_PCI = re.compile(r"\+ PCI\[(?P<gbps>[\d.]+)\]")
_GDR_OFF = re.compile(r"GPU Direct RDMA Disabled for (?P<what>.*?)(?: \(distance (?P<d>\d+) > (?P<max>\d+)\))?\s*$")
_NRANKS = re.compile(r" rank (?P<rank>\d+) nranks (?P<n>\d+) ")
_DISABLED = re.compile(r"(?P<var>NCCL_(?:P2P|IB|SHM|NVLS)_DISABLE) set by environment to (?P<v>\S+)")

_NVLS_ON = re.compile(r"\bNVLS\b|via NVLS")
_NVLS_OFF = re.compile(r"NVLS_DISABLE|NVLS_ENABLE|not (?:supported|available)|disabled|unavailable", re.IGNORECASE)
#: A PCI link narrower than this (GB/s) in NCCL's topology dump is not real hardware (x1 gen1 = 0.25).
_VM_PCI_GBPS = 1.0


@dataclass(frozen=True)
class Cause:
    """``key`` is stable (tests, JSON); ``text`` teaches why; ``quote`` is the line it rests on."""

    key: str
    text: str
    quote: str | None = None
    strong: bool = True

    def render(self) -> str:
        return f"{self.text} [{self.quote}]" if self.quote else self.text


@dataclass
class Fabric:
    """What the NCCL_DEBUG lines of a file say about the fabric."""

    transports: dict[str, NcclDebugLine]  # first line per transport kind
    nics: Nics | None
    socket_only: NcclDebugLine | None
    gdr_off: NcclDebugLine | None
    vm_pci: NcclDebugLine | None
    nvlink_in_topology: bool
    topology_seen: bool
    single_rank_comms: NcclDebugLine | None
    disabled: dict[str, NcclDebugLine]
    nvls: NcclDebugLine | None = None  # NVLink SHARP in use: an NVSwitch gen3+ node (H100 class or newer)
    hosts: tuple[str, ...] = ()  # the hosts that printed NCCL lines: the nodes of a paste without rank lines

    @property
    def has_debug(self) -> bool:
        return bool(self.transports or self.nics or self.topology_seen or self.socket_only)


def _quote(d: NcclDebugLine) -> str:
    return f"line {d.line}: NCCL {d.level} {d.text}"


def _transport_kind(t: str) -> str:
    if t.startswith("NET/Socket"):
        return "net-socket"
    if t.startswith("NET/"):
        return "net-gdr" if "GDRDMA" in t else "net-no-gdr"
    if t.startswith("SHM"):
        return "shm"
    if t.startswith("P2P") or t.startswith("NVLS") or t.startswith("CollNet"):
        return "p2p"
    return "other"


def read_fabric(debug: Sequence[NcclDebugLine]) -> Fabric:
    transports: dict[str, NcclDebugLine] = {}
    nics_by_host: dict[str, set[str]] = defaultdict(set)
    net_speed: dict[str, dict[str, float]] = defaultdict(dict)
    socket_using = ib_using = None
    gdr_off = vm_pci = single = None
    nvl = topo = False
    comm_sizes: dict[int, int] = {}  # line -> nranks of an Init line
    disabled: dict[str, NcclDebugLine] = {}
    nvls = None
    for d in debug:
        text = d.text
        if nvls is None and _NVLS_ON.search(text) and not _NVLS_OFF.search(text):
            nvls = d
        if m := _VIA.search(text):
            transports.setdefault(_transport_kind(m["t"]), d)
        if m := _NET_USING.match(text):
            if m["kind"] == "Socket":
                socket_using = socket_using or d
            else:
                ib_using = ib_using or d
                nics_by_host[d.host].update(i["name"] for i in _NIC_ITEM.finditer(m["list"]))
        if text.startswith("Using network"):
            if text.split()[-1] == "Socket":
                socket_using = socket_using or d
            else:
                ib_using = ib_using or d
        if m := _TOPO_NET.search(text):
            net_speed[d.host][m["id"]] = float(m["gbps"])
        if "+ NVL[" in text:
            nvl = True
        if "=== System" in text or "+ PCI[" in text:
            topo = True
        if (m := _TOPO_PCI.search(text)) and float(m["gbps"]) < _VM_PCI_GBPS:
            vm_pci = vm_pci or d
        if _GDR_OFF.search(text):
            gdr_off = gdr_off or d
        if m := _NRANKS.search(text):
            comm_sizes[d.line] = int(m["n"])
        if (m := _DISABLED.search(text)) and m["v"] not in ("0", "false"):
            disabled.setdefault(m["var"], d)
    if comm_sizes and all(n == 1 for n in comm_sizes.values()) and len(comm_sizes) > 1:
        single = next(d for d in debug if _NRANKS.search(d.text))
    nics = None
    speeds = [s for host in net_speed.values() for s in host.values()]
    count = max((len(v) for v in nics_by_host.values()), default=0) or max((len(v) for v in net_speed.values()), default=0)
    if count and speeds:
        rate_gbit = sorted(speeds)[len(speeds) // 2] * 8.0
        nics = Nics(count, rate_gbit, "NCCL_DEBUG topology lines")
    socket_only = socket_using if socket_using and not ib_using else None
    if "net-socket" in transports and "net-gdr" not in transports and "net-no-gdr" not in transports:
        socket_only = transports["net-socket"]
    hosts = tuple(sorted({d.host for d in debug if d.host}))
    return Fabric(transports, nics, socket_only, gdr_off, vm_pci, nvl, topo, single, disabled, nvls, hosts)


def name_causes(fabric: Fabric, *, nodes: int, has_nvlink: bool, nvlink_domain: bool, busbw_gbps: float,
                pcie_gbps: float, floor_gbps: float) -> list[Cause]:
    """The causes a degraded run's output shows, most decisive first."""
    causes: list[Cause] = []
    multi = nodes > 1 and not nvlink_domain
    if multi and fabric.socket_only:
        causes.append(Cause("net-socket", "NET/Socket fallback: inter-node traffic goes over TCP sockets, not RDMA "
                            "(no usable IB/RoCE device: NCCL_IB_DISABLE, rdma-core/libibverbs missing in the "
                            "container, or the HCAs are down)", _quote(fabric.socket_only)))
    if fabric.vm_pci:
        causes.append(Cause("vm-topology", "VM without PCI topology: NCCL read implausible PCI link speeds, so it "
                            "cannot place GPUs and NICs (pass the host's topology with NCCL_TOPO_FILE)",
                            _quote(fabric.vm_pci)))
    if multi and fabric.gdr_off:
        m = _GDR_OFF.search(fabric.gdr_off.text)
        if m and m["d"]:
            causes.append(Cause("gpu-nic-locality", f"GPU-NIC locality: GPU and NIC are {m['d']} PCI hops apart (limit "
                                f"{m['max']}), so GPUDirect RDMA is off and NIC traffic crosses the CPU (GPU and NIC "
                                "on different sockets or root complexes; check nvidia-smi topo -m)",
                                _quote(fabric.gdr_off)))
        else:
            causes.append(Cause("gdr-off", "GPUDirect RDMA is off: NIC traffic is staged through host memory "
                                "(nvidia-peermem not loaded, or ACS/IOMMU blocks peer-to-peer)", _quote(fabric.gdr_off)))
    elif multi and "net-no-gdr" in fabric.transports and "net-gdr" not in fabric.transports:
        causes.append(Cause("gdr-off", "GPUDirect RDMA is off: the network transport lacks /GDRDMA, so NIC traffic "
                            "is staged through host memory (nvidia-peermem not loaded, ACS on, or GPU and NIC far apart)",
                            _quote(fabric.transports["net-no-gdr"])))
    for var in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_NVLS_DISABLE"):
        if var in fabric.disabled and not (var == "NCCL_IB_DISABLE" and any(c.key == "net-socket" for c in causes)):
            causes.append(Cause("env-disabled", f"{var} is set: a transport was switched off by the environment",
                                _quote(fabric.disabled[var])))
    if has_nvlink and "shm" in fabric.transports:
        causes.append(Cause("shm-not-nvlink", "P2P/SHM instead of NVLink: ranks of one node exchange through host "
                            "memory (P2P disabled, a container without --ipc=host, or NVLink down: nvidia-smi nvlink -s)",
                            _quote(fabric.transports["shm"])))
    elif has_nvlink and fabric.topology_seen and not fabric.nvlink_in_topology:
        causes.append(Cause("no-nvlink", "NVLink absent from NCCL's topology: GPUs talk over PCIe (NVLink down or "
                            "the fabric manager is not running)"))
    elif not has_nvlink and "shm" in fabric.transports:
        causes.append(Cause("shm-not-p2p", "P2P/SHM: PCIe GPUs exchange through host memory, not peer-to-peer "
                            "(across CPU sockets, ACS on, or GeForce P2P off); expect about half the PCIe rate",
                            _quote(fabric.transports["shm"])))
    if not causes:
        causes += _hints(fabric, multi=multi, has_nvlink=has_nvlink, busbw_gbps=busbw_gbps, pcie_gbps=pcie_gbps,
                         floor_gbps=floor_gbps)
    return causes


def _hints(fabric: Fabric, *, multi: bool, has_nvlink: bool, busbw_gbps: float, pcie_gbps: float,
           floor_gbps: float) -> list[Cause]:
    """Weak causes from the numbers alone, with what to collect to turn them into evidence."""
    collect = "" if fabric.has_debug else " (rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH to see it)"
    if multi and busbw_gbps < floor_gbps:
        return [Cause("net-slow-path", f"below what one 100 Gb/s NIC carries: TCP socket fallback or a single slow "
                      f"path between nodes is likely{collect}", strong=False)]
    if has_nvlink and busbw_gbps <= pcie_gbps:
        return [Cause("pcie-speed", f"at PCIe speed ({busbw_gbps:.1f} <= {pcie_gbps:.1f} GB/s): NVLink is probably not "
                      f"in use (P2P off, NVLink down, or no fabric manager){collect}", strong=False)]
    if multi:
        return [Cause("inter-node", f"the inter-node path is slower than the model: check NIC count and speed (ibstat), "
                      f"GPUDirect RDMA and GPU-NIC locality{collect}", strong=False)]
    return [Cause("intra-node", f"the intra-node path is slower than the model: check nvidia-smi nvlink -s and "
                  f"nvidia-smi topo -m{collect}", strong=False)]
