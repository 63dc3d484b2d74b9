"""NVML collector against the fake pynvml replaying real recorded captures (named scenarios)."""

from __future__ import annotations

import csv
import json
import threading

import pynvml
import pytest

from gpulib.collect import nvml
from gpulib.collect.core import Collector, Outcome, run_collectors
from gpulib.evidence.bundle import Bundle, BundleWriter, verify


def _capture(tmp_path, *collectors):
    writer = BundleWriter(tmp_path / "node-a", host="node-a", command_line=["test"])
    run_collectors(writer, list(collectors))
    root = writer.finish()
    bundle = Bundle.open(root)
    return bundle, {c.name: c for c in bundle.collectors}


def _snapshot(bundle):
    return json.loads((bundle.root / "nvml" / "snapshot.json").read_text())


def test_healthy_8gpu_snapshot_carries_the_recorded_values(tmp_path, fake_nvml):
    fake_nvml("healthy_8gpu")
    bundle, records = _capture(tmp_path, nvml.snapshot_collector())
    assert records["nvml"].status == "ok" and records["nvml"].reason is None
    assert records["nvml"].files == ["nvml/snapshot.json"]
    doc = _snapshot(bundle)
    assert doc["schema"] == "gpulib.nvml-snapshot/1"
    assert (doc["driver_version"], doc["cuda_driver_version"], doc["gpu_count"]) == ("460.73.01", "11.2", 8)
    gpu0 = doc["gpus"][0]
    assert gpu0["name"] == "Tesla V100S-PCIE-32GB"
    assert gpu0["uuid"] == "GPU-76098dc1-d3bc-9a1b-7ea6-f7b48837829e"
    assert (gpu0["pci_bus_id"], gpu0["pci_bus_id_nvml"]) == ("0000:00:0d.0", "00000000:00:0D.0")
    assert (gpu0["temp_c"], gpu0["temp_shutdown_c"], gpu0["temp_slowdown_c"], gpu0["temp_max_operating_c"]) == (66, 90, 87, 83)
    assert (gpu0["sm_clock_mhz"], gpu0["sm_clock_max_mhz"]) == (1410, 1597)
    assert (gpu0["power_draw_w"], gpu0["power_limit_w"]) == (232.8, 250.0)
    assert (gpu0["mem_used_mib"], gpu0["mem_total_mib"], gpu0["util_gpu_pct"]) == (31689, 32510, 97)
    assert (gpu0["pcie_gen_current"], gpu0["pcie_width_max"], gpu0["pcie_replay_count"]) == (3, 16, 0)
    assert gpu0["processes"] == [{"pid": 37305, "name": "python", "used_mib": 31683}]
    assert [g["throttle_reasons"] for g in doc["gpus"]].count(["sw_power_cap"]) == 2
    assert doc["gpus"][3]["throttle_bitmask"] == 0x4 and doc["gpus"][3]["throttle_reasons"] == ["sw_power_cap"]
    # V100 retires pages and has no row remapper: NotSupported is a value, not an error.
    assert gpu0["retired_pages_pending"] is False and gpu0["remapped_rows_pending"] is None
    assert gpu0["errors"]["remapped_rows"] == "Not Supported"
    assert verify(bundle.root).ok


def test_one_gpu_failing_every_call_does_not_lose_the_others(tmp_path, fake_nvml):
    fake = fake_nvml("healthy_8gpu", lost={3})
    bundle, records = _capture(tmp_path, nvml.snapshot_collector())
    assert records["nvml"].status == "ok"
    assert records["nvml"].reason == "1 of 8 GPUs unreadable: GPU 3 (GPU is lost)"
    gpus = _snapshot(bundle)["gpus"]
    assert gpus[3]["lost"] is True and gpus[3]["temp_c"] is None
    assert [g["temp_c"] for i, g in enumerate(gpus) if i != 3] == [66, 58, 57, 59, 64, 61, 57]
    assert fake.calls[3] == 1, "a lost GPU must not be asked again (each call can block for seconds)"


def test_not_supported_and_no_permission_degrade_one_field(tmp_path, fake_nvml):
    fake_nvml("healthy_8gpu", unsupported={"nvmlDeviceGetPowerUsage"}, no_permission={"nvmlDeviceGetSerial"})
    bundle, records = _capture(tmp_path, nvml.snapshot_collector())
    assert records["nvml"].status == "ok"
    gpu = _snapshot(bundle)["gpus"][5]
    assert gpu["power_draw_w"] is None and gpu["errors"]["power_draw_w"] == "Not Supported"
    assert gpu["serial"] is None and gpu["errors"]["serial"] == "Insufficient Permissions"
    assert gpu["power_limit_w"] == 250.0 and gpu["temp_c"] == 64


def test_geforce_without_ecc_reports_none_not_zero(tmp_path, fake_nvml):
    fake_nvml("geforce_no_ecc")
    bundle, _ = _capture(tmp_path, nvml.snapshot_collector())
    gpu = _snapshot(bundle)["gpus"][0]
    assert gpu["name"] == "NVIDIA GeForce RTX 3060 Laptop GPU" and gpu["temp_c"] == 45
    assert gpu["serial"] is None and gpu["ecc_volatile_dbe"] is None and gpu["ecc_mode_current"] is None
    assert gpu["errors"]["ecc_volatile_dbe"] == "Not Supported"


@pytest.mark.parametrize("scenario,total_mib", [("mig_a100_80gb", 81920), ("mig_a100_40gb", 40960)])
def test_mig_gpu_lacks_utilization_and_remapped_rows(tmp_path, fake_nvml, scenario, total_mib):
    fake_nvml(scenario)
    bundle, _ = _capture(tmp_path, nvml.snapshot_collector())
    gpu = _snapshot(bundle)["gpus"][0]
    assert gpu["mig_mode_current"] is True and gpu["mem_total_mib"] == total_mib
    assert gpu["util_gpu_pct"] is None and gpu["errors"]["util_gpu_pct"] == "Not Supported"
    assert gpu["remapped_rows_pending"] is None
    assert (gpu["temp_shutdown_c"], gpu["temp_slowdown_c"]) == (92, 89)


def test_ada_reports_tlimit_margin(tmp_path, fake_nvml):
    fake_nvml("ada_tlimit")
    bundle, _ = _capture(tmp_path, nvml.snapshot_collector())
    gpu = _snapshot(bundle)["gpus"][0]
    assert gpu["temp_tlimit_margin_c"] == 49 and gpu["throttle_reasons"] == ["gpu_idle"]
    assert gpu["remapped_rows_correctable"] == 0 and gpu["remapped_rows_failure"] is False


@pytest.mark.parametrize("code,status,words", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "unavailable", "no NVIDIA driver"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "unavailable", "no NVIDIA driver"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "failed", "reboot"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "failed", "permission"),
])
def test_no_driver_is_recorded_with_the_reason(tmp_path, fake_nvml, code, status, words):
    fake_nvml("healthy_8gpu", init_error=code)
    bundle, records = _capture(tmp_path, nvml.snapshot_collector(), nvml.sampling_collector(2))
    for name in ("nvml", "nvml-samples"):
        assert records[name].status == status and words in records[name].reason
    assert not (bundle.root / "nvml").exists()


def test_sampling_writes_one_row_per_gpu_per_second(tmp_path, fake_nvml):
    fake_nvml("healthy_8gpu", lost={7})
    bundle, records = _capture(tmp_path, nvml.sampling_collector(2))
    assert records["nvml-samples"].status == "ok", records["nvml-samples"].reason
    with open(bundle.root / "nvml" / "samples.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 8
    assert list(rows[0]) == list(nvml.SAMPLE_COLUMNS)
    gpu3 = [r for r in rows if r["index"] == "3"]
    assert {r["temp_c"] for r in gpu3} == {"61"} and {r["throttle_reasons"] for r in gpu3} == {"sw_power_cap"}
    assert gpu3[0]["sm_clock_max_mhz"] == "1597" and gpu3[0]["pci_bus_id"] == "0000:00:10.0"
    assert {r["temp_c"] for r in rows if r["index"] == "7"} == {""}, "a lost GPU gives empty cells, not a crash"
    assert rows[0]["time_utc"].endswith("Z")


def test_hung_nvml_is_cut_at_its_timeout_while_others_finish(tmp_path, fake_nvml):
    fake_nvml("healthy_8gpu", hang_s=6)
    quick_done = threading.Event()

    def quick(sink, timeout_s):
        sink.write_text("quick.txt", "done\n")
        quick_done.set()
        return Outcome("ok")

    snapshot = nvml.snapshot_collector()
    bundle, records = _capture(tmp_path, Collector("nvml", 0.5, snapshot.fn), Collector("quick", 5, quick))
    assert records["nvml"].status == "timeout" and "abandoned" in records["nvml"].reason
    assert records["quick"].status == "ok" and quick_done.is_set()
    assert "nvml/snapshot.json" not in bundle.manifest["files"]
    assert verify(bundle.root).ok


def test_sampling_shows_a_progress_bar_only_on_a_terminal(tmp_path, fake_nvml, monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    fake_nvml("healthy_8gpu")
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    _capture(tmp_path / "tty", nvml.sampling_collector(2))
    drawn = terminal.getvalue()  # a tqdm bar (gpulib.progress), cleared when sampling ends
    assert "\rsampling GPUs:" in drawn and "| 2/2 [" in drawn and drawn.endswith("\r")
    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    _capture(tmp_path / "pipe", nvml.sampling_collector(1))
    assert piped.getvalue() == ""


@pytest.mark.parametrize("option", ["function_not_found", "absent"])
def test_old_driver_or_old_binding_falls_back_to_the_throttle_reasons_call(tmp_path, fake_nvml, option):
    fake_nvml("healthy_8gpu", **{option: {"nvmlDeviceGetCurrentClocksEventReasons"}})
    bundle, _ = _capture(tmp_path, nvml.snapshot_collector())
    gpu = _snapshot(bundle)["gpus"][6]
    assert gpu["throttle_reasons"] == ["sw_power_cap"] and "throttle_bitmask" not in gpu["errors"]


def test_a_function_missing_everywhere_is_named(tmp_path, fake_nvml):
    fake_nvml("healthy_8gpu", absent={"nvmlDeviceGetMarginTemperature"})
    bundle, _ = _capture(tmp_path, nvml.snapshot_collector())
    gpu = _snapshot(bundle)["gpus"][0]
    assert gpu["errors"]["temp_tlimit_margin_c"] == "nvmlDeviceGetMarginTemperature is not in this nvidia-ml-py"


def test_ada_tlimit_thresholds_come_from_field_values(tmp_path, fake_nvml):
    fake_nvml("ada_tlimit")
    bundle, _ = _capture(tmp_path, nvml.snapshot_collector())
    gpu = _snapshot(bundle)["gpus"][0]
    assert (gpu["temp_shutdown_tlimit_c"], gpu["temp_slowdown_tlimit_c"], gpu["temp_max_operating_tlimit_c"]) == (-7, -2, 0)
    assert gpu["temp_mem_max_tlimit_c"] is None and gpu["errors"]["temp_mem_max_tlimit_c"] == "Not Supported"


def test_nvlink_state_per_link(tmp_path, recorded, fake_nvml):
    status = recorded / "nvidia-smi" / "gpud" / "nvidia-smi.nvlink.status.a100"
    fake_nvml("mig_a100_80gb", nvlink_status=status)
    bundle, _ = _capture(tmp_path, nvml.snapshot_collector())
    links = _snapshot(bundle)["gpus"][0]["nvlink"]
    assert [link["link"] for link in links] == list(range(12)) and all(link["active"] for link in links)
    assert links[0]["crc_flit_errors"] is None


def test_nvlink_all_inactive_is_visible(tmp_path, recorded, fake_nvml):
    fake_nvml("mig_a100_80gb", nvlink_status=recorded / "azurehpc" / "bad_nvlink_status.txt")
    bundle, _ = _capture(tmp_path / "bad", nvml.snapshot_collector())
    links = _snapshot(bundle)["gpus"][0]["nvlink"]
    assert len(links) == 12 and not any(link["active"] for link in links)
