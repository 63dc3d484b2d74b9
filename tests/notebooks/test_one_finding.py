"""One event, one finding: every notebook step check and the diagnosis agree on id, severity and category.

Runs each step's checks, with the notebooks' default thresholds, on every shared incident and on
every bundled example, the way the notebooks combine them, and holds what a step records against
the diagnosis of the same evidence. A step that re-judged an event the diagnosis already reports
(the same GPU's Xid, throttle or ECC error) would show up here as a second id or another severity.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulib.notebook import steps
from gpulib.notebook.tables import open_evidence

REPO = Path(__file__).resolve().parents[2]
SHARED_INCIDENTS = REPO.parent / "shared" / "corpus" / "incidents"
CASES = sorted(p for p in (REPO / "examples").iterdir() if p.is_dir()) + (
    sorted(p for p in SHARED_INCIDENTS.iterdir() if p.is_dir()) if SHARED_INCIDENTS.is_dir() else [])


def _step_findings(ev) -> dict[str, list[dict]]:
    """What each notebook step records, as its result cell computes it (default parameters)."""
    d = ev.diagnosis
    states = ev.gpu_states()
    return {
        "00_triage": steps.from_diagnosis(d),
        "01_kernel_xid": steps.kernel_findings(d),
        "02_gpu_memory_oom": steps.combine(d, ["cuda_oom", "host_oom"], steps.held_findings(d)),
        "03_nccl_network": steps.combine(d, ["network_fabric", "driver_mismatch"], steps.nccl_findings(ev.ranks(), d)),
        "04_thermal_power": steps.combine(d, steps.THERMAL_CATEGORIES),
        "05_data_loading": steps.combine(d, ["data_pipeline_stall"], steps.step_findings(ev.training_steps())),
        "06_driver_cuda_ecc_topology": steps.combine(
            d, ["driver_mismatch", "gpu_memory_error", "nvlink_error", "gpu_firmware_error"],
            steps.hardware_findings(d), steps.topology_findings(ev.topology()),
            steps.version_findings(ev.software_versions())),
        "08_preflight": steps.self_check(d, states),
        "09_health_report": steps.health_findings(d),
    }


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_each_event_has_one_id_severity_and_category_in_every_step(case):
    ev = open_evidence(case)
    diagnosis = {f["id"]: f for f in ev.diagnosis["findings"]}
    by_event = {key: f for f in diagnosis.values() for key in steps.event_keys(f)}
    recorded: dict[str, tuple] = {}
    for step, found in _step_findings(ev).items():
        for f in found:
            same = diagnosis.get(f["id"])
            if same is not None:
                assert (f["severity"], f["category"], f["title"]) == (same["severity"], same["category"], same["title"]), (
                    step, f["id"])
            else:  # a threshold check's own finding: about no event the diagnosis reports
                clash = [by_event[k]["id"] for k in steps.event_keys(f) if k in by_event]
                assert not clash, f"{step}: {f['id']} is the diagnosis's {clash[0]}"
            # across steps too: one id is one severity and category
            assert recorded.setdefault(f["id"], (f["severity"], f["category"])) == (f["severity"], f["category"]), (
                step, f["id"])


def test_the_shared_incidents_are_part_of_the_check():
    if not SHARED_INCIDENTS.is_dir():
        pytest.skip(f"{SHARED_INCIDENTS} is absent (the shared corpus lies beside the repository)")
    assert len([c for c in CASES if c.parent == SHARED_INCIDENTS]) >= 7


def test_a_slider_asks_the_diagnosis_again_and_the_default_reads_it_once():
    ev = open_evidence(REPO / "examples" / "incident-gpu-fell-off-bus")
    assert ev.diagnosis_at() is ev.diagnosis and ev.diagnosis_at(temp_limit_c=85.0) is ev.diagnosis
    cooler = ev.diagnosis_at(temp_limit_c=20.0)  # every GPU with a reading is now "hot"
    assert cooler is ev.diagnosis_at(temp_limit_c=20.0)  # asked once per threshold
    hot = [f for f in cooler["findings"] if f["id"].startswith("hot")]
    assert hot and all(f["category"] == "thermal_throttling" and f["role"] == "context" for f in hot)
    assert not [f for f in ev.diagnosis["findings"] if f["id"].startswith("hot")]
    with pytest.raises(ValueError, match="unknown threshold"):
        ev.diagnosis_at(temp_limt_c=20.0)
