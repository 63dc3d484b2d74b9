"""The SYNTHETIC incident generator: real formats, and `diagnose` finds the injected root cause."""

from __future__ import annotations

import json

import pytest

from gpulib.diagnose import diagnose
from gpulib.evidence.bundle import verify
from gpulib.fleet.simulate import KINDS, host_name, simulate_incident


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_injected_root_cause_is_found_among_eight_nodes(tmp_path, kind):
    incident = simulate_incident(tmp_path / kind, 8, kind, seed=11, drift_nodes=2)
    result = diagnose([incident.root]).to_dict()
    rc = result["root_cause"]
    assert rc is not None, result["verdict"]
    assert (rc["category"], rc["host"]) == (incident.category, incident.host)
    if incident.gpu_pci:
        assert rc["gpu_pci"] == incident.gpu_pci
    assert result["verdict"]["interruption"] == ("hard" if kind in ("xid79", "ecc_dbe") else "soft")


def test_bundles_are_real_and_say_synthetic(tmp_path):
    incident = simulate_incident(tmp_path, 3, "xid79", seed=2)
    bundles = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert [b.name for b in bundles] == [host_name(n) for n in range(3)]
    for bundle in bundles:
        assert verify(bundle).ok
        manifest = json.loads((bundle / "manifest.json").read_text())
        assert "SYNTHETIC" in manifest["command_line"]
    culprit = tmp_path / incident.host
    assert "GPU is lost" in (culprit / "nvidia-smi" / "q.txt").read_text()
    assert "79, pid='<unknown>'" in (culprit / "kernel" / "dmesg.txt").read_text()
    log = (tmp_path / "slurm-771234.out").read_text()
    assert log.count("Watchdog caught collective operation timeout") == 3 * 8 - 1  # every rank but the culprit
    assert f"rank {incident.rank} nranks 24 " in log


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown synthetic incident kind"):
        simulate_incident(tmp_path, 4, "cosmic_ray")
    with pytest.raises(ValueError, match="unknown drift field"):
        simulate_incident(tmp_path, 4, "xid79", drift_nodes=1, drift_fields=("bios_colour",))
    with pytest.raises(ValueError, match="nodes must be"):
        simulate_incident(tmp_path, 1, "xid79")


def test_diagnosis_of_many_nodes_names_culprit_and_odd_nodes(tmp_path):
    incident = simulate_incident(tmp_path, 12, "ecc_dbe", seed=21, drift_nodes=2, drift_fields=("kernel", "nccl"))
    result = diagnose([incident.root])
    nodes = result.to_dict()["nodes"]
    assert len(nodes) == 12 and nodes[0]["host"] == incident.host and nodes[0]["role"] == "culprit"
    odd = {n["host"]: n["odd_config"] for n in nodes if n["role"] == "odd"}
    assert odd == {h: {"kernel": "5.15.0-119-generic", "nccl": "2.18.3"} for h in incident.drift}
    drift = {"-".join(f.id.split("-")[:3]) if f.id.startswith("version-skew") else f.id: f for f in result.findings
             if f.category == "driver_mismatch"}
    assert drift["config-drift-kernel"].severity == "warning"  # not the culprit's: fix before relaunch
    assert "version-skew-nccl" in drift and "config-drift-nccl" not in drift  # judged once, by the rules
    text = result.to_text()
    assert "NODES: 12 (1 culprit, 2 odd config" in text
    for host in incident.drift:
        assert f"{host} 5.15.0-119-generic" in text
