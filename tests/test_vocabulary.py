"""One vocabulary (gpulib/vocabulary.py) for the diagnosis, the Xid catalog and DESIGN.md."""

import json
import re

import pytest

from gpulib.catalog import load_catalog
from gpulib.diagnose import diagnose
from gpulib.vocabulary import CATEGORIES, SEVERITIES
from tests.conftest import REPO, SHARED


def test_design_lists_exactly_these_categories():
    design = SHARED / "DESIGN.md"
    if not design.is_file():
        pytest.skip(f"{design} not found (clone with ../shared beside the repo)")
    sentence = design.read_text().split("Vocabulary for `category` (exactly these):", 1)[1].split(".\n", 1)[0]
    assert tuple(re.findall(r"`([a-z_]+)`", sentence)) == CATEGORIES


def test_every_xid_catalog_category_is_in_the_vocabulary():
    assert {info.category for info in load_catalog().values()} <= set(CATEGORIES)


def test_the_bundled_example_speaks_the_vocabulary():
    report = diagnose([REPO / "examples" / "incident-gpu-fell-off-bus"]).to_dict()
    assert report["verdict"]["category"] == "gpu_fell_off_bus"
    assert {f["category"] for f in report["findings"]} <= set(CATEGORIES)
    assert {f["severity"] for f in report["findings"]} <= set(SEVERITIES)
    json.dumps(report)  # the contract is JSON
