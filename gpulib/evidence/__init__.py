"""The evidence of an incident as gpulib reads it, below every rule and face.

- :mod:`~gpulib.evidence.bundle`: the on-disk bundle ``gpulib collect`` writes (``gpulib-evidence/1``).
- :mod:`~gpulib.evidence.kinds`: every kind of file, and the groups read together (GPU state,
  GPU series, kernel, job).
- :mod:`~gpulib.evidence.gather`: walk, detect, parse and place every file of bundles, folders
  or files (:func:`~gpulib.evidence.gather.gather` -> :class:`~gpulib.evidence.gather.Inputs`).
- :mod:`~gpulib.evidence.digest` and :mod:`~gpulib.evidence.record_summary`: a node's evidence
  carried as a digest (parsed once on the node), and the summaries of its quiet files.
- :mod:`~gpulib.evidence.thresholds`: the numbers the rules judge with (the notebooks' sliders).

The rules that read it live in :mod:`gpulib.diagnose`; the faces open it as one
:class:`gpulib.diagnose.cache.Evidence` (read once per process, with the run's ``--tz``, re-judged
when a threshold changes).
"""
