"""A rank named by its Kubernetes pod is on the node the scheduler's pod listing places it on.

Inside a pod the hostname is the pod's name: NCCL's ``host:pid:tid`` prefix and torch's lines say
``llm-pt-worker-1``, while the node's kernel journal says ``gpu-k8s-a12``. The listing
(``kubectl get pods -o wide``) joins the two, so the kernel's Xid on that node and the rank's CUDA
error in that pod are one GPU's fault, and the culprit is the node the operator drains. Pods, nodes,
pids, addresses and times are invented; the lines keep the tools' layouts.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.diagnose.joins import IdentityMap
from gpulib.evidence.gather import gather
from tests.diagnose.files import write_tree

STAMP = "2026-12-04T{}.{:09d}Z "


def _pod_log(pod: str, ranks: list[tuple[int, int, int, str]], tail: list[str]) -> str:
    """``kubectl logs --timestamps`` of one pod: NCCL's init line per (rank, pid, local GPU, busId), then ``tail``."""
    lines = [STAMP.format("10:01:02", 11 * n) + f"{pod}:{pid}:{pid + 300} [{dev}] NCCL INFO ncclCommInitRank comm "
             f"0x55d0c3a1{n:04x} rank {rank} nranks 4 cudaDev {dev} nvmlDev {dev} busId {bus} commId 0x6e1f0a2b93c4d5e6 "
             "- Init COMPLETE" for n, (rank, pid, dev, bus) in enumerate(ranks)]
    return "\n".join(lines + tail) + "\n"


ECC = (STAMP.format("11:42:09", 120441829) + "[rank3]:[E1204 11:42:09.120441829 ProcessGroupNCCL.cpp:1595] [PG ID 0 "
       "PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: CUDA error: "
       "uncorrectable ECC error encountered")
TIMEOUT = (STAMP.format("11:52:09", 500118000) + "[rank0]:[E1204 11:52:09.500118000 ProcessGroupNCCL.cpp:632] [Rank 0] "
           "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4412, OpType=ALLREDUCE, NumelIn=1048576, "
           "NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
XID48 = ("2026-12-04T11:42:08+00:00 gpu-k8s-a12 kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', "
         "name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
         "physAddr 0x1f00a2c000 partition 2, subpartition 1.")
BOOT = "2026-12-04T09:58:40+00:00 {} kernel: Linux version 6.5.0-1024-aws (buildd@lcy02-amd64-031) #24-Ubuntu SMP"
HEADER = ("NAME              READY   STATUS   RESTARTS   AGE   IP             NODE          NOMINATED NODE   "
          "READINESS GATES")


def _row(pod: str, ip: str, node: str) -> str:
    return f"{pod:<17} 0/1     Error    0          2h    {ip:<14} {node:<13} <none>           <none>"


def _incident(tmp_path, rows: list[str], worker1_pid: int = 211) -> dict:
    write_tree(tmp_path, {
        "pods.txt": "$ kubectl -n llm get pods -o wide\n" + "\n".join([HEADER, *rows]) + "\n",
        "logs/llm-pt-worker-0.log": _pod_log("llm-pt-worker-0", [(0, 211, 0, "1b000"), (1, 212, 1, "3b000")],
                                            [TIMEOUT]),
        "logs/llm-pt-worker-1.log": _pod_log("llm-pt-worker-1", [(2, worker1_pid - 1, 0, "1b000"),
                                                                (3, worker1_pid, 1, "3b000")], [ECC]),
        "journal/gpu-k8s-a11.txt": BOOT.format("gpu-k8s-a11") + "\n",
        "journal/gpu-k8s-a12.txt": BOOT.format("gpu-k8s-a12") + "\n" + XID48 + "\n",
    })
    return diagnose([tmp_path]).to_dict()


BOTH = [_row("llm-pt-worker-0", "10.91.0.7", "gpu-k8s-a11"), _row("llm-pt-worker-1", "10.91.3.12", "gpu-k8s-a12")]


def test_the_pods_node_is_the_culprit_and_its_kernel_xid_the_first_failure(tmp_path):
    out = _incident(tmp_path, BOTH)
    root = out["root_cause"]
    assert (root["category"], root["host"], root["rank"], root["gpu_pci"]) == (
        "gpu_memory_error", "gpu-k8s-a12", 3, "0000:3b:00.0")
    assert root["evidence"][0]["text"] == XID48  # the kernel's record, not the rank's report of it
    assert "(pod llm-pt-worker-1)" in out["verdict"]["summary"]  # how the job named the place


def test_a_listing_without_the_pod_joins_nothing(tmp_path):
    out = _incident(tmp_path, BOTH[:1])  # worker-1 is not listed: its node is unknown
    root = out["root_cause"]
    assert root["host"] == "llm-pt-worker-1" and root["rank"] == 3
    assert root["evidence"][0]["text"] != XID48  # another node's Xid is not joined to this pod's rank


def test_two_pods_on_one_node_keep_their_own_pids(tmp_path):
    same_node = [_row("llm-pt-worker-0", "10.91.0.7", "gpu-k8s-a12"), _row("llm-pt-worker-1", "10.91.3.12", "gpu-k8s-a12")]
    out = _incident(tmp_path, same_node, worker1_pid=212)  # pid 212 is rank 1 in worker-0 and rank 3 in worker-1
    root = out["root_cause"]
    assert (root["host"], root["rank"], root["gpu_pci"]) == ("gpu-k8s-a12", 3, "0000:3b:00.0")
    ids = IdentityMap(gather([tmp_path]))
    assert ids.rank_of_pid(212, "llm-pt-worker-0") == 1 and ids.rank_of_pid(212, "llm-pt-worker-1") == 3
    assert ids.rank_of_pid(212, "gpu-k8s-a12") is None  # the node alone cannot tell which pod's pid 212
    assert {ids.locate(rank=r).host for r in range(4)} == {"gpu-k8s-a12"}
