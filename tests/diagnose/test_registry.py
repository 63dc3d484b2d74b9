"""The rule registry: every rules module listed once, phases in order, kinds that exist."""

import pkgutil

import gpulib.diagnose.rules
from gpulib.diagnose.rules import PHASES, RULES
from gpulib.evidence import kinds


def test_every_rules_module_is_registered_once():
    modules = sorted(m.name for m in pkgutil.iter_modules(gpulib.diagnose.rules.__path__))
    registered = [rule.run.__module__.removeprefix("gpulib.diagnose.rules.") for rule in RULES]
    assert sorted(registered) == modules, "add the new rules module to RULES in gpulib/diagnose/rules/__init__.py"
    assert len({rule.name for rule in RULES}) == len(RULES)
    assert all(rule.run.__name__ == "run" for rule in RULES)


def test_phases_never_go_back_and_kinds_are_known():
    order = [PHASES.index(rule.phase) for rule in RULES]
    assert order == sorted(order)
    assert all(set(rule.kinds) <= set(kinds.PARSED) for rule in RULES)
