"""`gpulib fleet diff|ledger` exit codes and messages; the notebook fleet-view tables."""

from __future__ import annotations

import json

import pytest

from gpulib.cli import main
from gpulib.evidence.gather import gather
from gpulib.fleet.ledger import build_ledger
from gpulib.fleet.simulate import simulate_incident
from gpulib.notebook import figures_fleet as views


@pytest.fixture(scope="module")
def thermal(tmp_path_factory):
    root = tmp_path_factory.mktemp("thermal")
    return simulate_incident(root, 6, "thermal", seed=3, drift_nodes=1, drift_fields=("vbios",))


def test_fleet_diff_cli(thermal, capsys):
    assert main(["fleet", "diff", str(thermal.root), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    (odd,) = thermal.drift
    assert doc["odd_nodes"] == {odd: {"vbios": "96.00.74.00.1C"}}
    assert doc["drift"][0]["majority"] == "96.00.89.00.01" and doc["nodes"] == 6
    assert main(["fleet", "diff", str(thermal.root / "synth-gpu-0000")]) == 0
    assert "every node agrees" in capsys.readouterr().out


def test_fleet_cli_bad_input(tmp_path, capsys):
    (tmp_path / "junk.bin").write_bytes(b"\x00" * 64)
    assert main(["fleet", "diff", str(tmp_path)]) == 2
    assert f"no node configuration found in {tmp_path}" in capsys.readouterr().err
    assert main(["fleet", "ledger", str(tmp_path / "nope")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_fleet_ledger_cli_exit_code(thermal, tmp_path, capsys):
    assert main(["fleet", "ledger", str(thermal.root)]) == 0  # a thermal capture: nothing to replace
    out = capsys.readouterr().out
    assert out.startswith("GPU LEDGER: 48 GPU(s) from 1 source(s): 0 replace")


def test_heatmap_shows_the_hot_gpu_first(thermal):
    from gpulib.notebook.tables import open_evidence

    ev = open_evidence(thermal.root)
    temp = views.gpu_heatmap(ev.gpu_states(), ev.gpu_samples(), "temp_c")
    assert temp.shape == (6, 8) and temp.index[0] == thermal.host
    assert temp.loc[thermal.host, f"GPU {thermal.gpu_index}"] == 92
    slowed = views.gpu_heatmap(ev.gpu_states(), ev.gpu_samples(), "throttled_pct")
    assert slowed.loc[thermal.host, f"GPU {thermal.gpu_index}"] == pytest.approx(45.0)  # 9 of 20 samples
    seconds = views.gpu_heatmap(ev.gpu_states(), None, "throttle_s")
    assert seconds.loc[thermal.host, f"GPU {thermal.gpu_index}"] == pytest.approx(800.0)  # 412 s + 388 s
    fig = views.heatmap_figure(temp, "temp_c")
    assert list(fig.data[0].y)[0] == thermal.host
    assert views.heatmap_figure(views.gpu_heatmap(ev.gpu_states().iloc[0:0], None), "temp_c").data == ()
    with pytest.raises(ValueError, match="unknown metric"):
        views.gpu_heatmap(ev.gpu_states(), None, "colour")


def test_config_and_ledger_frames(thermal):
    inputs = gather([thermal.root])
    (odd,) = thermal.drift
    diff = views.config_diff_frame(inputs)
    assert list(diff["host"]) == [odd] and diff.loc[0, "VBIOS"] == "96.00.74.00.1C (majority 96.00.89.00.01)"
    assert views.config_frame(inputs).loc[odd, "vbios"] == "96.00.74.00.1C"
    assert list(views.config_diff_frame(gather([thermal.root / "synth-gpu-0001"])).columns) == ["host"]
    (finding,) = views.config_findings(inputs)
    assert (finding["id"], finding["severity"], finding["host"]) == ("config-drift-vbios", "warning", odd)
    top = views.ledger_frame(build_ledger([thermal.root]), top=3)
    assert len(top) == 3 and set(top["recommendation"]) == {"ok"}
