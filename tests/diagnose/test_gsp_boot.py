"""A GPU whose GSP firmware did not boot (:mod:`gpulib.diagnose.rules.gsp`), and its index.

Kernel lines in the driver's layout under rsyslog stamps, a GPU inventory CSV as a prolog writes it
(a comment line above nvidia-smi's header); hosts, serials and times invented. The driver's
``NVRM: GPU<n>`` is its own instance number: the culprit's index comes from the host's GPU table.
Negative control: an init failure with no GSP reason stays a GPU that did not come up.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

STAMP = "2026-04-09T06:14:{s:02d}.{us:06d}+00:00 dgx-q11 kernel: NVRM: "
GSP = ["GPU2 _kgspBootGspRm: unexpected WPR2 already up, cannot proceed with booting GSP",
       "GPU2 _kgspBootGspRm: (the GPU is likely in a bad state and may need to be reset)",
       "GPU2 RmInitAdapter: Cannot initialize GSP firmware RM"]
INIT = ["GPU 0000:c3:00.0: RmInitAdapter failed! (0x62:0x40:2168)",
        "GPU 0000:c3:00.0: rm_init_adapter failed, device minor number 5"]
INVENTORY = ("# GPU inventory, written by the node prolog at 2026-04-09T05:58:12Z\n"
             "index, pci.bus_id, name, serial\n"
             + "".join(f"{i}, 00000000:{bus}:00.0, NVIDIA H100 80GB HBM3, 165302{i}0471{i}\n"
                       for i, bus in enumerate(["1B", "43", "52", "61", "9D", "C3", "D1", "DF"])))


def _run(tmp_path, messages: list[str], inventory: bool = True) -> dict:
    host = tmp_path / "dgx-q11"
    host.mkdir(exist_ok=True)
    (host / "kern.log").write_text("".join(STAMP.format(s=10, us=117300 + i) + m + "\n" for i, m in enumerate(messages)))
    if inventory:
        (host / "gpu-inventory.csv").write_text(INVENTORY)
    return diagnose([tmp_path]).to_dict()


def test_an_init_failure_after_a_gsp_boot_failure_is_the_firmware(tmp_path):
    root = _run(tmp_path, GSP + INIT)["root_cause"]
    assert (root["category"], root["host"], root["gpu_pci"]) == ("gpu_firmware_error", "dgx-q11", "0000:c3:00.0")


def test_the_culprits_index_is_the_hosts_gpu_table_not_the_drivers_instance(tmp_path):
    root = _run(tmp_path, GSP + INIT)["root_cause"]
    assert root["gpu_index"] == 5


def test_an_init_failure_with_no_gsp_reason_stays_a_gpu_that_did_not_come_up(tmp_path):
    """Negative control."""
    root = _run(tmp_path, INIT, inventory=False)["root_cause"]
    assert (root["category"], root["gpu_pci"]) == ("gpu_fell_off_bus", "0000:c3:00.0")
