"""Config drift as diagnosis findings (does it explain the failure?) and the per-node summary."""

from __future__ import annotations

from gpulib.diagnose.drift import config_drift
from gpulib.diagnose.node_facts import NodeConfig
from gpulib.diagnose.nodes import drift_findings, nodes_text
from gpulib.findings import Finding


def _configs(**odd) -> dict[str, NodeConfig]:
    configs = {f"n{i}": NodeConfig(f"n{i}", driver="550.90.07", nccl="2.21.5", gpu_count=8) for i in range(5)}
    for field, (host, value) in odd.items():
        setattr(configs[host], field, value)
        configs[host].sources[field] = f"{host}/versions/file"
    return configs


def _root(host: str | None) -> Finding:
    return Finding("xid79-1", "critical", "gpu_fell_off_bus", "Xid 79", host=host)


def test_software_drift_on_the_culprit_is_an_error():
    configs = _configs(nccl=("n3", "2.18.3"))
    (f,) = drift_findings(config_drift(configs), configs, _root("n3"))
    assert (f.id, f.severity, f.category, f.host) == ("config-drift-nccl", "error", "driver_mismatch", "n3")
    assert f.title.endswith("the culprit node is the odd one")
    assert f.quotes[0].file == "n3/versions/file" and f.quotes[0].text == "n3: NCCL 2.18.3"
    assert f.actions[0].startswith("Bring n3 to 2.21.5 before the relaunch, or exclude it")


def test_drift_elsewhere_is_a_warning_and_unknown_cause_makes_it_an_error():
    configs = _configs(driver=("n1", "535.183.01"))
    drifts = config_drift(configs)
    assert drift_findings(drifts, configs, _root("n4"))[0].severity == "warning"
    assert drift_findings(drifts, configs, None)[0].severity == "error"
    assert drift_findings(drifts, configs, None, failed=False)[0].severity == "warning"  # a health report


def test_a_lost_gpu_in_the_inventory_is_chained_to_the_root_cause():
    configs = _configs(gpu_count=("n2", 7))
    (f,) = drift_findings(config_drift(configs), configs, _root("n2"))
    assert (f.severity, f.caused_by) == ("info", "xid79-1")
    assert f.actions[0].startswith("Exclude n2 (srun --exclude) until its GPU count is back to 8")


def test_nodes_text_lists_the_nodes_that_matter():
    nodes = [{"host": "n2", "role": "culprit", "files": 8, "gpus": 7, "findings": {"critical": 1},
              "odd_config": {"gpu_count": 7}}] + [
        {"host": f"n{i}", "role": "ok", "files": 8, "gpus": 8, "findings": {}, "odd_config": {}} for i in (0, 1)]
    text = "\n".join(nodes_text(nodes))
    assert "NODES: 3 (1 culprit, 0 odd config, 0 with errors, 2 clean)" in text
    assert "culprit  n2" in text and "odd: gpu_count=7" in text and "n0" not in text
    assert nodes_text([]) == []
    configs = _configs(nccl=("n1", "2.18.3"))
    drift = drift_findings(config_drift(configs), configs, _root("n2"))
    text = "\n".join(nodes_text(nodes, drift))
    assert "CONFIG DIFF (odd nodes)\n  [warning] NCCL: 1 of 5 node(s) differ from 2.21.5 (4 nodes): n1 2.18.3" in text


def test_attach_leaves_version_skew_to_the_diagnosis_rule_and_adds_the_other_fields(tmp_path):
    """diagnose() judges driver/CUDA/NCCL/torch skew itself (``version-skew-*``); attach() adds
    config-drift findings only for the fields it did not judge (here: the kernel)."""
    from gpulib.diagnose import diagnose
    from gpulib.diagnose.nodes import attach
    from gpulib.evidence.bundle import BundleWriter
    from gpulib.evidence.gather import gather

    for host, torch_v, kernel in (("kx-1", "2.4.0", "6.8.0-45"), ("kx-2", "2.4.0", "6.8.0-45"),
                                  ("kx-3", "2.5.1", "6.8.0-31")):
        with BundleWriter(tmp_path / host, host=host) as bundle:
            bundle.write_json("versions/python-stack.json", {"torch": torch_v})
            bundle.write_text("versions/uname.txt", f"Linux {host} {kernel}-generic #1 SMP x86_64 GNU/Linux\n")
    d = diagnose([tmp_path])
    attach(d, gather([tmp_path]))
    ids = sorted(f.id for f in d.findings if f.category == "driver_mismatch")
    assert ids == ["config-drift-kernel", "version-skew-torch-kx_3"]  # the odd node names the event


def _pair(**values) -> dict[str, NodeConfig]:
    """Two nodes that differ on one field: no value has a majority."""
    configs = {h: NodeConfig(h, driver="550.90.07", nccl="2.21.5", gpu_count=8) for h in ("pa", "pb")}
    for field, (a, b) in values.items():
        setattr(configs["pa"], field, a)
        setattr(configs["pb"], field, b)
    return configs


def test_a_two_node_split_never_advises_excluding_both_nodes():
    configs = _pair(gpu_count=(8, 7))
    (f,) = drift_findings(config_drift(configs), configs, None)
    assert "exclude it" in f.actions[0] and "pb has the lower" in f.actions[0] and "pa," not in f.actions[0]
    configs = _pair(nccl=("2.21.5", "2.18.3"))
    (f,) = drift_findings(config_drift(configs), configs, _root("pb"))
    assert f.actions[0].startswith("No majority among 2 nodes; the root cause is on pb") and "2.21.5" in f.actions[0]
    (f,) = drift_findings(config_drift(configs), configs, None)
    assert "cannot tell which one is off" in f.actions[0] and "exclude" not in f.actions[0].split(":")[0].lower()
