"""NCCL environment audit against node facts (recorded ibstat captures, ip link fixtures) and the
CUDA runtime/driver check."""

from __future__ import annotations

import pytest

from gpulib.parsers import infiniband, ip_link
from gpulib.preflight import cuda_compat, nccl_env
from gpulib.preflight.findings import exit_code

LINKS = {
    "node-a": "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 state UNKNOWN\\    link/loopback 00\n"
              "2: enp6s0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 state UP\\    link/ether 00\n"
              "3: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 state UP\\    link/infiniband 00\n"
              "4: docker0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 state DOWN\\    link/ether 00\n",
    "node-b": "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 state UNKNOWN\\    link/loopback 00\n"
              "2: enp7s0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 state UP\\    link/ether 00\n"
              "3: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 state UP\\    link/infiniband 00\n",
}


@pytest.fixture
def nodes(recorded):
    all_active = (recorded / "infiniband" / "ibstat.47.0.h100.all.active.1").read_text()
    some_down = (recorded / "infiniband" / "ibstat.47.0.h100.some.down.with.polling.1").read_text()
    return [nccl_env.NodeFacts(host, ip_link.parse(LINKS[host]).records, infiniband.parse(ib).records)
            for host, ib in (("node-a", all_active), ("node-b", some_down))]


def _by_check(findings):
    return {f.id: f for f in findings}


def test_a_wrong_socket_ifname_names_the_nodes_and_the_line(nodes):
    found = _by_check(nccl_env.audit({"NCCL_SOCKET_IFNAME": "enp6s0", "NCCL_DEBUG": "INFO"}, nodes))
    bad = found["nccl-socket-ifname-no-match"]
    assert bad.severity == "error" and bad.extra["hosts"] == ["node-b"] and "no such interface" in bad.title
    assert "up: enp7s0, ib0" in bad.title and bad.actions[0] == "export NCCL_SOCKET_IFNAME=ib0"
    assert exit_code(list(found.values())) == 3
    ok = _by_check(nccl_env.audit({"NCCL_SOCKET_IFNAME": "enp,ib", "NCCL_DEBUG": "INFO"}, nodes))
    assert "nccl-socket-ifname-no-match" not in ok, "prefix matching, as NCCL does"
    exact = _by_check(nccl_env.audit({"NCCL_SOCKET_IFNAME": "=enp", "NCCL_DEBUG": "INFO"}, nodes))
    assert exact["nccl-socket-ifname-no-match"].extra["hosts"] == ["node-a", "node-b"]
    excluded = _by_check(nccl_env.audit({"NCCL_SOCKET_IFNAME": "^docker,lo", "NCCL_DEBUG": "INFO"}, nodes))
    assert "nccl-socket-ifname-no-match" not in excluded


def test_loopback_on_a_multi_node_job(nodes):
    found = _by_check(nccl_env.audit({"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "INFO"}, nodes))
    assert found["nccl-socket-ifname-loopback"].severity == "error"


def test_ib_hca_naming_a_port_that_is_down(nodes):
    down = [p for p in nodes[1].ib_ports if not p.up]
    assert down, "the recorded capture has a port down"
    name = f"={down[0].ca}"
    found = _by_check(nccl_env.audit({"NCCL_IB_HCA": name, "NCCL_DEBUG": "INFO"}, nodes))
    bad = found["nccl-ib-hca-not-active"]
    assert bad.extra["hosts"] == ["node-b"] and down[0].ca in bad.title and bad.actions[0].startswith("export NCCL_IB_HCA==")
    up_on_both = {f"{p.ca}:{p.port}" for p in nodes[0].active_ib()} & {f"{p.ca}:{p.port}" for p in nodes[1].active_ib()}
    assert set(bad.actions[0].split("==")[1].split(",")) == up_on_both
    assert "nccl-ib-hca-not-active" not in _by_check(nccl_env.audit({"NCCL_IB_HCA": "mlx5", "NCCL_DEBUG": "INFO"}, nodes))


def test_ib_switched_off_or_not_used(nodes):
    found = _by_check(nccl_env.audit({"NCCL_IB_DISABLE": "1"}, nodes))
    assert found["nccl-ib-disabled"].actions[0] == "export NCCL_IB_DISABLE=0" and found["nccl-debug-off"].severity == "warning"
    assert _by_check(nccl_env.audit({"NCCL_NET": "Socket"}, nodes))["nccl-net-socket"].actions[0] == "unset NCCL_NET"
    log = ("node-a:81230:81230 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)\n"
           "node-a:81230:81230 [0] NCCL INFO NET/Socket : Using [0]enp6s0:10.8.0.11<0>\n"
           "node-a:81230:81230 [0] NCCL INFO Using network Socket\n")
    assert "nccl-fell-back-to-socket" in _by_check(nccl_env.audit({"NCCL_DEBUG": "INFO"}, nodes, log))
    ib_log = log.replace("Using network Socket", "Using network IB")
    assert "nccl-fell-back-to-socket" not in _by_check(nccl_env.audit({"NCCL_DEBUG": "INFO"}, nodes, ib_log))
    no_ib = [nccl_env.NodeFacts(n.host, n.interfaces, []) for n in nodes]
    assert "nccl-ib-disabled" not in _by_check(nccl_env.audit({"NCCL_IB_DISABLE": "1"}, no_ib))


def test_ib_timeout_and_torch_watchdog(nodes):
    found = _by_check(nccl_env.audit({"NCCL_IB_TIMEOUT": "14", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
                                      "TORCH_NCCL_ENABLE_MONITORING": "0"}, nodes))
    low = found["nccl-ib-timeout-low"]
    assert low.actions[0] == "export NCCL_IB_TIMEOUT=22" and "0.067 s" in low.title
    assert found["torch-nccl-async-error-handling-off"].severity == "warning"
    assert found["torch-nccl-monitoring-off"].actions[0] == "unset TORCH_NCCL_ENABLE_MONITORING"
    assert "nccl-ib-timeout-invalid" in _by_check(nccl_env.audit({"NCCL_IB_TIMEOUT": "22s"}, nodes))
    big = nodes * 8
    assert "nccl-ib-timeout-scale" in _by_check(nccl_env.audit({}, big))
    assert "nccl-ib-timeout-scale" not in _by_check(nccl_env.audit({}, nodes))
    clean = nccl_env.audit({"NCCL_DEBUG": "INFO", "NCCL_IB_TIMEOUT": "22", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"},
                           nodes)
    assert clean == [] and exit_code(clean) == 0


def test_node_facts_from_a_bundle_folder(tmp_path, recorded):
    root = tmp_path / "node-c"
    (root / "network").mkdir(parents=True)
    (root / "infiniband").mkdir()
    (root / "network" / "ip-link.txt").write_text(LINKS["node-b"])
    (root / "infiniband" / "ibstat.txt").write_bytes((recorded / "infiniband" / "ibstat.47.0.h100.all.active.1").read_bytes())
    facts = nccl_env.node_facts(root)
    assert facts.host == "node-c" and {i.name for i in facts.interfaces} == {"lo", "enp7s0", "ib0"} and facts.active_ib()
    assert nccl_env.node_facts(tmp_path / "missing").interfaces == []


def test_cuda_runtime_against_driver():
    too_new = cuda_compat.check("node-a", "12.4", "11.8", "520.61.05")
    assert too_new.severity == "error" and "insufficient" in too_new.title and ">= 550.54.14" in too_new.actions[0]
    minor = cuda_compat.check("node-a", "12.6", "12.2", "535.104.05")
    assert minor.severity == "warning" and "minor version compatibility" in minor.title
    assert cuda_compat.check("node-a", "12.1", "12.4") is None and cuda_compat.check(None, "n/a", "12.4") is None
    rows = [{"host": "node-a", "cuda_driver": "12.2", "driver": "535.104.05", "torch_cuda": "12.4", "nvcc": "12.1"},
            {"host": "node-b", "cuda_driver": "12.8", "driver": "570.86.15", "torch_cuda": "12.4", "nvcc": None}]
    assert [(f.extra["hosts"], f.id) for f in cuda_compat.findings(rows)] == [(["node-a"], "cuda-minor-version-compat")]


def test_job_env_file_and_bundle_nodes(tmp_path):
    env = nccl_env.read_env("# job.env\nexport NCCL_SOCKET_IFNAME='ib'\nNCCL_DEBUG=INFO\nsrun python train.py\n")
    assert env == {"NCCL_SOCKET_IFNAME": "ib", "NCCL_DEBUG": "INFO"}
    for host in ("node-a", "node-b"):
        (tmp_path / host / "network").mkdir(parents=True)
        (tmp_path / host / "manifest.json").write_text("{}")
        (tmp_path / host / "network" / "ip-link.txt").write_text(LINKS[host])
    (tmp_path / "notes").mkdir()
    assert [n.host for n in nccl_env.bundle_nodes(tmp_path)] == ["node-a", "node-b"]
    found = nccl_env.audit({"NCCL_SOCKET_IFNAME": "enp6", "NCCL_DEBUG": "INFO"}, nccl_env.bundle_nodes(tmp_path))
    assert [f.extra["hosts"] for f in found if f.id == "nccl-socket-ifname-no-match"] == [["node-b"]]
