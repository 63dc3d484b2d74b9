"""The alert rules and the dashboard on a REAL Prometheus (127.0.0.1, 1 s scrape and evaluation).

It scrapes two targets:

* an exporter speaking dcgm-exporter's text format, with the metric families (names, types,
  help) of dcgm-exporter's recorded counters CSVs — the enabled lines and the commented-out ones
  an operator enables for ECC and violation data — plus the few DCGM fields the rules use that
  those CSVs do not list. Its values tell an incident: GPU 3 of node-a at 88 C (slowdown 89 C)
  and thermally throttled, GPU 5 with Xid 79, GPU 6 with double-bit ECC errors and remapped
  rows, node-b losing a GPU to blank values, node-c vanishing; the other GPUs healthy, and
  GPU 7 answering "not supported" sentinels that must never alert;
* ``gpulib watch`` (a child process) following a log that prints steps and then stalls.

Time is compressed so that the alerts fire within the test's bound: every ``for:`` becomes 0 s
and the 5 min / 10 min / 1 h rate windows 30 s (a 5-minute ``rate()`` of a counter only 20 s old
is still diluted over 5 minutes). The real durations are checked by promtool's unit tests.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from gpulib.parsers.prom_text import parse_counters
from gpulib.watch.actions import IncidentCapture
from gpulib.watch.rules import Alert
from tests.conftest import REPO
from tests.prometheus_server import api, free_port, query, running_prometheus, serve_text, stop_process

pytestmark = pytest.mark.prometheus

RULES = REPO / "monitoring" / "prometheus" / "alerts.yml"
DASHBOARD = REPO / "monitoring" / "grafana" / "gpu-incident-dashboard.json"
BLANK_NOT_SUPPORTED = "9223372036854775794"  # DCGM_INT64_BLANK + 2
#: Step (scrape) at which node-b's GPU 1 turns to blanks and node-c stops reporting.
LOSS_TICK = 8
#: DCGM fields the rules and the dashboard read that the recorded counters CSVs do not list.
EXTRA_FAMILIES = [
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    ("DCGM_FI_DEV_SLOWDOWN_TEMP", "gauge", "Slowdown temperature for the GPU (in C)."),
    ("DCGM_FI_DEV_MAX_SM_CLOCK", "gauge", "Maximum supported SM clock for the GPU (in MHz)."),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", "Effective power limit that the driver enforces (in W)."),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending."),
]
HOSTS = {"node-a": 8, "node-b": 2, "node-c": 2}


def _families(recorded: Path) -> list[tuple[str, str, str]]:
    seen, out = set(), []
    for name in ("default-counters.csv", "dcp-metrics-included.csv"):
        for spec in parse_counters((recorded / "dcgm" / name).read_text(), name).records:
            if spec.name not in seen:
                seen.add(spec.name)
                out.append((spec.name, spec.prom_type, spec.help))
    return out + [f for f in EXTRA_FAMILIES if f[0] not in seen]


def scenario_value(metric: str, host: str, gpu: int, tick: int) -> str | None:
    """The incident told by the exporter; None = the series is not exported at this tick."""
    if host == "node-c" and tick >= LOSS_TICK:
        return None
    if (host, gpu) == ("node-a", 7) and metric in ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_SLOWDOWN_TEMP",
                                                    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ROW_REMAP_FAILURE"):
        return BLANK_NOT_SUPPORTED
    if (host, gpu) == ("node-b", 1) and tick >= LOSS_TICK and metric.startswith("DCGM_FI_DEV_"):
        return BLANK_NOT_SUPPORTED
    hot = (host, gpu) == ("node-a", 3)
    ecc = (host, gpu) == ("node-a", 6)
    if metric == "DCGM_FI_DEV_GPU_TEMP":
        return "88" if hot else str(60 + gpu)
    if metric == "DCGM_FI_DEV_SLOWDOWN_TEMP":
        return "89"
    if metric == "DCGM_FI_DEV_THERMAL_VIOLATION":  # microseconds: +0.2 s per 1 s scrape when hot
        return str(tick * 200_000 if hot else 0)
    if metric == "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS":
        return "64" if hot else "4"  # hw_thermal_slowdown vs sw_power_cap
    if metric == "DCGM_FI_DEV_XID_ERRORS":
        return "79" if (host, gpu) == ("node-a", 5) and tick >= 3 else "0"
    if metric in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"):
        return "2" if ecc and tick >= 3 else "0"
    table = {"DCGM_FI_DEV_SM_CLOCK": 1275 if hot else 1410, "DCGM_FI_DEV_MAX_SM_CLOCK": 1410,
             "DCGM_FI_DEV_MEM_CLOCK": 1593, "DCGM_FI_DEV_MEMORY_TEMP": 70, "DCGM_FI_DEV_GPU_UTIL": 97,
             "DCGM_FI_DEV_FB_USED": 60000 + 1000 * gpu, "DCGM_FI_DEV_FB_FREE": 21000 - 1000 * gpu,
             "DCGM_FI_DEV_FB_RESERVED": 500, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 1_000_000 + 400 * tick}
    if metric in table:
        return str(table[metric])
    if metric in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"):
        return f"{(500.0 if 'LIMIT' in metric else 380.5 + gpu):f}"
    if metric.startswith("DCGM_FI_PROF_"):
        return f"{0.5:f}"
    return "0"


def exposition(families, tick: int) -> str:
    out = []
    driver = {"DCGM_FI_DRIVER_VERSION": "535.129.03"}  # the one label field enabled by default
    for name, kind, help_text in families:
        if kind == "label":
            continue
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for host, count in HOSTS.items():
            for gpu in range(count):
                value = scenario_value(name, host, gpu, tick)
                if value is None:
                    continue
                labels = {"gpu": gpu, "UUID": f"GPU-{host}-{gpu:04d}", "pci_bus_id": f"00000000:{0x19 + 0x20 * gpu:02X}:00.0",
                          "device": f"nvidia{gpu}", "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": host} | driver
                out.append(name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "} " + value)
    return "\n".join(out) + "\n"


def _rules_compressed(tmp_path: Path) -> Path:
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "0s"
            rule["expr"] = re.sub(r"\[(5m|10m|1h)\]", "[30s]", rule["expr"])
    path = tmp_path / "alerts.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def live(recorded, tmp_path_factory):
    """Exporter + gpulib watch + Prometheus; yields (url, start time, stop-writing event)."""
    tmp = tmp_path_factory.mktemp("live")
    families = _families(recorded)
    ticks = itertools.count()
    log = tmp / "train.log"
    log.write_text("")
    watch_port = free_port()
    watch = subprocess.Popen([sys.executable, "-m", "gpulib", "watch", "--log", str(log), "--silence", "2s",
                              "--listen", f"127.0.0.1:{watch_port}", "--host", "node-a", "--max-seconds", "170"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop_writing = threading.Event()

    def write_steps():
        with log.open("a") as handle:
            for step in itertools.count(1):
                if stop_writing.wait(0.3):
                    return
                handle.write(f"[rank0]: step {step} | loss 2.31 | 0.30 s/step | fwd_bwd_ms=280.5 data_ms=1.2\n")
                handle.flush()

    writer = threading.Thread(target=write_steps, daemon=True)
    writer.start()
    started = time.time()
    try:
        with serve_text(lambda: exposition(families, next(ticks))) as exporter, running_prometheus(
                tmp, {"dcgm": [exporter], "gpulib-watch": [f"127.0.0.1:{watch_port}"]},
                rule_files=[_rules_compressed(tmp)],
                ready=lambda url: bool(query(url, "gpulib_watch_step_seconds"))) as url:
            time.sleep(2)  # the watch's counters are scraped at 0 before the silence alert raises them
            stop_writing.set()
            yield url, started
    finally:
        stop_writing.set()
        writer.join(5)
        stop_process(watch)


def _firing(url: str) -> dict[tuple[str, str], dict]:
    doc = api(url, "/api/v1/alerts")
    out = {}
    for a in doc["data"]["alerts"]:
        if a["state"] == "firing":
            who = a["labels"].get("Hostname") or a["labels"].get("host", "")
            if "gpu" in a["labels"]:
                who += f"/{a['labels']['gpu']}"
            out[(a["labels"]["alertname"], who)] = a
    return out


EXPECTED = {
    ("GpuTemperatureNearSlowdown", "node-a/3"), ("GpuThermalViolationRising", "node-a/3"),
    ("GpuClocksThermalSlowdown", "node-a/3"), ("GpuXidError", "node-a/5"), ("GpuDoubleBitEccErrors", "node-a/6"),
    ("GpuUncorrectableRowRemapGrowing", "node-a/6"), ("GpuCountDropped", "node-b"), ("GpuHostMetricsAbsent", "node-c"),
    ("TrainingJobSilent", "node-a"),
}


def test_the_incident_fires_exactly_the_expected_alerts(live):
    url, _ = live
    deadline = time.monotonic() + 60
    firing = _firing(url)
    while not EXPECTED <= set(firing) and time.monotonic() < deadline:
        time.sleep(1)
        firing = _firing(url)
    assert EXPECTED - set(firing) == set(), f"not firing: {EXPECTED - set(firing)}; firing: {sorted(firing)}"
    # ... and nothing else: not the healthy GPUs, not GPU 7's "not supported" sentinels.
    assert set(firing) - EXPECTED == set(), sorted(firing)
    xid = firing[("GpuXidError", "node-a/5")]
    assert xid["labels"]["xid"] == "79" and xid["labels"]["pci_bus_id"] == "00000000:B9:00.0"
    assert xid["annotations"]["summary"] == "Xid 79 on GPU 5 of node-a"
    assert xid["annotations"]["runbook_url"] == "notebooks/01_kernel_xid.ipynb"
    hot = firing[("GpuTemperatureNearSlowdown", "node-a/3")]
    assert hot["annotations"]["summary"] == "GPU 3 on node-a at 88 C, near its slowdown temperature"
    # 0.2 s of capping per second; a window not yet full of samples dilutes it, never inflates it.
    assert 0.05 < float(firing[("GpuThermalViolationRising", "node-a/3")]["value"]) <= 0.25
    assert firing[("GpuCountDropped", "node-b")]["annotations"]["summary"].startswith("node-b reports 1 GPU(s)")
    for alert in firing.values():
        assert (REPO / alert["annotations"]["runbook_url"]).is_file()


def _grafana_to_promql(expr: str) -> str:
    return (expr.replace("$__rate_interval", "1m").replace("$__range", "5m").replace("$__interval", "15s")
            .replace('"$host"', '".*"'))


def test_every_dashboard_query_parses_and_returns_data(live):
    url, started = live
    board = json.loads(DASHBOARD.read_text())
    targets = [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]
    assert len(targets) >= 15
    missing = []
    deadline = time.monotonic() + 60
    for title, expr in targets:
        promql = _grafana_to_promql(expr)
        assert not re.search(r"\$\w+", promql), promql
        while True:
            doc = api(url, "/api/v1/query", query=promql)
            assert doc["status"] == "success", (title, promql, doc)
            if doc["data"]["result"] or time.monotonic() > deadline:
                break
            time.sleep(1)
        if not doc["data"]["result"]:
            missing.append((title, promql))
    assert missing == []
    for note in board["annotations"]["list"]:
        doc = api(url, "/api/v1/query_range", query=_grafana_to_promql(note["expr"]), start=started - 5,
                  end=time.time(), step=1)
        assert doc["status"] == "success", (note["name"], doc)
        assert doc["data"]["result"], f"annotation {note['name']!r} found nothing in the incident window"
        if "XID" in note["expr"]:
            assert {s["metric"]["gpu"] for s in doc["data"]["result"]} == {"5"}


def test_a_capture_on_alert_freezes_the_dcgm_history_beside_the_diagnosis(live, tmp_path):
    """What ``gpulib watch --out DIR --prometheus URL`` does on an alert, against this Prometheus."""
    url, _ = live
    said: list[str] = []
    capture = IncidentCapture(tmp_path / "incidents", [], said.append, host="node-a", prometheus_url=url,
                              prometheus_window_s=600)
    assert capture.trigger(Alert("job_silence", "2026-02-10T03:12:07Z", "no log line from any rank for 600 s"),
                           hosts=["node-a.cluster.local", "10.1.2.3"])
    assert not capture.trigger(Alert("signature", "2026-02-10T03:12:08Z", "a second alert of the same incident"))
    capture.wait(120)
    (incident,) = (tmp_path / "incidents").iterdir()
    assert not (incident / "error.txt").exists(), (incident / "error.txt").read_text()
    assert json.loads((incident / "alert.json").read_text())["kind"] == "job_silence"
    temp = json.loads((incident / "node-a" / "prometheus" / "DCGM_FI_DEV_GPU_TEMP.json").read_text())
    hot = [s for s in temp["data"]["result"] if (s["metric"]["Hostname"], s["metric"]["gpu"]) == ("node-a", "3")]
    assert hot and {v for _, v in hot[0]["values"]} == {"88"}, temp
    assert {s["metric"]["Hostname"] for s in temp["data"]["result"]} == {"node-a"}  # the job's host, not node-b/c
    query_doc = json.loads((incident / "node-a" / "prometheus" / "query.json").read_text())
    assert query_doc["match"] == '{Hostname=~"(node-a)(\\\\..*)?"}'
    xid = json.loads((incident / "node-a" / "prometheus" / "DCGM_FI_DEV_XID_ERRORS.json").read_text())
    assert any(s["metric"]["gpu"] == "5" and s["values"][-1][1] == "79" for s in xid["data"]["result"])
    diagnosis = json.loads((incident / "diagnosis.json").read_text())
    assert diagnosis["schema"] == "gpulib.diagnosis/1"
    assert any(i["path"].endswith("DCGM_FI_DEV_XID_ERRORS.json") for i in diagnosis["inputs"])
    assert any(line.startswith("diagnosis (") for line in said)
