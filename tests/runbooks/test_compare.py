"""``gpulib archive diff`` on two health reports that differ in known ways."""

from __future__ import annotations

import json

import pytest

from gpulib.cli import main
from gpulib.runbooks.archive import ArchiveWriter
from gpulib.runbooks.compare import diff_findings


def inventory(*gpus) -> dict:
    return {"step": "09_health_report", "id": "inventory", "severity": "info", "category": "none",
            "title": f"{len(gpus)} GPUs", "gpus": list(gpus)}


def gpu(index, uuid, **counters) -> dict:
    return {"host": "node-a", "index": index, "uuid": uuid, "pci_bus_id": f"0000:{0x18 + index:02x}:00.0",
            "name": "NVIDIA H100 80GB HBM3", **counters}


NIGHT_1 = [
    inventory(gpu(0, "GPU-aaaa", ecc_aggregate_sbe=2, remapped_rows_correctable=1),
              gpu(1, "GPU-bbbb", ecc_aggregate_sbe=0), gpu(2, "GPU-cccc", ecc_aggregate_sbe=0)),
    {"step": "09_health_report", "id": "xid-13-node-a", "severity": "warning", "category": "application_error",
     "title": "Xid 13 on GPU 0000:18:00.0", "host": "node-a", "pci_bus_id": "00000000:18:00.0", "xid": 13},
    {"step": "09_health_report", "id": "nccl-allreduce", "severity": "info", "category": "none",
     "title": "all_reduce bus bandwidth", "busbw_gbps": 182.0},
    {"step": "09_health_report", "id": "thermal-node-a-gpu1", "severity": "warning",
     "category": "thermal_throttling", "title": "GPU 1 hit its slowdown temperature"},
]
NIGHT_2 = [
    inventory(gpu(0, "GPU-aaaa", ecc_aggregate_sbe=9, remapped_rows_correctable=1),
              gpu(1, "GPU-bbbb", ecc_aggregate_sbe=0)),  # GPU-cccc is gone
    {"step": "09_health_report", "id": "xid-13-node-a", "severity": "warning", "category": "application_error",
     "title": "Xid 13 on GPU 0000:18:00.0", "host": "node-a", "pci_bus_id": "0000:18:00.0", "xid": 13},
    {"step": "09_health_report", "id": "xid-79-node-a", "severity": "critical", "category": "gpu_fell_off_bus",
     "title": "Xid 79 (GPU has fallen off the bus)", "host": "node-a", "pci_bus_id": "0000:1a:00.0", "xid": 79},
    {"step": "09_health_report", "id": "nccl-allreduce", "severity": "info", "category": "none",
     "title": "all_reduce bus bandwidth", "busbw_gbps": 121.5},
    {"step": "09_health_report", "id": "ecc-node-a-gpu0", "severity": "error", "category": "gpu_memory_error",
     "title": "GPU 0: 1 uncorrectable error(s)", "host": "node-a", "uuid": "GPU-aaaa",
     "remapped_rows_uncorrectable": 1},
]


def test_each_kind_of_regression_is_reported():
    diff = diff_findings(NIGHT_1, NIGHT_2)
    assert diff.new_xids == ["Xid 79 on 0000:1a:00.0 on node-a: Xid 79 (GPU has fallen off the bus) [critical]"]
    assert diff.grown_counters == [
        "0000:18:00.0 (GPU 0) on node-a: ecc_aggregate_sbe 2 -> 9",
        "0000:18:00.0 (GPU 0) on node-a: remapped_rows_uncorrectable (not recorded) -> 1",
    ]
    assert diff.fallen_bandwidth == ["09_health_report/nccl-allreduce: busbw_gbps 182 -> 121.5 (-33%)"]
    assert diff.vanished_gpus == ["0000:1a:00.0 (GPU 2) on node-a: in A's inventory, absent from B's"]
    assert diff.new_findings == ["[error] 09_health_report: GPU 0: 1 uncorrectable error(s)"]
    assert diff.resolved_findings == ["[warning] 09_health_report: GPU 1 hit its slowdown temperature"]
    assert diff.regressed


def test_same_facts_spelled_differently_are_no_regression():
    diff = diff_findings(NIGHT_1, NIGHT_1[:1] + [dict(NIGHT_1[1], pci_bus_id="0000:18:00.0")] + NIGHT_1[2:])
    assert not diff.regressed and diff.new_xids == [] and diff.lines()[-1] == "verdict: nothing got worse"


def test_small_bandwidth_noise_and_lost_gpus():
    a = [dict(NIGHT_1[2], busbw_gbps=182.0), inventory(gpu(0, "GPU-aaaa"))]
    b = [dict(NIGHT_1[2], busbw_gbps=175.0), inventory(gpu(0, "GPU-aaaa", lost=True))]
    diff = diff_findings(a, b, bandwidth_drop_pct=10)
    assert diff.fallen_bandwidth == []
    assert diff.vanished_gpus == ["0000:18:00.0 (GPU 0) on node-a: lost in B"]


def test_a_run_without_inventory_is_said_not_guessed():
    diff = diff_findings(NIGHT_1, NIGHT_1[1:])
    assert diff.vanished_gpus == [] and any("recorded no GPU inventory" in n for n in diff.notes)


def archived(root, findings) -> str:
    writer = ArchiveWriter(root, "health-report")
    writer.write_json("findings.json", {"format": "gpulib.runbook-findings/1", "findings": findings})
    return str(writer.finish({"format": "gpulib.runbook-run/1", "runbook": "health-report",
                              "started_at": writer.started.isoformat(), "exit_code": 0, "steps": []}))


def test_cli_diff_of_two_archived_runs(tmp_path, capsys):
    first, second = archived(tmp_path, NIGHT_1), archived(tmp_path, NIGHT_2)
    assert main(["archive", "diff", "health-report~1", "health-report~0", "--archive", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"A: {first}" in out and f"B: {second}" in out and "ecc_aggregate_sbe 2 -> 9" in out
    assert main(["archive", "diff", second, first, "--format", "json", "--archive", str(tmp_path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["vanished_gpus"] == [] and doc["regressed"] is True  # GPU-cccc "appeared": not a regression
    (tmp_path / "health-report" / ".20260101T000000Z-node-a-0badf00d.partial").mkdir()
    assert main(["archive", "list", "--archive", str(tmp_path)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].startswith("incomplete run (still running, or its runner died):")
    assert listing[1].split() == ["RUNBOOK", "RUN", "EXIT", "FINDINGS", "EVIDENCE"]
    assert [line.split()[0] for line in listing[2:4]] == ["health-report", "health-report"]
    assert listing[4] == f"2 run(s) under {tmp_path}; `gpulib archive show RUN` for one, `gpulib archive diff A B` to compare"


@pytest.mark.parametrize("ref", ["health-report~5", "no-such-run", "deadbeef"])
def test_cli_names_a_missing_run(tmp_path, capsys, ref):
    archived(tmp_path, NIGHT_1)
    assert main(["archive", "show", ref, "--archive", str(tmp_path)]) == 2
    assert ref in capsys.readouterr().err


def test_bandwidth_nested_in_a_fabric_result_is_compared():
    def fabric(busbw_small, busbw_large):
        return [{"step": "08_preflight", "id": "fabric-test", "severity": "info", "title": "fabric test PASS",
                 "fabric": {"verdict": "PASS", "results": [
                     {"collective": "all_reduce", "sizes": [{"size_bytes": 1 << 20, "busbw_gbps": busbw_small},
                                                            {"size_bytes": 1 << 30, "busbw_gbps": busbw_large}]}]}}]

    diff = diff_findings(fabric(20.0, 180.0), fabric(19.5, 90.0))
    assert diff.fallen_bandwidth == [
        "08_preflight/fabric-test: fabric.results[collective=all_reduce].sizes[size_bytes=1073741824].busbw_gbps "
        "180 -> 90 (-50%)"]


def test_cli_names_a_damaged_run(tmp_path, capsys):
    run = archived(tmp_path, NIGHT_1)
    findings = tmp_path / "health-report" / run.rsplit("/", 1)[1] / "findings.json"
    findings.chmod(0o644)
    findings.write_bytes(b"\x00\x9f junk")
    assert main(["archive", "diff", run, run, "--archive", str(tmp_path)]) == 2
    assert "was changed after it was archived: its files do not match its manifest (changed: findings.json)" \
        in capsys.readouterr().err
    (tmp_path / "health-report" / run.rsplit("/", 1)[1] / "manifest.json").chmod(0o644)
    (tmp_path / "health-report" / run.rsplit("/", 1)[1] / "manifest.json").write_text("{not json")
    assert main(["archive", "show", run, "--archive", str(tmp_path)]) == 2
    assert "manifest.json is unreadable" in capsys.readouterr().err
