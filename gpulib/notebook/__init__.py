"""The notebook face of gpulib: the only package that imports ipywidgets and plotly.

Runbook notebooks call it as ``from gpulib.notebook import face as nbk, steps as checks,
figures as plots``:

- :mod:`~gpulib.notebook.face` — what a notebook cell calls (open evidence, show, record).
- :mod:`~gpulib.notebook.tables` — the parsed evidence as pandas tables.
- :mod:`~gpulib.notebook.steps` — each step's findings: views over the diagnosis plus the step's
  threshold checks.
- :mod:`~gpulib.notebook.figures` (and ``figures_nccl``, ``figures_fleet``) — plotly figures.
- :mod:`~gpulib.notebook.widgets`, :mod:`~gpulib.notebook.display` — interactive and headless display.
- :mod:`~gpulib.notebook.remediation`, :mod:`~gpulib.notebook.drill` — guarded commands, training.
"""
