"""Identity join: rank <-> host <-> CUDA device <-> PCI bus id <-> nvidia-smi index <-> UUID <-> pid.

The kernel names a GPU by PCI bus id (``PCI:0000:ab:00``) and a process by pid; the job names a
*rank*; nvidia-smi names an *index*. Only NCCL's init line ties them together
(``host:pid:tid [5] NCCL INFO comm 0x.. rank 13 nranks 16 cudaDev 5 nvmlDev 5 busId ab000``), so it
is read for every rank of the world communicator (the one with the most ranks: subgroup
communicators number their ranks locally). Launcher lines (``device=cuda:5``, ``(rank 11): env://,
gpu 3``, torchrun's ChildFailedError ``host``/``rank``/``pid``) fill the gaps; nvidia-smi maps
PCI bus ids to indexes and UUIDs per host. ``nvidia-smi -L`` (``GPU 0: NVIDIA H100 (UUID: GPU-..)``,
in its own file or pasted after a prompt, read by the catalogue's ``nvsmi-gpu-listed`` row) names a
GPU's index and UUID but no PCI id; the kernel's ``NVRM: GPU at PCI:0000:17:00: GPU-..`` names its
PCI id and UUID. The UUID joins the two, on one host: the Xid that names only a PCI id gets the index
the operator types into ``nvidia-smi -i``. A host whose listings disagree (the UUID at two indexes,
or an index with two UUIDs: a re-enumeration after a GPU was lost, or a mislabelled paste) gives no
index at all rather than a guess. A host's addresses come from NCCL's ``Bootstrap : Using
eth0:10.0.0.5`` / ``OOB bond0:10.0.0.5`` lines and from the ``localGid ::ffff:10.20.2.42`` of the
completion errors it printed itself (the RoCE address the peers' errors name it by).

In Kubernetes the job's lines name the *pod* (its hostname), the kernel's and nvidia-smi's the
*node*. The scheduler's pod listing (:mod:`gpulib.parsers.kubectl_pods`) joins them: a rank, a pid
or an address of a pod is placed on the pod's node (the machine the operator drains), so the Xid the
node's kernel logged and the CUDA error the pod's rank raised are one GPU's. Pids stay the pod's:
two pods on one node have pid namespaces of their own, and pid 181 may be in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulib.evidence import kinds
from gpulib.evidence.gather import Inputs
from gpulib.evidence.record_summary import summary_of
from gpulib.identity import normalize_pci
from gpulib.parsers.training_log import members_of


@dataclass(slots=True)  # one per rank: 80,000 in a 10,000-node job
class RankInfo:
    rank: int
    host: str | None = None
    pid: int | None = None
    pod: str | None = None  # the Kubernetes pod it ran in, when ``host`` is the pod's node
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    pci: str | None = None


@dataclass(slots=True)
class _GpuNames:
    """One host's GPUs by name: PCI id -> nvidia-smi index, index -> PCI id, PCI id -> UUID."""

    index: dict[str, int] = field(default_factory=dict)
    pci: dict[int, str] = field(default_factory=dict)
    uuid: dict[str, str] = field(default_factory=dict)


#: The catalogue row that reads one ``nvidia-smi -L`` line: index (``gpu``) and UUID (``uuid``).
LISTED_GPU = "nvsmi-gpu-listed"


@dataclass(slots=True)
class _Listed:
    """One host's ``nvidia-smi -L`` lines: UUID -> the indexes listed for it, index -> its UUIDs."""

    index: dict[str, set[int]] = field(default_factory=dict)
    uuid: dict[int, set[str]] = field(default_factory=dict)

    def add(self, index: int, uuid: str) -> None:
        self.index.setdefault(uuid, set()).add(index)
        self.uuid.setdefault(index, set()).add(uuid)

    def index_of(self, uuid: str) -> int | None:
        """The index every listing gives ``uuid``, when no listing gives that index to another GPU."""
        indexes = self.index.get(uuid, set())
        if len(indexes) != 1:
            return None
        index = next(iter(indexes))
        return index if self.uuid[index] == {uuid} else None


@dataclass
class GpuRef:
    """Where something happened, as far as the evidence can tell."""

    host: str | None = None
    gpu_index: int | None = None
    gpu_pci: str | None = None
    gpu_uuid: str | None = None
    rank: int | None = None
    pod: str | None = None


class IdentityMap:
    def __init__(self, inputs: Inputs) -> None:
        self.ranks: dict[int, RankInfo] = {}
        self.world_size: int | None = None
        self.pid_rank: dict[tuple[str | None, int], int] = {}
        self.pid_device: dict[tuple[str | None, int], tuple[int | None, str | None]] = {}
        self.addr_host: dict[str, str] = {}
        self.transport: dict[str, set[str]] = {}  # host -> {"IB", "Socket", ...}
        # the files that name a host's GPUs, in reading order: a host's names are joined when first
        # asked for (a 10,000-node incident lists 80,000 GPUs; a diagnosis asks about a few hosts)
        self._gpu_files: dict[str | None, list] = {}
        self._gpu_names: dict[str | None, _GpuNames] = {}
        self._uuid_place: dict[str, tuple[str | None, str]] | None = None
        self._listed: dict[str | None, _Listed] = {}  # host -> its nvidia-smi -L lines
        self.job_hosts: set[str] = set()
        self.pid_local: dict[int, int | None] = {}  # torchrun's "failed (exitcode) local_rank: N (pid: P)"
        self._by_host: dict[str | None, list[RankInfo]] | None = None
        self._srun_tasks: dict[str, set[int]] = {}  # srun's verdicts: node -> the task ids it named there
        self.pod_node: dict[str, str] = {}  # Kubernetes pod -> the node it ran on
        for f in inputs.of_kind(kinds.KUBECTL_PODS):
            for placement in f.records:
                if placement.node:
                    self.pod_node.setdefault(placement.pod, placement.node)
        self._build(inputs)

    # ---------------------------------------------------------------- building
    def _build(self, inputs: Inputs) -> None:
        inits = []
        for f in inputs.files:
            for sig in f.signals:  # nvidia-smi -L, wherever it was pasted (a job log too)
                if sig.signature == LISTED_GPU:
                    listed = self._listed.setdefault(self.node_of(sig.host or f.host), _Listed())
                    listed.add(int(sig.fields["gpu"]), sig.fields["uuid"])
            if f.kind == kinds.TRAINING_LOG:
                for rec in f.records:
                    self._job_event(rec, f.host, inits)
                continue
            # snapshots, kernel identity lines
            for host in dict.fromkeys(self.node_of(gpu.host or f.host) for gpu in summary_of(f).gpus):
                self._gpu_files.setdefault(host, []).append(f)
        if inits:
            self.world_size = max(e.details["nranks"] for e in inits)
            devices: dict[tuple, tuple] = {}  # (cuda device, PCI id): the same few pairs on every node
            for ev in inits:
                world = ev.details["nranks"] == self.world_size
                for m in members_of(ev):  # one per rank, also those folded into a large job's record
                    key, anywhere = (m["host"], m["pid"]), (None, m["pid"])  # each key made once, for both maps
                    device = (m["cuda_dev"], m["pci_bus_id"])
                    self.pid_device[key] = devices.setdefault(device, device)
                    self.pid_device.setdefault(anywhere, self.pid_device[key])
                    if not world:
                        continue
                    info = self.ranks.setdefault(m["rank"], RankInfo(m["rank"]))
                    info.host, info.pid = self.node_of(m["host"]), m["pid"]
                    if info.host != m["host"]:
                        info.pod = m["host"]
                    info.cuda_dev, info.nvml_dev, info.pci = m["cuda_dev"], m["nvml_dev"], m["pci_bus_id"]
                    self.pid_rank[key] = m["rank"]
                    self.pid_rank.setdefault(anywhere, m["rank"])
        self._place_srun_tasks()
        hosts = {i.host for i in self.ranks.values() if i.host} | self.job_hosts
        if len(hosts) == 1:  # one node: every rank lives there
            only = next(iter(hosts))
            for info in self.ranks.values():
                info.host = info.host or only

    def _job_event(self, ev, file_host: str | None, inits: list) -> None:
        host = self.node_of(ev.host)
        if host:
            self.job_hosts.add(host)
        if ev.kind == "nccl_init":
            inits.append(ev)
        elif ev.kind == "nccl_address" and host:
            self.addr_host.setdefault(ev.details["addr"], host)
        elif ev.kind == "ib_completion_error" and host and ev.details.get("local_addr"):
            self.addr_host.setdefault(ev.details["local_addr"], host)  # its own RoCE address (localGid)
        elif ev.kind == "nccl_transport" and host:
            self.transport.setdefault(host, set()).add(ev.details["network"])
        elif ev.kind == "nccl_no_ib" and host:
            self.transport.setdefault(host, set()).add("no-IB")
        elif ev.kind == "rank_device" and ev.rank is not None:
            info = self.ranks.setdefault(ev.rank, RankInfo(ev.rank))
            info.cuda_dev = info.cuda_dev if info.cuda_dev is not None else ev.local_device
            info.host = info.host or self.node_of(file_host)
        elif ev.kind == "srun_task_exit" and ev.host:
            self._srun_tasks.setdefault(ev.host, set()).update(ev.details["tasks"])
        elif ev.kind == "process_failed" and ev.pid is not None:
            self.pid_local.setdefault(ev.pid, ev.details.get("local_rank"))
        elif ev.kind == "child_failed":
            for failure in ev.details.get("failures", []):
                if failure.get("rank") is None:
                    continue
                info = self.ranks.setdefault(failure["rank"], RankInfo(failure["rank"]))
                info.host = info.host or self.node_of(failure.get("host"))
                info.pid = info.pid or failure.get("pid")
                if info.cuda_dev is None and failure.get("local_rank") is not None:
                    info.cuda_dev = failure["local_rank"]
                if failure.get("pid"):
                    self.pid_rank.setdefault((failure.get("host"), failure["pid"]), failure["rank"])
                    self.pid_rank.setdefault((None, failure["pid"]), failure["rank"])

    def _place_srun_tasks(self) -> None:
        """srun's verdicts name each node's tasks (``srun: error: node-7: task 13: Exited``, ``...: tasks
        8-12,14-15: Killed``). When they count ranks (several tasks on a node: one per GPU; srun starting
        one torchrun per node names one, and then a task is a node's number), a rank's node is the one
        whose list holds it; when every node's list is whole (the same count, no gap) its local rank,
        and so its GPU by default, is its place in that list: rank 13 of 8 tasks a node is GPU 5."""
        tasks = self._srun_tasks
        if not any(len(held) > 1 for held in tasks.values()):
            return
        whole = len({len(held) for held in tasks.values()}) == 1 and all(
            max(held) - min(held) + 1 == len(held) for held in tasks.values())
        for host, held in tasks.items():
            for local, rank in enumerate(sorted(held)):
                info = self.ranks.setdefault(rank, RankInfo(rank))
                info.host = info.host or host
                if whole and info.cuda_dev is None:
                    info.cuda_dev = local

    def node_of(self, host: str | None) -> str | None:
        """The node a host name stands for: a pod's node when the pod listing places it, else the name."""
        return self.pod_node.get(host, host) if host else host

    def pod_of_rank(self, rank: int | None) -> str | None:
        """The pod ``rank`` ran in, when its node is known by a pod listing."""
        info = self.ranks.get(rank) if rank is not None else None
        return info.pod if info else None

    def _names(self, host: str | None) -> _GpuNames:
        """``host``'s GPU names, joined from its files on first use (a later file's name wins)."""
        host = self.node_of(host)
        names = self._gpu_names.get(host)
        if names is None:
            names = self._gpu_names[host] = _GpuNames()
            for f in self._gpu_files.get(host, ()):
                for gpu in summary_of(f).gpus:
                    if self.node_of(gpu.host or f.host) != host:
                        continue
                    if gpu.snapshot and gpu.index is not None:
                        names.index[gpu.pci] = gpu.index
                        names.pci[gpu.index] = gpu.pci
                    if gpu.uuid:
                        names.uuid[gpu.pci] = gpu.uuid
            listed = self._listed.get(host)
            for pci, uuid in names.uuid.items() if listed else ():
                index = listed.index_of(uuid)
                if pci not in names.index and index is not None and index not in names.pci:
                    names.index[pci] = index
                    names.pci[index] = pci
        return names

    # ---------------------------------------------------------------- lookups
    def index_of(self, host: str | None, pci: str) -> int | None:
        """nvidia-smi's index of the GPU at ``pci`` on ``host``."""
        return self._names(host).index.get(pci)

    def pci_at(self, host: str | None, index: int | None) -> str | None:
        """The PCI id of nvidia-smi's GPU ``index`` on ``host``."""
        return self._names(host).pci.get(index) if index is not None else None

    def place_of_uuid(self, uuid: str | None) -> tuple[str | None, str] | None:
        """(host, PCI id) of the GPU whose UUID a snapshot lists (the whole fleet indexed once, when
        some evidence names a GPU by UUID alone)."""
        if not uuid:
            return None
        if self._uuid_place is None:
            self._uuid_place = {}
            for host, files in self._gpu_files.items():
                for f in files:
                    for gpu in summary_of(f).gpus:
                        if gpu.snapshot and gpu.uuid and self.node_of(gpu.host or f.host) == host:
                            self._uuid_place[gpu.uuid] = (host, gpu.pci)
        return self._uuid_place.get(uuid)

    def ranks_on(self, host: str | None) -> list[RankInfo]:
        """The ranks a host ran (indexed once: a 1,024-node job has 8,192 ranks)."""
        if self._by_host is None:
            self._by_host = {}
            for info in self.ranks.values():
                self._by_host.setdefault(info.host, []).append(info)
        return self._by_host.get(self.node_of(host), [])

    def host_of_addr(self, addr: str | None) -> str | None:
        return self.addr_host.get(addr) if addr else None

    def rank_of_pid(self, pid: int | None, host: str | None = None) -> int | None:
        if pid is None:
            return None
        rank = self.pid_rank.get((host, pid))
        if rank is None:  # pids repeat across nodes (and pods): only a pid seen on this host, its pods, or unnamed
            ranks = {r for (h, p), r in self.pid_rank.items()
                     if p == pid and (host is None or h in (host, None) or self.node_of(h) == host)}
            rank = ranks.pop() if len(ranks) == 1 else None
        hosts = {i.host for i in self.ranks.values() if i.host} | self.job_hosts
        if rank is None and len(hosts) <= 1:  # one node: torchrun's local rank is the global rank
            rank = self.pid_local.get(pid)
        return rank

    def rank_of_gpu(self, host: str | None, pci: str | None) -> int | None:
        if not pci:
            return None
        pool = self.ranks.values() if host is None else self.ranks_on(host) + self.ranks_on(None)
        matches = [i.rank for i in pool if i.pci == pci]
        return matches[0] if len(matches) == 1 else None

    def listed_index(self, host: str | None, uuid: str) -> int | None:
        """The index ``host``'s ``nvidia-smi -L`` listings agree on for the GPU ``uuid``."""
        listed = self._listed.get(self.node_of(host))
        return listed.index_of(uuid) if listed else None

    def locate(self, *, host: str | None = None, rank: int | None = None, pci: str | None = None,
               pid: int | None = None, local_device: int | None = None, uuid: str | None = None) -> GpuRef:
        """Fill in whatever is known about a place given any of its names."""
        pci = normalize_pci(pci) if pci else None
        if pci is None and uuid:  # a GPU named by UUID alone (the device plugin's Xid): its PCI id on the host
            pci = next((p for p, u in self._names(host).uuid.items() if u == uuid), None)
        pod = host if self.node_of(host) != host else None
        if rank is None and pid is not None:
            rank = self.rank_of_pid(pid, host)
        host = self.node_of(host)
        info = self.ranks.get(rank) if rank is not None else None
        if info:
            host = host or info.host
            pci = pci or info.pci
        if rank is None and pci:
            rank = self.rank_of_gpu(host, pci)
            info = self.ranks.get(rank) if rank is not None else None
        if pci is None and pid is not None:
            dev = self.pid_device.get((pod or host, pid)) or self.pid_device.get((None, pid))
            if dev:
                pci = dev[1]
        index = self.index_of(host, pci) if pci else None
        if index is None and pci:
            index = self.index_of(None, pci)
        if index is None and uuid:
            index = self.listed_index(host, uuid)
        if index is None and info is not None:
            index = info.nvml_dev if info.nvml_dev is not None else info.cuda_dev
        if index is None and local_device is not None and pci is None:
            index = local_device
        if pci is None and index is not None:
            pci = self.pci_at(host, index)
        uuid = (self._names(host).uuid.get(pci) if pci else None) or uuid
        return GpuRef(host=host, gpu_index=index, gpu_pci=pci, gpu_uuid=uuid, rank=rank,
                      pod=pod or (info.pod if info else None))
