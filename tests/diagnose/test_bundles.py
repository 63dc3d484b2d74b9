"""Diagnosis of `gpulib collect` bundles: the bundle layout says what each file is.

Each bundle is written here with the real BundleWriter, in the layout and formats the
collectors write (NVML snapshot JSON, NVML samples CSV, Prometheus query_range JSON), for hosts
and values that appear in no corpus case."""

from __future__ import annotations

import json

from gpulib.collect import collect
from gpulib.diagnose import diagnose
from gpulib.evidence.bundle import BundleWriter, CollectorRecord
from gpulib.parsers import nvml_samples
from gpulib.parsers.gpu_records import encode_throttle_reasons

EXAMPLE = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "incident-gpu-fell-off-bus"
PCI = ["0000:19:00.0", "0000:3b:00.0", "0000:5c:00.0", "0000:9d:00.0"]


def write_bundle(path, host: str, files: dict[str, str], collectors: dict[str, str] | None = None) -> None:
    """A bundle at ``path`` holding ``files`` (relpath -> text); ``collectors``: name -> status,
    each owning the files under its folder of the same name."""
    with BundleWriter(path, host=host, command_line=["gpulib", "collect"]) as bundle:
        for rel, text in files.items():
            bundle.write_text(rel, text)
        for name, status in (collectors or {}).items():
            owned = [rel for rel in files if rel.split("/")[0] == name]
            bundle.record(CollectorRecord(name, status, None if status == "ok" else f"{name}: no device", 0.1, owned))


def nvml_gpu(index: int, **override) -> dict:
    gpu = {"index": index, "name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-7e1c0000-0000-0000-0000-00000000000{index}",
           "pci_bus_id": PCI[index], "pci_bus_id_nvml": PCI[index].upper().replace("0000:", "00000000:", 1),
           "temp_c": 41, "temp_slowdown_c": 87, "sm_clock_mhz": 1410, "sm_clock_max_mhz": 1410, "power_draw_w": 310.5,
           "power_limit_w": 400.0, "util_gpu_pct": 97, "mem_used_mib": 61000, "mem_total_mib": 81920,
           "throttle_bitmask": 0, "throttle_reasons": [], "ecc_volatile_dbe": 0, "remapped_rows_correctable": 0,
           "remapped_rows_uncorrectable": 0, "remapped_rows_pending": False, "remapped_rows_failure": False,
           "processes": [], "lost": False, "lost_reason": None, "errors": {}}
    gpu.update(override)
    return gpu


def snapshot_json(gpus: list[dict]) -> str:
    doc = {"schema": "gpulib.nvml-snapshot/1", "captured_at": "2026-06-11T22:40:00Z", "driver_version": "535.161.08",
           "cuda_driver_version": "12.2", "nvml_version": "12.535.161.08", "gpu_count": len(gpus), "gpus": gpus,
           "errors": {}}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"  # as the collector writes it: schema key last


def test_nvml_snapshot_with_pending_row_remap_is_a_memory_error(tmp_path):
    gpus = [nvml_gpu(i) for i in range(4)]
    gpus[2].update(remapped_rows_pending=True, remapped_rows_uncorrectable=1)
    write_bundle(tmp_path / "mx-41", "mx-41", {"nvml/snapshot.json": snapshot_json(gpus)}, {"nvml": "ok"})
    d = diagnose([tmp_path])
    ecc = [f for f in d.findings if f.category == "gpu_memory_error"]
    assert [(f.host, f.gpu_index, f.gpu_pci) for f in ecc] == [("mx-41", 2, "0000:5c:00.0")]
    assert "uncorrectable remapped rows 1" in ecc[0].title and "row remap pending" in ecc[0].title
    inputs = {i["path"]: i for i in d.to_dict()["inputs"]}
    assert inputs["mx-41/nvml/snapshot.json"]["kind"] == "nvml_snapshot"


def test_nvml_samples_with_sustained_thermal_slowdown_on_one_gpu(tmp_path):
    rows = [",".join(nvml_samples.COLUMNS)]
    hot_mask = encode_throttle_reasons(["hw_slowdown", "hw_thermal_slowdown"])
    for tick in range(20):
        for index in range(4):
            hot = index == 1 and tick >= 8
            mask = hot_mask if hot else 0
            rows.append(",".join(map(str, [f"2026-06-11T22:{30 + tick // 60:02d}:{tick % 60:02d}Z", index, PCI[index],
                                           88 if hot else 45, 900 if hot else 1410, 1410, 300.0, 98, 61000,
                                           f"{mask:#x}", "|".join(["hw_slowdown", "hw_thermal_slowdown"] if hot
                                                                  else [])])))
    write_bundle(tmp_path / "mx-42", "mx-42", {"nvml/samples.csv": "\n".join(rows) + "\n"}, {"nvml": "ok"})
    d = diagnose([tmp_path])
    hot = [f for f in d.findings if f.category == "thermal_throttling"]
    assert [(f.host, f.gpu_index, f.gpu_pci, f.time) for f in hot] == \
        [("mx-42", 1, "0000:3b:00.0", "2026-06-11T22:30:08Z")]
    assert "12 of 20 samples throttled" in hot[0].title and "SM clock down to 900/1410 MHz" in hot[0].title


def query_range(metric: str, series: list[tuple[dict, list[tuple[float, str]]]]) -> str:
    """A Prometheus /api/v1/query_range answer, as the server sends it."""
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": metric, **labels}, "values": [[t, v] for t, v in points]} for labels, points in series]}})


def test_prometheus_xid_79_is_the_root_cause_on_its_host_and_gpu(tmp_path):
    start = 1781217600.0  # 2026-06-11T22:40:00Z
    series_xid, series_temp = [], []
    for gpu in range(4):
        labels = {"gpu": str(gpu), "UUID": f"GPU-5d0a-{gpu}", "device": f"nvidia{gpu}", "Hostname": "trn-07",
                  "instance": "10.1.7.7:9400", "job": "dcgm"}
        xid = [(start + 15 * k, "79" if gpu == 3 and k >= 6 else "0") for k in range(12)]
        series_xid.append((labels, xid))
        series_temp.append((labels, [(start + 15 * k, "52") for k in range(12)]))
    write_bundle(tmp_path / "ops-1", "ops-1", {
        "prometheus/DCGM_FI_DEV_XID_ERRORS.json": query_range("DCGM_FI_DEV_XID_ERRORS", series_xid),
        "prometheus/DCGM_FI_DEV_GPU_TEMP.json": query_range("DCGM_FI_DEV_GPU_TEMP", series_temp),
        "prometheus/query.json": json.dumps({"url": "http://127.0.0.1:9090", "series": 8}),
    }, {"prometheus": "ok"})
    d = diagnose([tmp_path])
    rc = d.root_cause
    assert (d.interruption, d.category) == ("hard", "gpu_fell_off_bus")
    assert (rc.host, rc.gpu_index, rc.gpu_uuid, rc.time) == ("trn-07", 3, "GPU-5d0a-3", "2026-06-11T22:41:30.000Z")
    assert len([f for f in d.findings if f.id.startswith("xid")]) == 1  # the gauge stays at 79: one event
    kinds = {i["path"]: (i["kind"], i.get("problems")) for i in d.to_dict()["inputs"]}
    assert kinds["ops-1/prometheus/query.json"] == ("bundle_metadata", None)


def test_hidden_partial_bundle_is_skipped_with_a_note(tmp_path):
    dmesg = ("[Thu Jun 11 22:41:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has "
             "fallen off the bus.\n")
    write_bundle(tmp_path / "node-a", "node-a", {"kernel/dmesg.txt": "[Thu Jun 11 22:00:00 2026] Linux version 6.8\n"})
    write_bundle(tmp_path / ".node-a.partial-1234", "node-a", {"kernel/dmesg.txt": dmesg})
    d = diagnose([tmp_path])
    assert d.category == "none" and not any(f.id.startswith("xid") for f in d.findings)
    skipped = [i for i in d.to_dict()["inputs"] if i["kind"] == "skipped"]
    assert [i["path"].rsplit("/", 1)[-1] for i in skipped] == [".node-a.partial-1234"]
    assert "hidden folder skipped" in skipped[0]["notes"][0]


def test_a_real_collect_bundle_raises_no_unknown_input(tmp_path):
    """`gpulib collect --logs <example>` on this machine: its bookkeeping, version files, collector
    stderr and the copied README are all known; the copied logs keep their own hosts."""
    bundle = collect(tmp_path / "b", logs=[EXAMPLE], host="collector-vm", timeout_scale=0.5)
    d = diagnose([bundle])
    inputs = d.to_dict()["inputs"]
    assert not [i for i in inputs if "format not recognised" in " ".join(i.get("problems", []))]
    kinds = {i["path"]: i["kind"] for i in inputs}
    assert kinds["commands.json"] == "bundle_metadata" and kinds["versions/uname.txt"] == "versions"
    assert next(k for p, k in kinds.items() if p.endswith("README.md")) == "documentation"
    journal = next(i for i in inputs if i["path"].endswith("gx-a800-102/journal-kernel.txt"))
    assert journal["host"] == "gx-a800-102"  # named by its folder, not by the bundle that copied it
    assert (d.category, d.root_cause.host, d.root_cause.gpu_index) == ("gpu_fell_off_bus", "gx-a800-102", 2)


def test_prometheus_clock_event_reasons_show_the_throttled_gpu(tmp_path):
    start = 1781217600.0

    def series(metric: str, hot: str, cool: str) -> str:
        return query_range(metric, [({"gpu": str(g), "UUID": f"GPU-9c-{g}", "Hostname": "trn-09"},
                                     [(start + 15 * k, hot if g == 2 and k > 3 else cool) for k in range(10)])
                                    for g in range(4)])

    write_bundle(tmp_path / "ops-2", "ops-2", {
        "prometheus/DCGM_FI_DEV_CLOCKS_EVENT_REASONS.json": series("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "72", "0"),
        "prometheus/DCGM_FI_DEV_SM_CLOCK.json": series("DCGM_FI_DEV_SM_CLOCK", "900", "1980"),
        "prometheus/DCGM_FI_DEV_GPU_TEMP.json": series("DCGM_FI_DEV_GPU_TEMP", "91", "60"),
    }, {"prometheus": "ok"})
    hot = [f for f in diagnose([tmp_path]).findings if f.category == "thermal_throttling"]
    assert [(f.host, f.gpu_index, f.time) for f in hot] == [("trn-09", 2, "2026-06-11T22:41:00.000Z")]
    assert "GPU 2 (GPU-9c-2)" in hot[0].title and "6 of 10 samples throttled" in hot[0].title
    assert "up to 91 C" in hot[0].title  # 0x48 = hw_slowdown + hw_thermal_slowdown, temperature from its own file
