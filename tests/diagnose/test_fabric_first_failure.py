"""Which network fault interrupted the job: the port every failing connection went through, found
near the interruption, on the job's own HCAs.

Hosts, addresses, PCI ids and times are invented; the lines keep the layouts of NCCL 2.19+
(``NET/IB : Got completion from peer ... localGid ::ffff:A remoteGids::ffff:B hca mlx5_N``), the
kernel's mlx5 messages and ``ibstat``.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from tests.diagnose.files import write_tree

NODES = {"rk-c17": 17, "rk-c18": 18, "rk-c19": 19}


def _warn(host: str, peer: str, hca: str = "mlx5_1") -> str:
    me, far = NODES[host], NODES[peer]
    return (f"{host}:{4100 + me}:{4180 + me} [1] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            f"10.31.4.{far}<5{far}211> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.31.4.{me} "
            f"remoteGids::ffff:10.31.4.{far} hca {hca}")


def _job(pairs: list[tuple[str, str]], ib_hca: str = "mlx5_0,mlx5_1", start: str = "09:00:03") -> str:
    lines = [f"+ export NCCL_IB_HCA={ib_hca}",
             f"[2026-10-08 {start}] INFO train.py: launching 12 ranks on rk-c17,rk-c18,rk-c19"]
    for n, host in enumerate(NODES):
        for dev in range(4):
            rank = 4 * n + dev
            lines.append(f"{host}:{4100 + NODES[host] + dev}:{4180 + NODES[host] + dev} [{dev}] NCCL INFO "
                         f"ncclCommInitRank comm 0x7f11c0{rank:02x}a0 rank {rank} nranks 12 cudaDev {dev} nvmlDev {dev} "
                         f"busId {(0x18 + 0x20 * dev):x}000 commId 0x9a1b2c3d4e5f6071 - Init COMPLETE")
    lines += [_warn(a, b) for a, b in pairs]
    lines.append("[rank5]:[E1008 12:14:41.306112004 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
                 "Process group watchdog thread terminated with exception: NCCL error: remote process exited or there "
                 "was a network error, NCCL version 2.21.5")
    lines.append("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.")
    return "\n".join(lines) + "\n"


def test_the_one_end_of_every_failing_connection_is_the_suspect(tmp_path):
    # rk-c17 and rk-c18 blame rk-c19; rk-c19 blames each of them back: only rk-c19 is in every pair
    write_tree(tmp_path, {"job.out": _job([("rk-c17", "rk-c19"), ("rk-c18", "rk-c19"), ("rk-c19", "rk-c17"),
                                           ("rk-c19", "rk-c18")])})
    root = diagnose([tmp_path]).to_dict()["root_cause"]
    assert (root["category"], root["host"]) == ("network_fabric", "rk-c19")


def test_two_ends_that_blame_each_other_name_neither(tmp_path):
    # one connection reported from both of its ends: the errors cannot tell whose port failed
    write_tree(tmp_path, {"job.out": _job([("rk-c17", "rk-c18"), ("rk-c18", "rk-c17")])})
    out = diagnose([tmp_path]).to_dict()
    assert out["root_cause"]["category"] == "network_fabric"
    assert not any("one end of all" in str(f.get("identified_by")) for f in out["findings"])
