"""Build hook: the wheel carries ``notebooks/``, ``runbooks/`` and ``examples/`` as package data.

The folders stay at the top of the repository, where people open and edit them (``jupyter lab
notebooks/``, ``gpulib run runbooks/incident.yaml``); a source checkout reads them there
(:mod:`gpulib.resources`). A wheel has no repository around it, so building one copies them to
``gpulib/_data/`` with the same layout. A copy rather than ``package-dir`` entries mapping them
into the package: such a mapping makes ``pip install -e .`` install setuptools' import-hook finder
instead of its one-line ``.pth`` (pyproject.toml says why that matters). Everything else about the
package is in ``pyproject.toml``.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = ("notebooks", "runbooks", "examples")  # gpulib.resources.FOLDERS (not imported: the build runs without gpulib)
SKIPPED = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc")


class BuildWithData(build_py):
    """``build_py``, then the shipped folders copied into the built package (not for editable installs)."""

    def run(self):
        super().run()
        if self.editable_mode:
            return  # an editable install reads the checkout's folders in place
        for name in SHIPPED:
            target = Path(self.build_lib, "gpulib", "_data", name)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(HERE / name, target, ignore=SKIPPED)


setup(cmdclass={"build_py": BuildWithData})
