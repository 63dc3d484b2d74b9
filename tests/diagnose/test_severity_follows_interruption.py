"""One verdict per incident: a finding's severity follows hard/soft in one place
(:func:`gpulib.findings.weigh`, :data:`gpulib.vocabulary.SEVERITY_CEILING`).

A soft root cause (the process failed, the hardware is fine) that the report paints red as
"critical" with "drain the node" tells the on-call engineer the opposite of ``gpulib diagnose``'s
exit 1 (fix and relaunch); a scheduler acting on it takes a healthy node out of service.
"""

from __future__ import annotations

import re

import pytest

from gpulib.diagnose import diagnose
from gpulib.findings import Finding, weigh
from tests.conftest import REPO

EXAMPLES = sorted(p for p in (REPO / "examples").iterdir() if p.is_dir() and p.name.startswith("incident-"))
OUT_OF_SERVICE = re.compile(r"\b(?:drain|rma\b|replace the gpu)", re.IGNORECASE)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_a_soft_incident_has_no_critical_fact_and_asks_no_drain(example):
    d = diagnose([example]).to_dict()
    root = d["root_cause"]
    by_id = {f["id"]: f for f in d["findings"]}
    if d["verdict"]["interruption"] == "soft":
        for f in d["findings"]:
            if f["id"] == root["finding"] or f.get("caused_by") == root["finding"]:
                assert f["severity"] != "critical", f
                assert not any(OUT_OF_SERVICE.search(a) for a in f["actions"]), f
    if d["verdict"]["interruption"] == "hard":
        assert by_id[root["finding"]]["severity"] == "critical"


def test_the_ib_example_names_the_port_and_what_to_check():
    d = diagnose([REPO / "examples" / "incident-ib-port-down"])
    root = d.root_cause
    assert d.interruption == "soft" and root.severity == "error"
    text = " ".join(root.actions)
    assert "cable" in text and "switch port" in text and "subnet manager" in text
    assert "mlx5_2 port 1" in d.to_text().split("ROOT CAUSE")[0]  # in the headline on top


def test_weigh_caps_a_soft_cause_and_keeps_what_to_fix():
    f = Finding("t-1", "critical", "thermal_throttling", "hot GPU", interruption="soft",
                actions=["Check the fans; drain the node if it runs hotter than its neighbours", "Drain the node",
                         "Relaunch without this node"])
    weigh(f, f.interruption)
    assert f.severity == "error"
    assert f.actions == ["Check the fans", "Relaunch without this node"]


def test_weigh_leaves_a_lower_severity_and_thermal_words_alone():
    f = Finding("t-2", "warning", "thermal_throttling", "warm", interruption="soft",
                actions=["Check thermal paste and the inlet temperature"])
    weigh(f, "soft")
    assert (f.severity, f.actions) == ("warning", ["Check thermal paste and the inlet temperature"])


def test_a_hard_root_is_critical_and_keeps_its_drain():
    f = Finding("t-3", "error", "gpu_memory_error", "Xid 48", interruption="hard", actions=["Drain the node; RMA"])
    weigh(f, "hard", root=True)
    assert (f.severity, f.actions) == ("critical", ["Drain the node; RMA"])
    g = Finding("t-4", "error", "gpu_memory_error", "Xid 94", interruption="hard")
    assert weigh(g, "hard").severity == "error"  # only the root cause is raised
