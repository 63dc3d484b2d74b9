"""The numbers a diagnosis judges with, and the knobs the notebooks' sliders turn.

One rule engine: a notebook step that lets the engineer ask "and at 80 °C?" does not re-judge the
evidence with a rule of its own; it asks the diagnosis again with other thresholds
(:func:`gpulib.diagnose.diagnose` ``thresholds=``), so the step and the diagnosis can never disagree
on what an event is called or how bad it is. The defaults are the runbook's.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

#: The default "about to throttle" temperature: written once here; the notebooks' and the health
#: report runbook's parameters repeat it as literals (papermill parameters must be), and
#: ``tests/test_thresholds_defaults.py`` keeps them equal to this.
TEMP_LIMIT_C = 85.0
IMBALANCE_GIB = 2.0


@dataclass(frozen=True)
class Thresholds:
    """``imbalance_gib``: a GPU using this much more memory than its peers on one host (data-parallel
    ranks hold the same model) is an outlier worth a look. ``temp_limit_c``: a GPU at or above this
    temperature without a slowdown reason yet is about to throttle."""

    imbalance_gib: float = IMBALANCE_GIB
    temp_limit_c: float = TEMP_LIMIT_C

    @classmethod
    def of(cls, **values: float) -> Thresholds:
        """From notebook parameters; names that are not thresholds are refused (a typo would
        otherwise silently judge with the default)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown threshold(s) {unknown}; known: {sorted(known)}")
        return cls(**values)
