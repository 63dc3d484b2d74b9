"""Config facts from the NVML snapshot a real `gpulib collect` writes (GPU faked by replaying
recorded nvidia-smi XML, the only thing gpulib may fake)."""

from __future__ import annotations

from gpulib.collect.capture import collect
from gpulib.diagnose.drift import config_drift
from gpulib.diagnose.node_facts import configs_from_paths
from tests.fakes.fake_pynvml import FakeNvml


def test_nvml_snapshot_facts_and_drift(recorded, monkeypatch, tmp_path):
    xml = recorded / "nvidia-smi" / "xml"
    for host, capture in (("node-a", "datakit/gtx-8card.xml"), ("node-b", "telegraf/a100-sxm4-v12.xml"),
                          ("node-c", "datakit/gtx-8card.xml")):
        FakeNvml(xml / capture).install(monkeypatch)
        collect(tmp_path / "%h", host=host, only=["nvml"], command_line=["test"])
    configs = configs_from_paths([tmp_path])
    a, b = configs["node-a"], configs["node-b"]
    assert a.sources["driver"] == "node-a/nvml/snapshot.json"
    assert (a.gpu_count, b.gpu_count) == (8, 1)
    assert b.gpu_model == "NVIDIA A100-SXM4-80GB" and b.mig_mode == "Enabled"
    assert b.persistence_mode == "Disabled" and b.vbios == "92.00.36.00.02"
    drift = {d.field: d for d in config_drift(configs)}
    assert drift["gpu_model"].odd == {"node-b": "NVIDIA A100-SXM4-80GB"}
    assert a.mig_mode is None and "mig_mode" not in drift  # V100S: no MIG at all is unknown, not odd
