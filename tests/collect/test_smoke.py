"""The GPU smoke check (``gpulib.collect.smoke``), run here against replayed real GPU outputs:
the fake NVML and an ``nvidia-smi`` script that prints recorded captures."""

from __future__ import annotations

import os
import stat

from gpulib.collect import collect, smoke


def _fake_nvidia_smi(tmp_path, recorded, monkeypatch):
    """An ``nvidia-smi`` on PATH that prints the recorded 8x V100S XML for ``-q -x`` and a
    recorded ``-q`` text otherwise (the GPU is the only thing these tests may fake)."""
    xml = recorded / "nvidia-smi" / "xml" / "datakit" / "gtx-8card.xml"
    text = recorded / "nvidia-smi" / "thamada" / "A100SXMx4__nvidia-smi-q.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\nif [ "$*" = "-q -x" ]; then cat "{xml}"; else cat "{text}"; fi\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_healthy_gpu_host_passes(tmp_path, recorded, fake_nvml, monkeypatch, capsys):
    fake_nvml("healthy_8gpu")
    _fake_nvidia_smi(tmp_path, recorded, monkeypatch)
    root = collect(tmp_path / "b", sample_seconds=1, host="gpu-node")
    assert smoke.problems(root) == []
    assert (root / "nvidia-smi" / "q.xml").read_bytes().startswith(b"<?xml")
    assert smoke.main([str(root)]) == 0
    out = capsys.readouterr().out
    assert "GPU 0 Tesla V100S-PCIE-32GB 0000:00:0d.0: 66 C, SM 1410/1597 MHz, 232.8/250.0 W, throttle: none" in out
    assert "GPU 3 Tesla V100S-PCIE-32GB 0000:00:10.0: 61 C" in out and "throttle: sw_power_cap" in out
    assert "SMOKE OK" in out


def test_a_lost_gpu_fails_the_smoke_check(tmp_path, recorded, fake_nvml, monkeypatch):
    fake_nvml("healthy_8gpu", lost={5})
    _fake_nvidia_smi(tmp_path, recorded, monkeypatch)
    root = collect(tmp_path / "b", sample_seconds=1, host="gpu-node")
    assert smoke.problems(root) == ["GPU 5 unreadable: GPU is lost", "no temperature samples for GPU(s) 5"]


def test_a_host_without_driver_fails_with_the_reasons(tmp_path, fake_nvml, monkeypatch):
    import pynvml

    fake_nvml("healthy_8gpu", init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no tool at all, even on a GPU machine
    root = collect(tmp_path / "b", sample_seconds=1, host="cpu-node")
    found = smoke.problems(root)
    assert found[0] == "nvml: unavailable: no NVIDIA driver (Driver Not Loaded)"
    assert "nvidia-smi-q-xml: unavailable: nvidia-smi not found on PATH" in found
    assert smoke.main([str(root)]) == 1
