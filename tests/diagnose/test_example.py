"""The bundled example incident (examples/incident-gpu-fell-off-bus) is diagnosed right."""

from __future__ import annotations

import json

from gpulib.cli import main
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "incident-gpu-fell-off-bus"


def test_example_json(capsys):
    code = main(["diagnose", str(EXAMPLE), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    rc = doc["root_cause"]
    assert (doc["verdict"]["interruption"], doc["verdict"]["category"]) == ("hard", "gpu_fell_off_bus")
    assert (rc["host"], rc["gpu_index"], rc["gpu_pci"], rc["rank"], rc["time"]) == \
        ("gx-a800-102", 2, "0000:4f:00.0", 10, "2026-01-17T04:51:12Z")
    assert code == 3
    timeouts = next(f for f in doc["findings"] if f["id"].startswith("nccl-timeout"))
    assert timeouts["caused_by"] == rc["finding"] and "15 rank(s)" in timeouts["title"]
    kinds = {i["path"]: i["kind"] for i in doc["inputs"]}
    readme = next(i for i in doc["inputs"] if i["path"] == "README.md")
    assert kinds.pop("README.md") == "documentation" and "problems" not in readme  # listed, not parsed or flagged
    assert set(kinds.values()) == {"training_log", "kernel_log", "nvidia_smi_table", "checkpoint"}
    assert doc["checkpoints"]["resume_from"] == "checkpoints/ckpt_044000.pt"  # the demo shows the resume step


def test_example_text_reads_root_cause_first(capsys):
    main(["diagnose", str(EXAMPLE)])
    text = capsys.readouterr().out
    assert text.startswith("HARD failure - gpu_fell_off_bus")
    assert text.index("ROOT CAUSE") < text.index("DISCOUNTED AS CASCADE") < text.index("TIMELINE")
    assert "gx-a800-102/journal-kernel.txt:20" in text  # the Xid line, by file and line
    assert "rank(s) 10 never arrived" in text
