"""Network failures judged in context (gpulib.diagnose.rules.fabric): init-time connect failures and system errors,
IB asked for but sockets used, IB completion / remote errors hard or soft, peers named from the
evidence. Each mechanism has a negative control. Own hosts, pids and loopback addresses only."""

from __future__ import annotations

from pathlib import Path

from gpulib.diagnose import diagnose
from tests.diagnose.files import write_tree


def _root(folder: Path) -> tuple[str, str, dict]:
    result = diagnose([folder]).to_dict()
    return result["verdict"]["interruption"], result["verdict"]["category"], result["root_cause"] or {}


REFUSED = "cn-a3:51234:51301 [2] include/socket.h:403 NCCL WARN Connect to 127.0.0.9<43117> failed : Connection refused\n"
INIT_ERROR = ("Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n"
              "    dist.barrier()\n"
              "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.18.1\n"
              "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n")


def test_refused_peer_named_by_a_reverse_lookup_is_hard_on_that_node(tmp_path):
    write_tree(tmp_path, {"run.err": INIT_ERROR + REFUSED,
                      "lookup.txt": "$ nslookup 127.0.0.9\n9.0.0.127.in-addr.arpa\tname = cn-b7.ib0.cluster.example.\n"})
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat, rc["host"]) == ("hard", "network_fabric", "cn-b7")
    assert "lookup.txt:2" in rc["identified_by"]["host"]


def test_refused_peer_nobody_names_is_the_set_up_soft(tmp_path):
    write_tree(tmp_path, {"run.err": INIT_ERROR + REFUSED})
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat) == ("soft", "network_fabric")  # not "application_error: fix the code"


def test_system_error_at_init_is_the_network_not_the_code(tmp_path):
    write_tree(tmp_path, {"run.err": INIT_ERROR})
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat) == ("soft", "network_fabric")
    result = diagnose([tmp_path]).to_dict()
    root = next(f for f in result["findings"] if f["id"] == result["root_cause"]["finding"])
    assert any("NCCL_SOCKET_IFNAME" in a for a in root["actions"])  # the NCCL environment audit's questions


def test_refused_connection_mid_run_is_not_an_init_failure(tmp_path):
    steps = "".join(f"[2026-03-04 10:{m:02d}:00] step {m} loss 2.0 | 1.1 s/it\n" for m in range(10, 20))
    write_tree(tmp_path, {"run.err": steps + REFUSED,
                      "lookup.txt": "$ host 127.0.0.9\n9.0.0.127.in-addr.arpa domain name pointer cn-b7.example.\n"})
    _inter, _cat, rc = _root(tmp_path)
    assert rc.get("host") != "cn-b7" or rc.get("category") != "network_fabric" or rc.get("interruption") != "hard"


COMPLETION = ("gx-a1:7001:7090 [3] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
              "127.0.4.2<51002> with error 12, opcode 0, len 0, vendor err 129 (Recv)\n"
              "gx-a1:7001:7090 [3] NCCL INFO transport/net.cc:1134 -> 6\n")


def test_ib_retry_exceeded_is_hard_on_the_peer_a_host_table_names(tmp_path):
    write_tree(tmp_path, {"gx-a1.log": COMPLETION,
                      "hosts.txt": "127.0.4.1   gx-a1\n127.0.4.2   gx-a2 gx-a2.fabric\n127.0.4.3   gx-a3\n"})
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat, rc["host"]) == ("hard", "network_fabric", "gx-a2")
    assert "retry counter exceeded" in diagnose([tmp_path]).to_dict()["verdict"]["summary"]


def test_ib_retry_exceeded_with_no_name_for_the_peer_names_the_reporting_end(tmp_path):
    write_tree(tmp_path, {"gx-a1.log": COMPLETION})
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat, rc["host"], rc["gpu_index"]) == ("hard", "network_fabric", "gx-a1", 3)


def test_ib_completion_error_with_a_queue_pair_set_up_error_is_configuration(tmp_path):
    qp = "gx-a1:7001:7090 [3] NCCL WARN NET/IB : ibv_modify_qp failed with 22 Invalid argument, GID index 3\n"
    write_tree(tmp_path, {"gx-a1.log": qp + COMPLETION})
    inter, cat, _rc = _root(tmp_path)
    assert (inter, cat) == ("soft", "network_fabric")
    assert "configuration" in diagnose([tmp_path]).to_dict()["verdict"]["summary"]


def test_ib_completion_errors_after_a_peer_crashed_are_its_cascade(tmp_path):
    oom = ("[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total "
           "capacity of 79.11 GiB of which 1.06 GiB is free.\n")
    write_tree(tmp_path, {"gx-a1.log": oom + COMPLETION})
    _inter, cat, _rc = _root(tmp_path)
    assert cat == "cuda_oom"


def test_port_error_takes_the_host_the_completion_errors_name(tmp_path):
    port = "".join(f"...-8:{900 + k}:{950 + k} [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : "
                   "port error\n" for k in range(3))
    peer = "".join(f"{host}:4400:4411 [4] transport/net_ib.cc:1238 NCCL WARN NET/IB : Got completion from peer "
                   "gx-b8<37001> with error 12, opcode 2, len 1, vendor err 129\n" for host in ("gx-b9", "gx-b7"))
    write_tree(tmp_path, {"train.out": port + peer})  # the port errors' own host is masked ("...-8")
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat, rc["host"]) == ("hard", "network_fabric", "gx-b8")


FALLBACK = ("NCCL INFO NET/IB : No device found.\nNCCL INFO NET/Socket : Using [0]eth0:127.0.0.3<0>\n"
            "NCCL INFO Using network Socket\n")


def test_ib_asked_for_and_sockets_used_is_a_soft_fabric_cause(tmp_path):
    write_tree(tmp_path, {"nccl.log": "NCCL INFO NCCL_IB_DISABLE set by environment to 0.\n"
                                  "misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed\n" + FALLBACK})
    inter, cat, _rc = _root(tmp_path)
    assert (inter, cat) == ("soft", "network_fabric")


def test_sockets_on_a_job_that_never_asked_for_ib_is_no_failure(tmp_path):
    write_tree(tmp_path, {"nccl.log": FALLBACK + "Training completed.\n"})
    result = diagnose([tmp_path]).to_dict()
    assert result["verdict"]["interruption"] == "none"


STORE = ("[W socket.cpp:663] [c10d] The client socket has failed to connect to [::ffff:127.0.6.1]:29500 "
         "(errno: 110 - Connection timed out).\n")


def test_store_out_of_reach_at_start_names_the_node_that_holds_it(tmp_path):
    write_tree(tmp_path, {"train.log": STORE, "hosts": "127.0.6.1 trn-head\n127.0.6.2 trn-w1\n"})
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat, rc["host"]) == ("soft", "application_error", "trn-head")
    assert "MASTER_ADDR" in diagnose([tmp_path]).to_dict()["verdict"]["summary"]


def test_store_out_of_reach_with_an_address_no_node_has_is_the_launch_setting(tmp_path):
    write_tree(tmp_path, {"train.log": STORE})
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat, rc["host"]) == ("soft", "application_error", None)


def test_store_lost_mid_run_is_not_a_start_up_failure(tmp_path):
    steps = "".join(f"[2026-03-04 10:{m:02d}:00] step {m} loss 2.0 | 1.1 s/it\n" for m in range(10, 20))
    write_tree(tmp_path, {"train.log": steps + STORE})
    result = diagnose([tmp_path]).to_dict()
    assert (result["root_cause"] or {}).get("finding", "").startswith("store-unreachable") is False


def test_ib_retry_exceeded_peer_named_by_nccl_bootstrap_lines(tmp_path):
    boot = "".join(f"{host}:7001:7001 [0] NCCL INFO Bootstrap : Using eth0:{addr}<0>\n"
                   for host, addr in (("gx-a1", "127.0.4.1"), ("gx-a2", "127.0.4.2")))
    write_tree(tmp_path, {"job.log": boot + COMPLETION})
    inter, cat, rc = _root(tmp_path)
    assert (inter, cat, rc["host"]) == ("hard", "network_fabric", "gx-a2")
    assert "bootstrap" in rc["identified_by"]["host"]
