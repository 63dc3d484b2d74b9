"""Nightly health reports record a GPU inventory, and `gpulib archive diff` reads it: a GPU that
vanished between two nights and an ECC counter that grew are both reported (exit 1).

Night A is a recorded `nvidia-smi -q` of an 8-GPU H100 node (read in place from the corpus);
night B is the same output with GPU 0000:3B:00.0's aggregate uncorrectable DRAM ECC count raised
to 4 and the block of GPU 0000:DB:00.0 removed, as if it had dropped off the bus.
"""

from __future__ import annotations

import json
import re

import pytest

from gpulib.cli import main
from gpulib.runbooks import run_runbook
from tests.conftest import INCIDENTS, REPO

pytestmark = pytest.mark.notebook

SMI_Q = INCIDENTS / "case-06-ecc-dbe-truncated-ckpt" / "input" / "nvidia-smi-q_after_16-41.txt"


def _blocks(text: str) -> tuple[str, list[str]]:
    """The header and one text block per GPU (each starts with its 'GPU 00000000:..' line)."""
    parts = re.split(r"(?m)^(?=GPU [0-9A-Fa-f]{8}:)", text)
    return parts[0], parts[1:]


def _night_b(text: str) -> str:
    header, blocks = _blocks(text)
    kept = []
    for block in blocks:
        if block.startswith("GPU 00000000:DB:00.0"):
            continue  # dropped off the bus
        if block.startswith("GPU 00000000:3B:00.0"):
            volatile, sep, aggregate = block.partition("        Aggregate\n")
            aggregate = aggregate.replace("DRAM Uncorrectable            : 0", "DRAM Uncorrectable            : 4", 1)
            block = volatile + sep + aggregate
        kept.append(block)
    return header.replace("Attached GPUs                             : 8",
                          "Attached GPUs                             : 7") + "".join(kept)


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory):
    if not SMI_Q.is_file():
        pytest.skip(f"{SMI_Q} not available")
    root = tmp_path_factory.mktemp("nights")
    text = SMI_Q.read_text(encoding="utf-8")
    runs = []
    for night, content in (("a", text), ("b", _night_b(text))):
        node = root / f"night-{night}" / "h100-node-07"
        node.mkdir(parents=True)
        (node / "nvidia-smi-q.txt").write_text(content, encoding="utf-8")
        runs.append(run_runbook("health-report", values={"evidence": str(node.parent)},
                                archive_root=root / "archive", cwd=REPO))
    return root / "archive", runs


def test_the_health_report_records_every_gpu_with_its_counters(two_nights):
    _, (night_a, night_b) = two_nights
    inventories = [[f for f in run.findings if f["id"] == "gpu-inventory"] for run in (night_a, night_b)]
    assert [len(i) for i in inventories] == [1, 1] and inventories[0][0]["severity"] == "info"
    gpus_a, gpus_b = (i[0]["gpus"] for i in inventories)
    assert [g["pci_bus_id"] for g in gpus_a] == ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
                                                 "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0"]
    assert {g["host"] for g in gpus_a} == {"h100-node-07"}
    assert all(g["uuid"].startswith("GPU-") and g["name"] == "NVIDIA H100 80GB HBM3" for g in gpus_a)
    bb = next(g for g in gpus_a if g["pci_bus_id"] == "0000:bb:00.0")
    assert (bb["ecc_volatile_dbe"], bb["ecc_aggregate_dbe"], bb["lost"]) == (1, 1, False)  # as the file says
    assert len(gpus_b) == 7
    assert next(g for g in gpus_b if g["pci_bus_id"] == "0000:3b:00.0")["ecc_aggregate_dbe"] == 4


def test_archive_diff_reports_the_vanished_gpu_and_the_grown_counter(two_nights, capsys):
    archive, _ = two_nights
    code = main(["archive", "diff", "health-report~1", "health-report~0", "--archive", str(archive), "--format", "json"])
    diff = json.loads(capsys.readouterr().out)
    assert code == 1
    assert len(diff["vanished_gpus"]) == 1 and "0000:db:00.0" in diff["vanished_gpus"][0]
    assert len(diff["grown_counters"]) == 1
    assert "0000:3b:00.0" in diff["grown_counters"][0] and "ecc_aggregate_dbe 0 -> 4" in diff["grown_counters"][0]
    assert main(["archive", "diff", "health-report~1", "health-report~1", "--archive", str(archive)]) == 0
