"""What gpulib knows about the files of an incident's evidence, below every rule and face.

:mod:`gpulib.evidence.kinds` names every kind of file and the groups the rules and the faces read
together (GPU state, GPU series, kernel, job).
"""
