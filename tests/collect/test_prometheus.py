"""``gpulib collect --prometheus`` against a real Prometheus server (Debian's /usr/bin/prometheus)
scraping a small local exporter that speaks dcgm-exporter's text format, with the metric names,
types and help texts of dcgm-exporter's recorded ``default-counters.csv``."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from gpulib.collect.core import run_collectors
from gpulib.collect.prometheus import (
    DCGM_METRICS,
    PrometheusQuery,
    parse_time,
    prometheus_collector,
    step_for,
)
from gpulib.errors import InputError
from gpulib.evidence.bundle import Bundle, BundleWriter, verify
from tests.prometheus_server import free_port, query, running_prometheus, serve_text

GPUS = [("0", "GPU-5f5b7f9e-0000-0000-0000-000000000000", "00000000:19:00.0"),
        ("1", "GPU-9b1c2d3e-0000-0000-0000-000000000001", "00000000:3B:00.0")]
XID_ON_GPU1 = 79  # the exporter reports GPU 1 with "fallen off the bus" as its last Xid


def _value(metric: str, gpu: int, tick: int) -> str:
    """A plausible reading per dcgm-exporter family (ints as %d, doubles as %f like the exporter)."""
    if metric == "DCGM_FI_DEV_XID_ERRORS":
        return str(XID_ON_GPU1 if gpu == 1 else 0)
    table = {"GPU_TEMP": 61 + gpu, "MEMORY_TEMP": 70, "SM_CLOCK": 1410, "MEM_CLOCK": 1593, "GPU_UTIL": 97,
             "FB_USED": 30000, "FB_FREE": 2000, "FB_RESERVED": 500, "TOTAL_ENERGY_CONSUMPTION": 1_000_000 + 400 * tick}
    for key, number in table.items():
        if metric.endswith(key):
            return str(number)
    if metric.endswith("POWER_USAGE"):
        return f"{250.5 + gpu:f}"
    if metric.startswith("DCGM_FI_PROF_"):
        return f"{0.5:f}"
    return "0"


def dcgm_exposition(counters_csv: str, tick: int) -> str:
    families = []
    for line in counters_csv.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, kind, help_text = (part.strip() for part in line.split(",", 2))
        families.append((name, kind, help_text))
    label_fields = {name: "535.129.03" for name, kind, _ in families if kind == "label"}
    out = []
    for name, kind, help_text in families:
        if kind == "label":
            continue
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for gpu, uuid, bus in GPUS:
            labels = [f'gpu="{gpu}"', f'UUID="{uuid}"', f'pci_bus_id="{bus}"', f'device="nvidia{gpu}"',
                      'modelName="NVIDIA H100 80GB HBM3"', 'Hostname="node-b"']
            labels += [f'{field}="{value}"' for field, value in label_fields.items()]
            out.append(f"{name}{{{','.join(labels)}}} {_value(name, int(gpu), tick)}")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def dcgm_exporter(recorded):
    counters = (recorded / "dcgm" / "default-counters.csv").read_text()
    ticks = iter(range(1_000_000))
    with serve_text(lambda: dcgm_exposition(counters, next(ticks))) as address:
        yield address


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, dcgm_exporter):
    """A real Prometheus on 127.0.0.1 scraping the exporter every second; always terminated."""

    def scraped(url: str) -> bool:
        return len(query(url, "DCGM_FI_DEV_GPU_TEMP")) == 2 and bool(query(url, "count_over_time(DCGM_FI_DEV_GPU_TEMP[1m])"))

    with running_prometheus(tmp_path_factory.mktemp("prometheus"), {"dcgm": [dcgm_exporter]}, ready=scraped) as url:
        time.sleep(2)  # a few more scrapes, so the range has several points
        yield url


@pytest.mark.prometheus
def test_dcgm_metrics_of_the_window_land_in_the_bundle(tmp_path, prometheus):
    out = tmp_path / "bundle"
    start = time.time() - 120
    done = subprocess.run(
        [sys.executable, "-m", "gpulib", "collect", "--out", str(out), "--prometheus", prometheus,
         "--since", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)), "--until", "now",
         "--prometheus-step", "1", "--prometheus-match", '{Hostname="node-b"}'],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    record = {c.name: c for c in Bundle.open(out).collectors}["prometheus"]
    assert record.status == "ok", record.reason
    # default-counters.csv leaves the ECC families commented out: their absence is reported, not an error.
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in record.reason and "no series" in record.reason
    temp = json.loads((out / "prometheus" / "DCGM_FI_DEV_GPU_TEMP.json").read_text())
    assert temp["status"] == "success" and temp["data"]["resultType"] == "matrix"
    by_gpu = {s["metric"]["gpu"]: s for s in temp["data"]["result"]}
    assert {s["metric"]["UUID"] for s in by_gpu.values()} == {uuid for _, uuid, _ in GPUS}
    assert {v for _, v in by_gpu["1"]["values"]} == {"62"} and len(by_gpu["1"]["values"]) >= 2
    xid = json.loads((out / "prometheus" / "DCGM_FI_DEV_XID_ERRORS.json").read_text())
    assert {s["metric"]["gpu"]: s["values"][-1][1] for s in xid["data"]["result"]} == {"0": "0", "1": str(XID_ON_GPU1)}
    power = json.loads((out / "prometheus" / "DCGM_FI_DEV_POWER_USAGE.json").read_text())
    assert {s["values"][-1][1] for s in power["data"]["result"]} == {"250.5", "251.5"}
    summary = json.loads((out / "prometheus" / "query.json").read_text())
    assert set(summary["metrics"]) == set(DCGM_METRICS) and summary["metrics"]["DCGM_FI_DEV_FB_USED"]["series"] == 2
    assert summary["step_s"] == 1 and summary["match"] == '{Hostname="node-b"}'
    assert verify(out).ok


@pytest.mark.prometheus
def test_a_label_matcher_that_selects_nothing_gives_empty_series(tmp_path, prometheus):
    query = PrometheusQuery(prometheus, time.time() - 60, time.time(), step_s=1, match='{Hostname="node-zz"}',
                            metrics=("DCGM_FI_DEV_GPU_TEMP",))
    writer = BundleWriter(tmp_path / "b", host="node-a", command_line=["test"])
    run_collectors(writer, [prometheus_collector(query)])
    bundle = Bundle.open(writer.finish())
    assert bundle.collectors[0].status == "ok"
    assert "no series for 1 metric(s): DCGM_FI_DEV_GPU_TEMP" in bundle.collectors[0].reason
    assert json.loads((bundle.root / "prometheus" / "DCGM_FI_DEV_GPU_TEMP.json").read_text())["data"]["result"] == []


def test_unreachable_prometheus_is_failed_with_the_url(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "bundle"
    done = subprocess.run([sys.executable, "-m", "gpulib", "collect", "--only", "prometheus", "--out", str(out),
                           "--prometheus", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [c.name for c in Bundle.open(out).collectors] == ["prometheus"]
    record = Bundle.open(out).collectors[0]
    assert record.status == "failed" and record.reason.startswith(f"cannot reach Prometheus at {url}")


def test_time_forms():
    now = 1_770_000_000.0
    assert parse_time("now", now) == now and parse_time("-2h", now) == parse_time("2h", now) == now - 7200
    assert parse_time("2026-02-10T03:12:07Z") == parse_time("2026-02-10T04:12:07+01:00") == 1770693127.0
    assert parse_time("2026-02-10T03:12:07") == 1770693127.0  # no offset: UTC, as documented
    assert parse_time("1770693127.5") == 1770693127.5
    with pytest.raises(InputError, match="cannot read the time"):
        parse_time("last tuesday")


def test_step_keeps_long_windows_under_the_points_limit():
    assert step_for(0, 3600) == 15.0 and step_for(0, 60, 1.0) == 1.0
    assert (30 * 86400) / step_for(0, 30 * 86400) < 11_000
