"""The SYNTHETIC incident generator: real formats, and `diagnose` finds the injected root cause."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

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


def _answer(incident) -> tuple:
    result = diagnose([incident.root]).to_dict()
    rc = result["root_cause"] or {}
    return result["verdict"]["interruption"], rc.get("category"), rc.get("host"), rc.get("gpu_pci"), rc.get("rank")


@pytest.mark.parametrize(("nodes", "digits"), [(8, 9), (8, 6), (768, 9), (1024, 6), (1024, 9), (4096, 6)])
def test_the_answer_does_not_depend_on_the_node_count(tmp_path, nodes, digits):
    """Raw ``dmesg -T`` per node, one Xid 79, and a bare console whose first dated line comes after
    one NCCL init line per rank (~1.4 MB in at 1,024 nodes): the watchdog lines' year-less glog
    stamps must still be read, not replaced by the last progress line's time (minutes before the
    Xid, which would then come "after" the time-outs). The console's file is dated years later than
    its lines, so only the log's own dates can give the glog stamps their year."""
    incident = simulate_incident(tmp_path, nodes, "xid79", seed=5, layout="raw", glog_digits=digits,
                                 noise_lines=2, progress_every_s=300.0)
    console = tmp_path / "slurm-771234.out"
    head = console.read_bytes()[:1 << 20]
    assert (b"2026-" in head) == (nodes < 768)  # the first date is past the first MB from 768 nodes on
    later = datetime(2031, 6, 1, tzinfo=timezone.utc).timestamp()
    os.utime(console, (later, later))
    assert _answer(incident) == ("hard", "gpu_fell_off_bus", incident.host, incident.gpu_pci, incident.rank)


def test_first_year_finds_a_date_past_the_first_block_and_none_in_a_dateless_file(tmp_path):
    from gpulib.parsers.logtime import first_year
    log = tmp_path / "console.out"
    log.write_bytes(b"x" * (8 * 1024 * 1024 - 10) + b"[2027-01-02 03:04:05] step 1\n")  # cut by the 8 MiB block edge
    assert first_year(log) == 2027
    log.write_bytes(b"[E0102 03:04:05.123456 ProcessGroupNCCL.cpp:616] no year here\n")
    assert first_year(log) is None
