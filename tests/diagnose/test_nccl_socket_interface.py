"""NCCL's bootstrap finding no socket interface (``NET/Socket : no interface found``, ``no usable
interface``) is a network set-up fault (network_fabric / soft) on the host whose NCCL prefix printed
it; with the nodes' ``ip -br addr`` and the NCCL_SOCKET_IFNAME setting in the evidence, the node
lacking the named interface is named (rule bootstrap). Controls: a WARN about a missing NET plugin
in a run that goes on is no cause; interfaces every node has name no node."""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.parsers import ip_link
from tests.diagnose.files import answer, write_tree


def _diagnose(tmp_path, files: dict[str, str]) -> dict:
    return diagnose([write_tree(tmp_path, files)]).to_dict()


def _failed_init(host: str, pid: int) -> str:
    return (f"{host}:{pid}:{pid} [0] misc/socket.cc:484 NCCL WARN NET/Socket : no interface found\n"
            f"{host}:{pid}:{pid} [0] NCCL INFO bootstrap.cc:102 -> 3\n"
            f"{host}:{pid}:{pid} [0] NCCL INFO init.cc:1393 -> 3\n")


IP_TWO_HOSTS = ("[ops@rack4-n1 ~]$ ip -br addr\n"
                "lo               UNKNOWN        127.0.0.1/8 ::1/128\n"
                "ens1f0           UP             10.77.3.21/24\n"
                "[ops@rack4-n1 ~]$ ssh rack4-n2 ip -br addr\n"
                "lo               UNKNOWN        127.0.0.1/8 ::1/128\n"
                "eno2np1          UP             10.77.3.22/24\n")


def test_no_socket_interface_is_a_network_setup_fault_on_the_printing_host(tmp_path):
    log = ("[ops@rack4-n1 ~]$ mpirun -np 4 -H rack4-n1:2,rack4-n2:2 ./all_gather_perf -b 8 -e 128M\n"
           + _failed_init("rack4-n2", 61207)
           + "rack4-n2: Test NCCL failure common.cu:959 'internal error - please report this issue to the NCCL "
             "developers / '\n")
    assert answer(_diagnose(tmp_path, {"nccl-tests.txt": log})) == ("soft", "network_fabric", "rack4-n2")


def test_no_usable_interface_wording_reads_the_same(tmp_path):
    log = ("gpu-x3:4410:4410 [1] NCCL INFO NCCL version 2.19.3+cuda12.3\n"
           "gpu-x3:4410:4410 [1] NCCL WARN NET/Socket : No usable interface found\n"
           "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1691, internal error, NCCL version 2.19.3\n")
    assert answer(_diagnose(tmp_path, {"train.log": log})) == ("soft", "network_fabric", "gpu-x3")


def test_the_node_without_the_named_interface_is_named(tmp_path):
    launch = ("[ops@rack4-n1 ~]$ export NCCL_SOCKET_IFNAME=ens1f0\n"
              "[ops@rack4-n1 ~]$ srun -N2 --ntasks-per-node=2 python ddp.py\n"
              "NCCL WARN NET/Socket : no interface found\n"
              "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, internal error\n")
    got = _diagnose(tmp_path, {"launch.txt": launch, "ifaces.txt": IP_TWO_HOSTS})
    assert answer(got) == ("soft", "network_fabric", "rack4-n2")
    cause = next(f for f in got["findings"] if f["id"].startswith("sig-socket-config"))
    assert "ens1f0" in cause["title"] and "eno2np1" in cause["title"]


def test_control_interfaces_every_node_has_name_no_node(tmp_path):
    ips = IP_TWO_HOSTS.replace("eno2np1 ", "ens1f0  ")
    launch = "NCCL_SOCKET_IFNAME set by environment to ens1f0\n" + _failed_init("rack4-n1", 3321)
    got = _diagnose(tmp_path, {"launch.log": launch, "ifaces.txt": ips})
    assert answer(got) == ("soft", "network_fabric", "rack4-n1")
    assert not any("names no interface" in f["title"] for f in got["findings"])


def test_control_a_missing_net_plugin_warn_in_a_run_that_goes_on_is_no_cause(tmp_path):
    log = ("node-p1:9012:9012 [0] NCCL WARN NET/Plugin: No plugin found (libnccl-net.so), using internal "
           "implementation\n"
           "node-p1:9012:9012 [0] NCCL INFO NET/Socket : Using [0]ens5:10.9.0.4<0>\n"
           "node-p1:9012:9080 [0] NCCL INFO comm 0x5581 rank 0 nranks 2 cudaDev 0 busId 1e0 - Init COMPLETE\n"
           "step 100/100 loss 1.8821\n"
           "Training completed in 412.3 s\n")
    got = _diagnose(tmp_path, {"train.log": log})
    assert not any(f["category"] == "network_fabric" and f["role"] == "cause" for f in got["findings"])


def test_ip_brief_output_is_read_as_interfaces():
    text = ("lo               UNKNOWN        127.0.0.1/8\n"
            "ens1f0           UP             10.77.3.21/24 fe80::1/64\n"
            "ens1f1           DOWN           \n")
    assert ip_link.looks_like(text)
    got = {r.name: r.up for r in ip_link.parse(text, "ip.txt").records}
    assert got == {"lo": True, "ens1f0": True, "ens1f1": False}
