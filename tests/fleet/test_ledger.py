"""The GPU ledger: repeat offenders and ECC trends across incidents, keyed by GPU UUID."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from gpulib.diagnose import diagnose
from gpulib.fleet.ledger import build_ledger
from gpulib.fleet.simulate import GPU_BUSES, simulate_incident
from gpulib.runbooks.archive import FINDINGS_FORMAT, RUN_FORMAT, ArchiveWriter


def _gpu_uuid(host: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{host}-{index}')}"  # what the simulator prints


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """Two Xid 79 incidents on the same GPU (same seed = same culprit) and an ECC capture of the job."""
    root = tmp_path_factory.mktemp("ledger")
    docs = []
    for night in (1, 2):
        incident = simulate_incident(root / f"incident-{night}", 4, "xid79", seed=7)
        path = root / f"diagnosis-{night}.json"
        path.write_text(json.dumps(diagnose([incident.root]).to_dict()))
        docs.append(path)
    capture = simulate_incident(root / "capture", 4, "ecc_dbe", seed=7)
    return root, docs, capture


def test_repeat_root_cause_is_replaced_with_its_evidence(history):
    _root, docs, capture = history
    ledger = build_ledger([*docs, capture.root])
    key = _gpu_uuid(capture.host, capture.gpu_index)
    gpu = ledger.gpus[key]
    assert gpu.pci == f"0000:{GPU_BUSES[capture.gpu_index]}:00.0" and gpu.hosts == {capture.host}
    assert len(gpu.hardware_root_causes) == 2 and gpu.recommendation == "replace"
    assert any("hardware root cause of 2 incidents" in r and str(docs[0]) in r for r in gpu.reasons)
    assert ledger.ranked()[0] is gpu
    healthy = ledger.gpus[_gpu_uuid(capture.host, (capture.gpu_index + 1) % 8)]
    assert healthy.recommendation == "ok" and not healthy.events
    assert f"REPLACE  {key}" in ledger.to_text()


def test_one_root_cause_is_watch(history):
    _root, docs, capture = history
    ledger = build_ledger([docs[0]])
    (gpu,) = ledger.gpus.values()  # no evidence: keyed by host and PCI
    assert gpu.key == f"{capture.host}/0000:{GPU_BUSES[capture.gpu_index]}:00.0"
    assert gpu.recommendation == "watch"


def test_growing_uncorrectable_counts_mean_replace(history, tmp_path):
    _root, _docs, capture = history
    text = (capture.root / capture.host / "nvidia-smi" / "q.txt").read_text()
    for night, (stamp, dbe) in enumerate((("Tue Feb 10 03:26:07 2026", 2), ("Tue Feb 17 03:26:07 2026", 5)), 1):
        later = re.sub(r"(?m)^(Timestamp\s+: ).*$", rf"\g<1>{stamp}", text)
        later = re.sub(r"(DRAM Uncorrectable\s+: )2", rf"\g<1>{dbe}", later)
        folder = tmp_path / f"night-{night}" / capture.host
        folder.mkdir(parents=True)
        (folder / "nvidia-smi-q.txt").write_text(later)
    ledger = build_ledger([tmp_path / "night-1", tmp_path / "night-2"])
    gpu = ledger.gpus[_gpu_uuid(capture.host, capture.gpu_index)]
    assert [s["ecc_aggregate_dbe"] for s in sorted(gpu.samples, key=lambda s: s["time"])] == [2, 5]
    assert gpu.recommendation == "replace"
    assert any("aggregate uncorrectable ECC errors keep coming: 2 at 2026-02-10T03:26:07" in r for r in gpu.reasons)


def test_run_archive_findings_count_the_root_cause(history, tmp_path):
    _root, _docs, capture = history
    writer = ArchiveWriter(tmp_path / "archive", "incident", host="oncall")
    cause = {"id": "xid48-1", "severity": "critical", "category": "gpu_memory_error", "title": "Xid 48",
             "host": capture.host, "gpu_index": capture.gpu_index, "rank": None, "time": "2026-02-10T03:12:07Z"}
    cascade = {"id": "nccl-timeout-1", "severity": "error", "category": "gpu_memory_error", "title": "timeouts",
               "host": None, "gpu_index": None, "caused_by": "xid48-1"}
    writer.write_json("findings.json", {"format": FINDINGS_FORMAT, "runbook": "incident",
                                        "findings": [cause, cascade, cause]})
    run = writer.finish({"format": RUN_FORMAT, "runbook": "incident", "started_at": "2026-02-10T04:00:00Z",
                         "cwd": str(tmp_path), "parameters": {"cli": {"evidence": str(capture.root)}}})
    for path in (tmp_path / "archive", tmp_path / "archive" / "incident", run):
        ledger = build_ledger([path])
        gpu = ledger.gpus[_gpu_uuid(capture.host, capture.gpu_index)]  # host+index -> UUID via the evidence
        assert len(gpu.root_causes) == 1 and gpu.root_causes[0].category == "gpu_memory_error"
        assert gpu.recommendation == "watch"
        assert gpu.reasons[0].startswith("hardware root cause once: 2026-02-10T03:12:07Z gpu_memory_error")
        assert "2 aggregate uncorrectable ECC errors (latest capture)" in gpu.reasons


def test_bad_inputs_are_named(tmp_path):
    (tmp_path / "other.json").write_text(json.dumps({"schema": "something/1"}))
    (tmp_path / "broken.json").write_text("{")
    ledger = build_ledger([tmp_path / "missing", tmp_path / "other.json", tmp_path / "broken.json"])
    assert not ledger.gpus and not ledger.sources
    assert [p.split(": ", 1)[1][:12] for p in ledger.problems] == ["no such file", "not a gpulib", "not readable"]


def test_indexes_of_a_snapshot_with_a_lost_gpu_are_not_trusted(tmp_path):
    """nvidia-smi renumbers the GPUs after one is lost: index g is then another board."""
    incident = simulate_incident(tmp_path / "inc", 3, "xid79", seed=5)
    g = incident.gpu_index
    doc = {"schema": "gpulib.diagnosis/1", "root_cause": None,
           "findings": [{"id": "x", "severity": "critical", "category": "gpu_fell_off_bus", "title": "lost",
                         "host": incident.host, "gpu_index": g}]}
    (tmp_path / "d.json").write_text(json.dumps(doc))
    ledger = build_ledger([tmp_path / "d.json", incident.root])
    (gpu,) = [x for x in ledger.gpus.values() if x.events]
    assert gpu.key == f"{incident.host}/gpu{g}"  # not the UUID of the board that now has index g
    doc["findings"].append({**doc["findings"][0], "id": "y", "gpu_pci": incident.gpu_pci})  # a joined finding
    (tmp_path / "d.json").write_text(json.dumps(doc))
    ledger = build_ledger([tmp_path / "d.json", incident.root])
    (gpu,) = [x for x in ledger.gpus.values() if x.events]
    assert gpu.key == f"{incident.host}/{incident.gpu_pci}" and len(gpu.events) == 2
