"""A PCIe AER burst names the port that received the error; the GPU is the one on that link.

Lines are written in the kernel's layout (``dmesg -T``) with invented hosts, PCI ids and times.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

PORT_BURST = [
    "[Tue Mar 10 04:21:07 2026] pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:00:03.0",
    "[Tue Mar 10 04:21:07 2026] pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
    "type=Transaction Layer, (Requester ID)",
    "[Tue Mar 10 04:21:07 2026] pcieport 0000:00:03.0:   device [8086:2030] error status/mask=00004020/00000000",
    "[Tue Mar 10 04:21:07 2026] pcieport 0000:00:03.0:    [14] CmpltTO                (First)",
]
GPU_LINE = "[Tue Mar 10 04:21:07 2026] nvidia 0000:5e:00.0: AER: can't recover (no error_detected callback)"


def _root(tmp_path, lines):
    (tmp_path / "dmesg-T.txt").write_text("\n".join(lines) + "\n")
    return diagnose([tmp_path]).to_dict()["root_cause"]


def test_the_gpu_on_the_link_is_the_culprit_not_the_root_port(tmp_path):
    root = _root(tmp_path, [*PORT_BURST, GPU_LINE])
    assert (root["category"], root["gpu_pci"]) == ("gpu_fell_off_bus", "0000:5e:00.0")


def test_a_burst_that_names_only_the_port_names_no_gpu(tmp_path):
    root = _root(tmp_path, PORT_BURST)
    assert root["category"] == "gpu_fell_off_bus" and root["gpu_pci"] is None
