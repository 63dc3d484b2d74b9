"""The rule registry: every rules module listed once, phases in order, kinds that exist."""

from pathlib import Path

import gpulib.diagnose
from gpulib.diagnose.registry import PHASES, RULES
from gpulib.evidence import kinds


def test_every_rules_module_is_registered_once():
    modules = sorted(p.stem for p in Path(gpulib.diagnose.__file__).parent.glob("rules_*.py"))
    registered = [rule.run.__module__.rsplit(".", 1)[1] for rule in RULES]
    assert sorted(registered) == modules, "add the new rules module to gpulib/diagnose/registry.py"
    assert len({rule.name for rule in RULES}) == len(RULES)
    assert all(rule.run.__name__ == "run" for rule in RULES)


def test_phases_never_go_back_and_kinds_are_known():
    order = [PHASES.index(rule.phase) for rule in RULES]
    assert order == sorted(order)
    assert all(set(rule.kinds) <= set(kinds.PARSED) for rule in RULES)
