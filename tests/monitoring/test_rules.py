"""The alert rules and the dashboard, checked offline: promtool's syntax check and unit tests
(``monitoring/prometheus/alerts_test.yml``), and the contract every alert keeps (severity,
summary, description, a runbook link to a notebook that exists)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO

RULES = REPO / "monitoring" / "prometheus" / "alerts.yml"
RULES_TEST = REPO / "monitoring" / "prometheus" / "alerts_test.yml"
DASHBOARD = REPO / "monitoring" / "grafana" / "gpu-incident-dashboard.json"
PROMTOOL = "/usr/bin/promtool"


def _alerts() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]


def _promtool(*args: str) -> subprocess.CompletedProcess:
    if not shutil.which(PROMTOOL):
        pytest.skip(f"{PROMTOOL} not installed (Debian package 'prometheus')")
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, cwd=RULES.parent)


def test_promtool_checks_the_rules():
    done = _promtool("check", "rules", str(RULES))
    rules = sum(len(g["rules"]) for g in yaml.safe_load(RULES.read_text())["groups"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {rules} rules found" in done.stdout


def test_promtool_unit_tests_pass():
    done = _promtool("test", "rules", str(RULES_TEST))
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def test_the_example_prometheus_config_loads_the_rules():
    done = _promtool("check", "config", str(RULES.parent / "prometheus.example.yml"))
    assert done.returncode == 0 and "SUCCESS: 1 rule files found" in done.stdout, done.stdout + done.stderr


def test_every_alert_has_a_unit_test_that_expects_it_to_fire():
    tested = {t["alertname"] for case in yaml.safe_load(RULES_TEST.read_text())["tests"]
              for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
    assert {a["alert"] for a in _alerts()} - tested == set()


def test_every_alert_names_severity_summary_description_and_an_existing_runbook():
    for alert in _alerts():
        assert alert["labels"]["severity"] in ("critical", "warning"), alert["alert"]
        notes = alert["annotations"]
        assert notes["summary"] and len(notes["description"]) > 80, alert["alert"]
        m = re.fullmatch(r'\{\{ or \$externalLabels\.gpulib_runbooks "notebooks" \}\}/(\S+\.ipynb)', notes["runbook_url"])
        assert m and (REPO / "notebooks" / m[1]).is_file(), (alert["alert"], notes["runbook_url"])


def test_every_dcgm_expression_drops_blank_sentinels():
    """A DCGM blank (2147483632.. / 1.4e14.. / 9.2e18..) must never look like a hot GPU or an Xid."""
    for alert in _alerts():
        expr = alert["expr"]
        if "DCGM_FI_" in expr:
            assert "< 2147483632" in expr or "< 140737488355328" in expr or "< 65536" in expr, alert["alert"]


def test_the_dashboard_has_the_incident_panels():
    board = json.loads(DASHBOARD.read_text())
    titles = {p["title"] for p in board["panels"]}
    for wanted in ("GPU temperature", "SM clock vs max", "Power vs limit", "Framebuffer memory used", "Throttle reasons",
                   "Training silence (gpulib watch)"):
        assert wanted in titles
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for metric in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED",
                   "DCGM_FI_DEV_THERMAL_VIOLATION", "gpulib_watch_seconds_since_last_line"):
        assert metric in exprs
    assert any("DCGM_FI_DEV_XID_ERRORS" in a["expr"] for a in board["annotations"]["list"])
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["host"]["allValue"] == ".*"
    sources = [p["datasource"] for p in board["panels"]] + [t["datasource"] for p in board["panels"] for t in p["targets"]]
    sources += [a["datasource"] for a in board["annotations"]["list"]]
    assert all(s == {"type": "prometheus", "uid": "${datasource}"} for s in sources)
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in board["panels"])
