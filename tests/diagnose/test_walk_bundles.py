"""The walk hands each bundle's facts down to every folder below it, and to none beside it.

:func:`gpulib.evidence.gather._walk` passes a bundle's facts (host, zone, collectors) from a folder
to its subfolders as it walks down, instead of looking for a bundle among each folder's parents.
"""

from __future__ import annotations

from gpulib.evidence.gather import gather
from gpulib.fleet.simulate import simulate_incident


def test_bundle_facts_reach_deep_folders_and_stop_at_its_border(tmp_path):
    incident = simulate_incident(tmp_path / "inc", 2, "xid79", seed=3)
    deep = incident.root / "synth-gpu-0001" / "logs" / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "train.log").write_text("[rank3]: RuntimeError: CUDA error: an illegal memory access\n")
    beside = incident.root / "notes-node"
    beside.mkdir()
    (beside / "train.log").write_text("[rank5]: RuntimeError: CUDA error: an illegal memory access\n")
    files = {f.display: f for f in gather([incident.root]).files}
    copied = files["synth-gpu-0001/logs/a/b/train.log"]
    assert (copied.bundle_path, copied.fallback_host) == ("logs/a/b/train.log", "synth-gpu-0001")
    alone = files["notes-node/train.log"]
    assert (alone.bundle_path, alone.fallback_host) == (None, None)
    assert "synth-gpu-0000/manifest.json" not in files  # a bundle's manifest is its bookkeeping
    assert files["synth-gpu-0000/nvidia-smi/q.txt"].host == "synth-gpu-0000"
