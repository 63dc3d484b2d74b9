"""An RDMA connection NCCL could not set up, and the NIC's own async events, as first failures.

Hosts, addresses, PIDs and times are invented; the lines keep the layouts of NCCL's ``ibvwrap.c``
WARN (``Call to ibv_modify_qp failed with 110 ..., on dev mlx5_N:1, curr state INIT, next state RTR,
local GID index K, local GID ..., remote GID ...``), its ``NET/IB : mlx5_N:1 Got async event : ...``
line, ``ibdev2netdev`` / ``ip -br addr`` behind ``pdsh`` prefixes, and ``show_gids``.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from tests.diagnose.files import write_tree


def _root(folder) -> dict:
    """The root cause's finding, with the verdict's interruption."""
    out = diagnose([folder]).to_dict()
    root = next(f for f in out["findings"] if f["id"] == out["root_cause"]["finding"])
    return root | {"interruption": out["verdict"]["interruption"]}


# ---- a queue pair that cannot reach RTR ----


def _qp_job(local: str, remote: str, dev: str = "mlx5_3") -> str:
    return "\n".join([
        "+ export NCCL_IB_GID_INDEX=3",
        "[2026-07-02 11:40:01] step 1200/90000 | loss 2.301 | 4.81 s/it",
        "[2026-07-02 11:40:06] step 1201/90000 | loss 2.297 | 4.80 s/it",
        f"[2026-07-02 11:40:09] tq-a03:51120:51388 [3] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed with 110 "
        f"Connection timed out, on dev {dev}:1, curr state INIT, next state RTR, local GID index 3, "
        f"local GID ::ffff:{local}, remote GID ::ffff:{remote}",
        "tq-a03:51120:51388 [3] NCCL INFO transport/net_ib.cc:1154 -> 2",
        "[rank27]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled system "
        "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2",
        "[rank27]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
        "E0702 11:40:15.201000 51101 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) "
        "local_rank: 3 (pid: 51120) of binary: /usr/bin/python3",
    ]) + "\n"


RAILS = "\n".join([
    "tq-a03: mlx5_3 port 1 ==> ens3f0 (Up)",
    "tq-a03: mlx5_6 port 1 ==> ens6f0 (Up)",
    "tq-a03: ens3f0           UP             10.83.3.3/24",
    "tq-a03: ens6f0           UP             10.86.3.6/24",
    "tq-a09: mlx5_3 port 1 ==> ens3f0 (Up)",
    "tq-a09: mlx5_6 port 1 ==> ens6f0 (Up)",
    "tq-a09: ens3f0           UP             10.83.9.3/24",
    "tq-a09: ens6f0           UP             10.86.9.6/24",
]) + "\n"


def test_a_queue_pair_across_two_rails_is_a_soft_fabric_configuration(tmp_path):
    write_tree(tmp_path, {"train.log": _qp_job("10.83.3.3", "10.86.9.6"), "rails.txt": RAILS})
    root = _root(tmp_path)
    assert (root["category"], root["interruption"], root["host"]) == ("network_fabric", "soft", "tq-a03")
    assert "two rails" in root["title"]
    assert any("NCCL_CROSS_NIC=0" in a for a in root["actions"])


def test_a_queue_pair_on_one_rail_is_not_called_a_rail_crossing(tmp_path):
    # negative control: both GIDs are in rail 3's subnet; the GID index / routing is what to check
    write_tree(tmp_path, {"train.log": _qp_job("10.83.3.3", "10.83.9.3"), "rails.txt": RAILS})
    root = _root(tmp_path)
    assert (root["category"], root["interruption"]) == ("network_fabric", "soft")
    assert "two rails" not in root["title"]
    assert any("NCCL_IB_GID_INDEX" in a for a in root["actions"])


def test_without_a_rail_map_the_subnets_alone_do_not_claim_rails(tmp_path):
    # negative control: different subnets, but nothing in the evidence says the fabric has rails
    write_tree(tmp_path, {"train.log": _qp_job("10.83.3.3", "10.86.9.6")})
    root = _root(tmp_path)
    assert (root["category"], root["interruption"]) == ("network_fabric", "soft")
    assert "two rails" not in root["title"]


def test_a_memory_registration_failure_points_at_the_locked_memory_limit(tmp_path):
    job = _qp_job("10.83.3.3", "10.83.9.3").replace(
        "Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_3:1, curr state INIT, next state RTR, "
        "local GID index 3, local GID ::ffff:10.83.3.3, remote GID ::ffff:10.83.9.3",
        "Call to ibv_reg_mr failed with 12 Cannot allocate memory")
    write_tree(tmp_path, {"train.log": job})
    root = _root(tmp_path)
    assert (root["category"], root["interruption"], root["host"]) == ("network_fabric", "soft", "tq-a03")
    assert any("ulimit -l" in a for a in root["actions"])


# ---- the NIC's addressing changed under the job ----

def _event_job(event: str = "GID table change", *, finished: bool = False) -> str:
    lines = ["[2026-08-14 02:00:41] job 40311 on lm-b[11-14], NCCL_IB_GID_INDEX=3 NCCL_IB_HCA=mlx5_0,mlx5_2",
             "[2026-08-14 13:05:10] [INFO] step 20410/40000 loss=2.0113",
             "[2026-08-14 13:06:12] [INFO] step 20420/40000 loss=2.0087"]
    if finished:
        lines += ["[2026-08-14 22:41:55] [INFO] step 40000/40000 loss=1.7421",
                  "[2026-08-14 22:42:30] [INFO] Training finished: 40000 steps"]
    lines += [f"lm-b13:70211:70399 [2] transport/net_ib.cc:91 NCCL WARN NET/IB : mlx5_2:1 Got async event : {event}"]
    if not finished:
        lines += [
            "lm-b13:70211:70420 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
            "10.44.12.2<40117> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.44.13.2 "
            "remoteGidsfe80::b6e9:b0ff:fe07:31c2",
            "[rank9]:[E814 13:36:14.118027331 ProcessGroupNCCL.cpp:632] [Rank 9] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=51220, OpType=ALLREDUCE, NumelIn=8388608, NumelOut=8388608, "
            "Timeout(ms)=1800000) ran for 1800044 milliseconds before timing out.",
            "[rank5]:[E814 13:36:14.120551902 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=51220, OpType=ALLREDUCE, NumelIn=8388608, NumelOut=8388608, "
            "Timeout(ms)=1800000) ran for 1800051 milliseconds before timing out.",
            "srun: error: lm-b13: task 2: Aborted (core dumped)"]
    return "\n".join(lines) + "\n"


def _show_gids(host: str, ipv4_at: int) -> str:
    """``show_gids`` of mlx5_2 on ``host``: link-local GIDs (v1, v2 in turn) below ``ipv4_at``, the
    RoCE v2 GID of the port's IPv4 address at ``ipv4_at``."""
    rows = [f"[root@{host} ~]# show_gids mlx5_2",
            "DEV     PORT    INDEX   GID                                     IPv4            VER     DEV",
            "---     ----    -----   ---                                     ------------    ---     ---"]
    rows += [f"mlx5_2  1       {i}       fe80:0000:0000:0000:b6e9:b0ff:fe07:31c2                 v{1 + i % 2}      ens2np0"
             for i in range(ipv4_at)]
    rows.append(f"mlx5_2  1       {ipv4_at}       0000:0000:0000:0000:0000:ffff:0a2c:0d02 10.44.13.2      v2      ens2np0")
    return "\n".join(rows) + f"\nn_gids_found={ipv4_at + 1}\n"


def test_a_gid_table_change_is_the_first_failure_and_names_the_node_whose_index_moved(tmp_path):
    write_tree(tmp_path, {"slurm-40311.out": _event_job(),
                          "lm-b13/gids.txt": _show_gids("lm-b13", 5)})
    root = _root(tmp_path)
    assert (root["category"], root["interruption"], root["host"]) == ("network_fabric", "soft", "lm-b13")
    assert "index 3" in root["title"] and "index 5" in root["title"]


def test_a_gid_table_change_where_the_index_still_holds_is_soft_but_not_blamed_on_the_index(tmp_path):
    # negative control: show_gids has the RoCE v2 IPv4 GID at index 3: the index did not move
    write_tree(tmp_path, {"slurm-40311.out": _event_job(),
                          "lm-b13/gids.txt": _show_gids("lm-b13", 3)})
    root = _root(tmp_path)
    assert (root["category"], root["interruption"], root["host"]) == ("network_fabric", "soft", "lm-b13")
    assert "now holds" not in root["title"] and "still holding" in root["title"]


def test_a_device_fatal_event_is_hard(tmp_path):
    write_tree(tmp_path, {"slurm-40311.out": _event_job("local catastrophic error")})
    root = _root(tmp_path)
    assert (root["category"], root["interruption"], root["host"]) == ("network_fabric", "hard", "lm-b13")


def test_an_event_after_the_normal_end_interrupts_nothing(tmp_path):
    # negative control: the run finished, then the port's addresses changed
    write_tree(tmp_path, {"slurm-40311.out": _event_job(finished=True)})
    out = diagnose([tmp_path]).to_dict()
    assert out["verdict"]["interruption"] == "none"


def test_the_node_named_is_the_one_whose_show_gids_moved_even_when_asked_over_ssh(tmp_path):
    # the table was read from lm-b13's prompt over ssh: the rows are lm-b12's, and lm-b12's index moved
    gids = _show_gids("lm-b13", 5).replace("[root@lm-b13 ~]# show_gids mlx5_2", "[root@lm-b13 ~]# ssh lm-b12 show_gids mlx5_2")
    write_tree(tmp_path, {"slurm-40311.out": _event_job(), "gids.txt": gids})
    root = _root(tmp_path)
    assert (root["category"], root["interruption"], root["host"]) == ("network_fabric", "soft", "lm-b12")
