"""The health report's fleet view (09): GPU x node heat maps, the config-diff table, the GPU ledger.

Run headless on a SYNTHETIC multi-node incident (gpulib.fleet.simulate) where one node runs hot
and another drifted in driver/NCCL/kernel/persistence mode, so the assertions can name both.
"""

from __future__ import annotations

import base64
import json
from collections import Counter

import numpy as np
import plotly.io as pio
import pytest

from gpulib.fleet.simulate import simulate_incident
from tests.notebooks.runner import WarmKernel, outputs_text

pytestmark = [pytest.mark.notebook, pytest.mark.timeout(300)]

NAME = "09_health_report.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    warm = WarmKernel(tmp_path_factory.mktemp("kernel-cwd"))
    yield warm
    warm.shutdown()


def values(z) -> np.ndarray:
    """A heat map's z as plotly JSON carries it: a list of rows or a base64 typed array."""
    if isinstance(z, dict) and "bdata" in z:
        shape = tuple(int(n) for n in str(z["shape"]).split(","))
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return np.asarray(z, dtype=float)


def heatmaps(nb) -> dict:
    """Title -> the heat-map trace (None when empty: shown as one line) of each GPU x node figure in
    the executed notebook (decoded by plotly: z travels as a base64 typed array)."""
    found = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            line = output.get("data", {}).get("text/markdown", "")
            if line.startswith("*GPU x node"):  # an empty figure is shown as its one line
                found[line.strip("*").split(":")[0]] = None
                continue
            if PLOTLY not in output.get("data", {}):
                continue
            fig = pio.from_json(json.dumps(output["data"][PLOTLY]))
            if str(fig.layout.title.text).startswith("GPU x node"):
                [trace] = [t for t in fig.data if t.type == "heatmap"] or [None]
                found[fig.layout.title.text.split("<br>")[0]] = trace
    return found


def test_fleet_view_names_the_hot_node_and_the_drifted_node(kernel, tmp_path):
    incident = simulate_incident(tmp_path / "synthetic", 8, "thermal", seed=5, drift_nodes=1,
                                 drift_fields=("driver", "nccl", "kernel", "persistence_mode"))
    [odd] = incident.drift
    assert odd != incident.host
    nb, findings = kernel.run(NAME, tmp_path / "run", evidence=str(incident.root),
                              archive=str(tmp_path / "no-such-archive"))

    maps = heatmaps(nb)
    assert set(maps) == {"GPU x node: max temperature (C)", "GPU x node: uncorrectable ECC + remapped rows",
                         "GPU x node: thermal/power slowdown (s)"}, list(maps)
    temp = maps["GPU x node: max temperature (C)"]
    hosts = [f"synth-gpu-{n:04d}" for n in range(8)]
    assert sorted(temp.y) == hosts and len(temp.x) == 8
    assert temp.y[0] == incident.host  # worst first: the throttling GPU's node is the top row
    z = values(temp.z)
    assert z.shape == (8, 8) and np.nanmax(z) == z[0, incident.gpu_index] > np.nanmax(z[1:])

    text = outputs_text(nb)
    assert odd in text and "2.18.3 (majority 2.21.5)" in text  # the config-diff table's odd row
    assert "ledger: " in text and "no-such-archive: no such file or folder" in text

    # every drifting field is recorded once, naming the odd node (from the diagnosis, not twice)
    drift = [f for f in findings if f["category"] == "driver_mismatch"]
    assert [i for i, n in Counter(f["id"] for f in drift).items() if n > 1] == []
    for prefix in ("version-skew-driver", "version-skew-nccl", "config-drift-kernel", "config-drift-persistence_mode"):
        [hit] = [f for f in drift if f["id"].startswith(prefix)] or [None]
        assert hit and hit["host"] == odd, (prefix, [(f["id"], f.get("host")) for f in drift])
    assert [f for f in findings if f["category"] == "thermal_throttling" and f["host"] == incident.host
            and f["gpu_index"] == incident.gpu_index]


def test_fleet_view_on_the_bundled_example_says_one_configuration(kernel, tmp_path):
    nb, findings = kernel.run(NAME, tmp_path)  # default evidence: the bundled example (two nodes)
    assert findings is not None
    maps = heatmaps(nb)
    assert len(maps) == 3
    text = outputs_text(nb)
    assert "gx-a800-102" in " ".join(str(t.y) for t in maps.values() if t)
    assert "every node runs the same configuration" in text or "majority" in text
    assert "ledger: " not in text  # no archive given, nothing to complain about
