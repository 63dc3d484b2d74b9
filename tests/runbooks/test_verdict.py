"""One incident, one verdict: the runbook's exit follows the diagnosis of the evidence it read."""

from __future__ import annotations

from gpulib import exit_codes
from gpulib.diagnose import diagnose
from gpulib.runbooks.report_view import banner, merge_facts
from gpulib.runbooks.verdict import run_verdict
from tests.conftest import REPO

OOM = REPO / "examples" / "incident-cuda-oom"


def _as_steps_record(diagnosis: dict) -> list[dict]:
    """The findings the incident steps record: the diagnosis's own, by id, with their severities."""
    return [dict(f, step="02_gpu_memory_oom") for f in diagnosis["findings"]]


def test_a_soft_root_cause_is_exit_1_in_diagnose_and_in_the_runbook():
    doc = diagnose([OOM]).to_dict()
    assert doc["verdict"]["interruption"] == "soft"
    findings = _as_steps_record(doc)
    # the OOM itself is an error to fix, never red "critical" (gpulib.findings.weigh), and, the
    # diagnosis's own event, it does not vote for a no-go
    assert not any(f["severity"] == "critical" for f in findings)
    assert [f["severity"] for f in findings if f["id"] == doc["root_cause"]["finding"]] == ["error"]
    verdict = run_verdict([True] * 8, findings, doc)
    assert verdict.code == exit_codes.for_interruption(doc["verdict"]["interruption"]) == exit_codes.SOFT
    assert verdict.blocking == []
    facts = merge_facts(findings, doc["root_cause"]["finding"])
    shown = banner(verdict.code, "soft", [], facts, basis=verdict.basis, blocking_ids=verdict.blocking)
    assert shown.state == "warn" and "the diagnosis" in shown.reason


def test_a_steps_own_blocking_fact_makes_it_no_go_and_is_named():
    doc = diagnose([OOM]).to_dict()
    own = {"id": "no-valid-checkpoint", "severity": "critical", "category": "none",
           "title": "no checkpoint passes verification: nothing to resume from", "step": "07_checkpoint_resume"}
    findings = [*_as_steps_record(doc), own]
    verdict = run_verdict([True] * 8, findings, doc)
    assert verdict.code == exit_codes.HARD and verdict.blocking == ["no-valid-checkpoint"]
    shown = banner(verdict.code, "no-go", [], merge_facts(findings), basis=verdict.basis,
                   blocking_ids=verdict.blocking)
    assert shown.state == "nogo" and "nothing to resume from" in shown.reason


def test_each_interruption_maps_to_its_exit_and_a_failed_step_wins():
    for interruption, code in (("hard", 3), ("soft", 1), ("unknown", 4), ("none", 0)):
        doc = {"verdict": {"interruption": interruption}, "findings": []}
        assert run_verdict([True], [], doc).code == code
    none = {"verdict": {"interruption": "none"}, "findings": []}
    warning = {"id": "drift", "severity": "warning", "category": "none", "title": "t"}
    assert run_verdict([True], [warning], none).code == exit_codes.SOFT
    assert run_verdict([True, False], [], none).code == exit_codes.RUN_FAILED


def test_without_a_diagnosis_the_severities_decide():
    error = {"id": "preflight-verdict", "severity": "critical", "category": "none", "title": "NO-GO"}
    assert run_verdict([True], [error], None).code == exit_codes.HARD
    assert run_verdict([True], [], None).code == exit_codes.OK
