"""gpulib: the runbook for interrupted multi-GPU training.

Freeze the scene (``gpulib.collect``), name the first failure (``gpulib.diagnose``), find the
newest valid checkpoint (``gpulib.checkpoints``), test the fabric before relaunch
(``gpulib.nccl``), and run it all as archived notebooks (``gpulib.runbooks``).
"""

__version__ = "0.1.0"

#: The level the ``gpulib`` command line asked for (``logging.INFO`` with ``-v``), applied by
#: :mod:`gpulib.logs` when the first module that logs is imported: ``logging`` costs ~5 ms of
#: start-up, and a quick command such as ``gpulib ckpt inspect`` never logs.
cli_log_level: int | None = None


def __getattr__(name: str):
    if name == "logger":  # the package's logger (with its NullHandler), made on first use
        from gpulib.logs import logger

        return logger
    raise AttributeError(f"module 'gpulib' has no attribute {name!r}")
