"""gpulib: the runbook for interrupted multi-GPU training.

Freeze the scene (``gpulib.collect``), name the first failure (``gpulib.diagnose``), find the
newest valid checkpoint (``gpulib.checkpoints``), test the fabric before relaunch
(``gpulib.nccl``), and run it all as archived notebooks (``gpulib.runbooks``).
"""

import logging

__version__ = "0.1.0"

#: The one logger of the package; modules use ``logging.getLogger(__name__)`` below it.
logger = logging.getLogger("gpulib")
logger.addHandler(logging.NullHandler())
