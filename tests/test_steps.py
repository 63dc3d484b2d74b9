"""The one list of runbook steps (gpulib.resources.step_names: the numbered notebooks) and who
follows it: the shipped runbooks, the triage's "what next", the drill."""

from gpulib import resources
from gpulib.notebook import steps
from gpulib.notebook.cli import TRIAGE, next_steps
from gpulib.runbooks.spec import runbook_steps

RUNBOOKS = ("incident", "preflight", "health-report")


def test_every_step_runs_in_exactly_one_shipped_runbook_in_number_order():
    by_runbook = {name: runbook_steps(name) for name in RUNBOOKS}
    assert sorted(s for ids in by_runbook.values() for s in ids) == resources.step_names(), by_runbook
    for name, ids in by_runbook.items():
        assert ids == sorted(ids), name


def test_what_next_names_steps_and_the_drill_opens_the_incident_steps_after_triage():
    assert set(steps.NEXT_NOTEBOOK.values()) <= set(resources.step_names())
    assert TRIAGE == resources.step_names()[0] == runbook_steps("incident")[0]
    assert next_steps() == runbook_steps("incident")[1:]
