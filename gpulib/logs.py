"""The package's logger, imported only by the modules that log (``logging`` is not free at start-up).

``get_logger(__name__)`` is ``logging.getLogger(__name__)`` after the ``gpulib`` logger got its
``NullHandler`` (a library stays quiet unless the application configures logging) and, under the
``gpulib`` command line, after the root logger got the command line's format and level.
"""

from __future__ import annotations

import logging

import gpulib

#: The one logger of the package; modules use ``get_logger(__name__)`` below it.
logger = logging.getLogger("gpulib")
if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
    logger.addHandler(logging.NullHandler())


def configure_cli() -> None:
    """Apply the level the ``gpulib`` command line asked for (:data:`gpulib.cli_log_level`)."""
    if gpulib.cli_log_level is not None:
        logging.basicConfig(level=gpulib.cli_log_level, format="gpulib: %(levelname)s: %(message)s")


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


configure_cli()
