"""Where the files gpulib ships beside its code live: the notebooks, the runbooks and the examples.

Why one locator: ``gpulib run incident``, ``gpulib drill``, ``gpulib notebooks`` and a notebook's
default evidence all need these folders, and they must be found the same way whether gpulib runs
from a source checkout or from an installed wheel. Code that guessed ``Path(__file__).parents[2]``
worked in a checkout and found nothing in ``site-packages``.

- **Installed wheel**: the folders are package data under ``gpulib/_data/`` (``setup.py`` copies the
  repository's top-level ``notebooks/``, ``runbooks/`` and ``examples/`` there when it builds).
- **Source checkout** (``pip install -e .``, ``make``, or ``PYTHONPATH``): there is no
  ``gpulib/_data/``; the folders are the checkout's top-level ones, the files people edit.

Both keep the same layout (a runbook's ``notebook_dir: ../notebooks``, a notebook's default
``examples/...`` evidence), so nothing else needs to know which case it is in.
"""

from __future__ import annotations

from pathlib import Path

#: The folder inside the installed package that holds the shipped folders (see ``setup.py``).
PACKAGED = "_data"
NOTEBOOKS = "notebooks"
RUNBOOKS = "runbooks"
EXAMPLES = "examples"
#: Every folder shipped as package data.
FOLDERS = (NOTEBOOKS, RUNBOOKS, EXAMPLES)


def data_root() -> Path:
    """The folder holding ``notebooks/``, ``runbooks/`` and ``examples/`` (package data or checkout)."""
    from importlib.resources import files  # here: most commands never need it (~2 ms of imports)

    package = files("gpulib")
    if not isinstance(package, Path):
        raise RuntimeError(f"gpulib is imported from {package}, not from a folder; install the wheel with pip "
                           "(the notebooks, runbooks and examples must be files a kernel can open)")
    packaged = package / PACKAGED
    return packaged if packaged.is_dir() else package.parent


def notebooks_dir() -> Path:
    return data_root() / NOTEBOOKS


def runbooks_dir() -> Path:
    return data_root() / RUNBOOKS


def examples_dir() -> Path:
    return data_root() / EXAMPLES


def step_names() -> list[str]:
    """Every runbook step, in order: the numbered notebooks ``notebooks/NN_name.ipynb``.

    The one list of steps: a step is its notebook file, and its number orders it. The runbooks
    (``runbooks/*.yaml``) say which steps run together; the drill, the tests and the docs take
    the steps from here and from the runbooks, never from a list of their own (docs/EXTENDING.md)."""
    return sorted(p.stem for p in notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
