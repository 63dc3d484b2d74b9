"""The default thresholds are written once (gpulib.evidence.thresholds); the literals that papermill
parameters and runbooks must repeat agree with them."""

from dataclasses import fields

import yaml
from papermill.inspection import inspect_notebook

from gpulib.evidence.thresholds import Thresholds
from tests.conftest import REPO


def test_notebook_and_runbook_parameters_repeat_the_one_default():
    defaults = {f.name: getattr(Thresholds(), f.name) for f in fields(Thresholds)}
    seen = set()
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        for name, parameter in inspect_notebook(str(notebook)).items():
            if name in defaults:
                assert float(parameter["default"]) == defaults[name], f"{notebook.name}: {name}"
                seen.add(name)
    for runbook in sorted((REPO / "runbooks").glob("*.yaml")):
        spec = yaml.safe_load(runbook.read_text())
        for name, value in (spec.get("parameters") or {}).items():
            if name in defaults:
                assert float(value) == defaults[name], f"{runbook.name}: {name}"
    assert seen == set(defaults), "every threshold is some notebook's parameter"
