"""Environment variables that ``gpulib run`` sets in the kernels of its notebooks.

They change *how* a step works, never *what* it finds - except :data:`TZ`, which carries the
run's ``--tz`` as ``gpulib diagnose --tz`` takes it: a notebook opened by hand, or run with
plain papermill, sees none of them and does everything itself (``open_evidence(path, tz=...)``). Kept here, apart from the heavy
modules on either side, so that the runner does not import pandas or plotly to name them.
"""

#: Path of the evidence the runner read once for all steps (:mod:`gpulib.diagnose.cache`).
EVIDENCE_CACHE = "GPULIB_EVIDENCE_CACHE"
#: ``gpulib run --tz ZONE``: the zone of timestamps printed without one (``dmesg -T``, nvidia-smi),
#: for every step's :func:`gpulib.notebook.tables.open_evidence`, as ``gpulib diagnose --tz``
#: reads it. Unset: the bundle's zone, else UTC. Recorded in the run's manifest.
TZ = "GPULIB_TZ"
#: "1": record figures as plotly JSON only. The run's offline report redraws every figure from
#: that JSON with one shared copy of plotly.js (:mod:`gpulib.runbooks.report`), and JupyterLab
#: shows it as it is; plotly's ``notebook`` renderer would put 4.8 MB of plotly.js into every
#: archived notebook (sent by the kernel, parsed and saved by the runner, dropped by the report)
#: and its renderer machinery imports nbformat and jsonschema in every kernel.
FIGURES_AS_JSON = "GPULIB_FIGURES_AS_JSON"
