"""``gpulib run ... --textfile DIR``: DIR/gpulib.prom for node_exporter's textfile collector.

The file passes ``promtool check metrics``; a real run of the health report on a real recorded
capture (an A100's nvidia-smi -q and a kernel log with an Xid 119) writes it; Debian's ``prometheus-node-exporter``
serves it and a real Prometheus scrapes it and fires the ``gpulib-textfile`` alerts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from gpulib.runbooks import textfile
from tests.conftest import REPO
from tests.prometheus_server import free_port, query, running_prometheus, sample_value, stop_process

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
PROMTOOL = "/usr/bin/promtool"
RULES = REPO / "monitoring" / "prometheus" / "alerts.yml"
REMAP_PENDING = "nvidia-smi/thamada/A100SXMx4__nvidia-smi-q.txt"  # GPU 1: remap pending (a warning)
XID_119 = "kernel/gpud/dmesg-with-xid-119.log"  # Xid 119 (GSP timeout) on PCI 0000:9b:00.0: critical

FINDINGS = [
    {"id": "xid79-1", "severity": "critical", "category": "gpu_fell_off_bus", "title": "GPU 5 fell off the bus",
     "host": "gx-node-03", "gpu_index": 5},
    {"id": "thermal-1", "severity": "warning", "category": "thermal_throttling", "title": "GPU 1 slowed",
     "host": "gx-node-03", "gpu_index": 1},
    {"id": "gpu-inventory", "severity": "info", "category": "none", "title": "inventory", "host": None,
     "gpu_index": None, "gpus": [{"host": "gx-node-03", "index": i, "uuid": f"GPU-{i}", "lost": i == 7}
                                 for i in range(8)]},
]


def _promtool_metrics(text: str) -> subprocess.CompletedProcess:
    if not shutil.which(PROMTOOL):
        pytest.skip(f"{PROMTOOL} not installed (Debian package 'prometheus')")
    return subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)


def test_textfile_has_findings_gpu_health_and_the_run_time(tmp_path):
    path = textfile.write(tmp_path, "preflight", "gx-node-03", FINDINGS, exit_code=3, finished_unix_s=1796000000.5)
    assert path == tmp_path / "gpulib.prom" and sorted(p.name for p in tmp_path.iterdir()) == [
        ".gpulib.prom.lock", "gpulib.prom"]  # no temporary file left beside it
    text = path.read_text()

    def value(name, **labels):
        return sample_value(text, name, runbook="preflight", **labels)

    assert value("gpulib_runbook_last_run_timestamp_seconds", host="gx-node-03") == 1796000000.5
    assert value("gpulib_runbook_exit_code") == 3 and value("gpulib_runbook_steps_failed") == 0
    assert value("gpulib_runbook_findings", severity="critical", category="gpu_fell_off_bus") == 1
    assert value("gpulib_runbook_findings", severity="warning", category="thermal_throttling") == 1
    assert value("gpulib_runbook_findings", severity="error", category="nvlink_error") == 0  # zero, not absent
    assert [value("gpulib_gpu_health", gpu=str(i)) for i in range(8)] == [0, 1, 0, 0, 0, 3, 0, 3]
    assert value("gpulib_gpu_health", gpu="5", uuid="GPU-5", host="gx-node-03") == 3
    lint = _promtool_metrics(text)
    assert lint.returncode == 0 and lint.stdout.strip() == "", lint.stdout + lint.stderr


def test_each_runbook_replaces_only_its_own_series(tmp_path):
    textfile.write(tmp_path, "preflight", "n1", FINDINGS, exit_code=3, finished_unix_s=100)
    textfile.write(tmp_path, "health-report", "n1", [], exit_code=0, finished_unix_s=200)
    textfile.write(tmp_path, "preflight", "n1", [], exit_code=0, finished_unix_s=300)
    text = (tmp_path / "gpulib.prom").read_text()
    assert sample_value(text, "gpulib_runbook_last_run_timestamp_seconds", runbook="health-report") == 200
    assert sample_value(text, "gpulib_runbook_last_run_timestamp_seconds", runbook="preflight") == 300
    assert sample_value(text, "gpulib_gpu_health", runbook="preflight") is None  # the new preflight saw no GPU
    assert text.count('gpulib_runbook_exit_code{') == 2
    assert _promtool_metrics(text).returncode == 0


def test_a_missing_directory_is_a_usage_error_before_the_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gpulib", "run", "health-report", "--evidence", str(tmp_path),
                           "--textfile", str(tmp_path / "absent")], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert done.returncode == 2 and "absent: not a folder" in done.stderr, done.stderr
    assert "runbook health-report" not in done.stdout  # nothing ran


@pytest.mark.prometheus
def test_node_exporter_serves_the_run_and_prometheus_alerts(tmp_path, recorded):
    if not shutil.which(NODE_EXPORTER):
        pytest.skip(f"{NODE_EXPORTER} not installed (Debian package 'prometheus-node-exporter'; .ci/run installs it)")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    evidence = tmp_path / "gx-node-07"
    evidence.mkdir()
    shutil.copy(recorded / REMAP_PENDING, evidence / "nvidia-smi-q.txt")
    shutil.copy(recorded / XID_119, evidence / "dmesg.txt")
    done = subprocess.run([sys.executable, "-m", "gpulib", "run", "health-report", "--evidence", str(evidence),
                           "--archive", str(tmp_path / "archive"), "--textfile", str(textdir)],
                          capture_output=True, text=True, timeout=280, cwd=REPO)
    assert done.returncode == 3, done.stdout + done.stderr  # a critical finding: no-go (gpulib.exit_codes.HARD)
    assert f"metrics:  {textdir / 'gpulib.prom'}" in done.stdout
    assert _promtool_metrics((textdir / "gpulib.prom").read_text()).returncode == 0
    (tmp_path / "prom").mkdir()
    port = free_port()
    exporter = subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                                 "--collector.textfile", f"--collector.textfile.directory={textdir}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def firing(url):
            names = {s["metric"]["alertname"] for s in query(url, 'ALERTS{alertstate="firing"}')}
            return {"GpulibRunbookNoGo", "GpulibGpuUnhealthy"} <= names

        with running_prometheus(tmp_path / "prom", {"node": [f"127.0.0.1:{port}"]}, rule_files=[RULES],
                                ready=firing, timeout_s=90) as url:
            health = query(url, 'gpulib_gpu_health{runbook="health-report"}')
            by_gpu = {s["metric"]["gpu"]: float(s["value"][1]) for s in health}
            # the A100's four GPUs (GPU 1's pending remap a warning) and the kernel log's Xid 119 GPU
            assert by_gpu == {"0": 0, "1": 1, "2": 0, "3": 0, "0000:9b:00.0": 3}, by_gpu
            (unhealthy,) = [s["metric"] for s in query(url, 'ALERTS{alertname="GpulibGpuUnhealthy"}')]
            assert unhealthy["gpu"] == "0000:9b:00.0"
            age = query(url, 'time() - gpulib_runbook_last_run_timestamp_seconds{runbook="health-report"}')
            assert 0 <= float(age[0]["value"][1]) < 300
            assert query(url, 'node_textfile_scrape_error') and \
                float(query(url, 'node_textfile_scrape_error')[0]["value"][1]) == 0
    finally:
        stop_process(exporter)
        assert exporter.returncode is not None
