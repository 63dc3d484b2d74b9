"""Per-node configuration facts and the job-scoped diff that names the odd nodes."""

from __future__ import annotations

import pytest

from gpulib.diagnose.drift import config_drift, diff_table, odd_nodes, text_report
from gpulib.diagnose.node_facts import NodeConfig, configs_from_paths
from gpulib.evidence.record_summary import summarize_values
from gpulib.fleet.simulate import BASELINE, simulate_incident


@pytest.fixture(scope="module")
def drifted(tmp_path_factory):
    root = tmp_path_factory.mktemp("drift")
    incident = simulate_incident(root, 10, "xid79", seed=4, drift_nodes=2,
                                 drift_fields=("driver", "nccl", "kernel", "persistence_mode", "ib_rate_gbps"))
    return incident, configs_from_paths([root])


def test_facts_of_a_bundle_name_their_source(drifted):
    incident, configs = drifted
    healthy = next(c for h, c in configs.items() if h not in incident.drift and h != incident.host)
    assert (healthy.driver, healthy.cuda, healthy.nccl, healthy.torch) == ("550.90.07", "12.4", "2.21.5",
                                                                            "2.4.1+cu124")
    assert (healthy.kernel, healthy.os, healthy.vbios) == ("5.15.0-126-generic", "Ubuntu 22.04.4 LTS",
                                                           "96.00.89.00.01")
    assert (healthy.gpu_model, healthy.gpu_count, healthy.ecc_mode, healthy.mig_mode, healthy.persistence_mode) == (
        "NVIDIA H100 80GB HBM3", 8, "Enabled", "Disabled", "Enabled")
    assert (healthy.ib_ports_active, healthy.ib_rate_gbps) == ("8/8", "400")
    assert healthy.sources["kernel"].endswith("versions/uname.txt")
    assert healthy.sources["nccl"].endswith("versions/python-stack.json")
    assert configs[incident.host].gpu_count == 7  # its lost GPU is not counted


def test_drift_names_exactly_the_odd_nodes_with_their_values(drifted):
    incident, configs = drifted
    drifts = config_drift(configs)
    by_field = {d.field: d for d in drifts}
    for name in ("driver", "nccl", "kernel", "persistence_mode"):
        assert by_field[name].majority == BASELINE[name]
        assert by_field[name].odd == {h: v[name] for h, v in incident.drift.items()}
    assert by_field["ib_rate_gbps"].odd == {h: "200" for h in incident.drift}
    assert by_field["cuda"].odd == {h: "12.2" for h in incident.drift}  # the 535 driver ships CUDA 12.2
    assert by_field["gpu_count"].odd == {incident.host: 7}
    assert "torch" not in by_field and "vbios" not in by_field
    assert set(odd_nodes(drifts)) == {*incident.drift, incident.host}
    report = text_report(configs, drifts)
    for host in incident.drift:
        assert f"{host} 535.183.01" in report
    rows = {r["host"]: r for r in diff_table(configs, drifts)}
    assert rows[sorted(incident.drift)[0]]["NCCL"] == "2.18.3 (majority 2.21.5)"


def test_no_majority_and_missing_facts():
    configs = {h: NodeConfig(h, driver=v) for h, v in (("a", "550"), ("b", "535"), ("c", None))}
    (drift,) = config_drift(configs)
    assert drift.split and drift.majority is None
    assert drift.odd == {"a": "550", "b": "535"} and drift.unknown == ["c"]  # unknown is never odd
    assert "no majority among 2 nodes" in drift.describe()
    assert config_drift({"a": NodeConfig("a", driver="550"), "b": NodeConfig("b")}) == []


def test_summarize_mixed_values():
    assert summarize_values(["96.00.89", "96.00.89"]) == "96.00.89"
    assert summarize_values(["x", "x", "y"]) == "mixed: x x2, y x1"
    assert summarize_values([None, ""]) is None


def test_raw_folders_from_the_corpus(incidents):
    configs = configs_from_paths([incidents / "case-05-ib-down-socket-fallback" / "input"])
    assert configs["v100-node-08"].driver == "470.182.03"
    assert configs["v100-node-08"].ib_ports_active == "0/1"  # mlx5_0 Down; the Ethernet port is not IB
    assert configs["v100-node-07"].ib_ports_active == "1/1"
    assert configs["v100-node-07"].nccl == "2.19.3"  # from the job log's NCCL version line of that host
    drift = {d.field: d for d in config_drift(configs)}
    assert drift["ib_ports_active"].odd == {"v100-node-07": "1/1", "v100-node-08": "0/1"}


def test_unreadable_and_foreign_files_give_no_facts(tmp_path):
    node = tmp_path / "node-x"
    node.mkdir()
    (node / "uname.txt").write_bytes(b"\x00\x01\x02binary junk")
    (node / "python-stack.json").write_text("{not json")
    (node / "notes.txt").write_text("Linux is great\n")
    assert configs_from_paths([tmp_path]) == {}


def test_bare_nccl_version_line_belongs_to_the_one_host_its_file_names(tmp_path):
    """NCCL_DEBUG=VERSION prints ``NCCL version X+cudaY`` with no host prefix: the file's other
    lines name one host, so the version is that host's (and a skew with another node shows)."""
    (tmp_path / "train.log").write_text(
        "NCCL version 2.19.3+cuda12.3\n"
        "kelp-04:7710:7710 [0] NCCL INFO Bootstrap : Using ens5:10.20.1.4<0>\n"
        "kelp-04:7710:7788 [0] NCCL INFO ncclCommInitRank comm 0x7f10 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE\n")
    (tmp_path / "peer.log").write_text(
        "kelp-05:8120:8120 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    configs = configs_from_paths([tmp_path])
    assert configs["kelp-04"].facts()["nccl"] == "2.19.3"
    assert configs["kelp-05"].facts()["nccl"] == "2.21.5"


def test_control_bare_nccl_version_in_a_file_naming_two_hosts_is_nobodys(tmp_path):
    """Two hosts in one file (a merged job log): a bare version line cannot be placed."""
    (tmp_path / "merged.log").write_text(
        "NCCL version 2.19.3+cuda12.3\n"
        "kelp-04:7710:7710 [0] NCCL INFO Bootstrap : Using ens5:10.20.1.4<0>\n"
        "kelp-05:8120:8120 [0] NCCL INFO Bootstrap : Using ens5:10.20.1.5<0>\n")
    configs = configs_from_paths([tmp_path])
    assert all(c.facts()["nccl"] is None for c in configs.values())
