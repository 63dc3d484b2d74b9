"""Step checks: tables + thresholds -> findings, on small synthetic tables a human can verify."""

from __future__ import annotations

import pandas as pd
import pytest

from gpulib.diagnose import diagnose
from gpulib.notebook import remediation
from gpulib.notebook import steps as checks
from tests.notebooks.test_plots import _samples


def _states(**over) -> pd.DataFrame:
    base = {"host": "n1", "gpu": ["0", "1"], "gpu_index": [0, 1], "pci_bus_id": ["0000:07:00.0", "0000:0f:00.0"],
            "mem_used_mib": [30000.0, 30100.0], "mem_total_mib": [81920.0] * 2, "processes": [[], []],
            "throttle_reasons": [[], []], "lost": [False, False], "time": pd.Timestamp("2025-01-01T00:00:00Z"),
            "power_limit_w": [400.0, 400.0], "file": "nvidia-smi.txt", "line": [10, 40], "text": ["gpu 0", "gpu 1"]}
    base.update(over)
    return pd.DataFrame(base)


#: A kernel log as ``dmesg -T`` prints it on two nodes: a GPU that fell off the bus (its Xid twice
#: and the "fallen off" line), a soft Xid 13 of the job, and a double-bit ECC error (Xid 48).
_KERNEL = {
    "hgx-018": "[Tue Mar 11 03:12:07 2025] NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
               "[Tue Mar 11 03:12:07 2025] NVRM: GPU 0000:ab:00.0: GPU has fallen off the bus.\n"
               "[Tue Mar 11 03:12:09 2025] NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
               "[Tue Mar 11 03:13:00 2025] NVRM: Xid (PCI:0000:1b:00): 13, pid=88123, name=python3, Graphics SM Warp "
               "Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address\n",
    "hgx-019": "[Tue Mar 11 03:12:30 2025] NVRM: Xid (PCI:0000:bb:00): 48, pid=77001, name=python3, An uncorrectable "
               "double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.\n",
}


def _kernel_diagnosis(tmp_path) -> dict:
    for host, text in _KERNEL.items():
        (tmp_path / host).mkdir()
        (tmp_path / host / "dmesg.txt").write_text(text, encoding="utf-8")
    return diagnose([tmp_path]).to_dict()


def test_kernel_step_is_the_diagnosis_view_one_finding_per_gpu_and_code(tmp_path):
    diagnosis = _kernel_diagnosis(tmp_path)
    found = {f["xid"]: f for f in checks.kernel_findings(diagnosis)}
    assert set(found) == {79, 48, 13}
    assert found[79]["time"] == "2025-03-11T03:12:07Z" and found[79]["evidence"][0]["line"] == 1
    assert found[79]["severity"] == "critical" and found[79]["gpu_pci"] == "0000:ab:00.0"
    assert found[13]["severity"] == "error" and found[13]["category"] == "application_error"
    by_id = {f["id"]: f for f in diagnosis["findings"]}
    for f in checks.kernel_findings(diagnosis):  # the same record as the diagnosis's, not a second opinion
        assert by_id[f["id"]] == f


def test_leftover_processes_become_kill_commands_with_integer_pids_only():
    held = checks.finding("zombie-n1-0000_07_00.0", "warning", "application_error", "GPU 0 still held", host="n1",
                          gpu_index=0, pids=[4242])  # as the diagnosis's zombie rule records it
    [command] = remediation.remediation_commands([held])
    assert command.argv == ("kill", "-TERM", "4242") and command.host == "n1"
    with pytest.raises(ValueError):
        remediation.remediation_commands([{**held, "pids": ["1; reboot"]}])


def _xid_events(*rows: tuple[str, str, str, int]) -> pd.DataFrame:
    """Kernel Xid events (host, gpu, PCI id, code) joined to the shipped catalog, as
    ``Evidence.kernel_events`` joins them."""
    from gpulib.catalog import xid_info

    return pd.DataFrame([{"time": pd.Timestamp("2025-03-11T03:12:07Z"), "host": host, "gpu": gpu, "gpu_index": int(gpu),
                          "pci_bus_id": pci, "kind": "xid", "xid": code, "name": xid_info(code).name,
                          "interruption": xid_info(code).interruption, "category": xid_info(code).category,
                          "action": xid_info(code).action, "text": f"NVRM: Xid (PCI:{pci[:-2]}): {code}",
                          "file": f"{host}/dmesg.txt", "line": n + 1} for n, (host, gpu, pci, code) in enumerate(rows)])


def test_remediation_follows_the_xid_catalog_a_gpu_off_the_bus_is_never_reset(tmp_path):
    commands = [c.argv for c in remediation.remediation_commands(checks.kernel_findings(_kernel_diagnosis(tmp_path)))]
    assert ("nvidia-smi", "-r", "-i", "0000:ab:00.0") not in commands  # Xid 79: a reset cannot reach it
    assert commands.count(("ipmitool", "chassis", "power", "cycle")) == 1  # the Xid and its "fallen off" line
    assert commands[:2] == [("scontrol", "update", "nodename=hgx-018", "state=drain", "reason=gpulib: Xid 79 on GPU 0000:ab:00.0"),
                            ("scontrol", "update", "nodename=hgx-019", "state=drain", "reason=gpulib: Xid 48 on GPU 0000:bb:00.0")]
    assert ("nvidia-smi", "-r", "-i", "0000:bb:00.0") in commands  # Xid 48: the row remap activates on reset
    assert not [c for c in commands if "0000:1b:00.0" in c]  # soft Xid 13: the job's


def test_each_hard_xid_gets_the_first_step_its_catalog_action_names():
    """Cross-check against NVIDIA's own resolution bucket of each code (a separate catalog column)."""
    from gpulib.catalog import load_catalog

    expected = {"RESTART_BM": "power_cycle", "RESTART_VM": "reboot", "RESET_GPU": "reset_gpu",
                "WORKFLOW_XID_48": "reset_gpu", "CONTACT_SUPPORT": "drain", "CHECK_MECHANICALS": "drain"}
    for info in load_catalog().values():
        got = remediation.xid_recovery(info.code)
        if not info.hard:
            assert got is None, info.code
        elif info.nvidia_immediate in expected:
            assert got[0] == expected[info.nvidia_immediate], (info.code, info.action, got)


def test_hard_findings_without_an_xid_code_take_the_catalog_step_of_their_category():
    root = checks.finding("xid79-1", "critical", "gpu_fell_off_bus", "Xid 79 on GPU 0000:4f:00.0", host="gx-102",
                          gpu_index=2, gpu_pci="0000:4f:00.0")  # a diagnosis finding: no `xid` key
    remap = checks.finding("ecc", "critical", "gpu_memory_error", "remap pending", host="gx-103", gpu_index=5,
                           pci_bus_id="0000:9b:00.0")
    forged = {**remap, "pci_bus_id": "0000:9b:00.0 && reboot", "host": "gx-103; reboot"}
    symptom = checks.finding("aer", "error", "gpu_fell_off_bus", "aer", host="gx-102", gpu_index=2)
    commands = [c.argv for c in remediation.remediation_commands([root, remap, symptom])]
    assert commands == [("scontrol", "update", "nodename=gx-102", "state=drain",
                         "reason=gpulib: gpu_fell_off_bus on GPU 0000:4f:00.0"),
                        ("scontrol", "update", "nodename=gx-103", "state=drain",
                         "reason=gpulib: gpu_memory_error on GPU 0000:9b:00.0"),
                        ("ipmitool", "chassis", "power", "cycle"), ("nvidia-smi", "-r", "-i", "0000:9b:00.0")]
    # a malformed PCI id falls back to the index; a host that is not a plain name keeps its suggestions,
    # as one quoted argument each, marked unverified (shown, never runnable: see test_widgets)
    suggested = remediation.remediation_commands([forged])
    assert [c.argv for c in suggested] == [("scontrol", "update", "nodename=gx-103; reboot", "state=drain",
                                            "reason=gpulib: gpu_memory_error on GPU 5"), ("nvidia-smi", "-r", "-i", "5")]
    assert not any(c.located for c in suggested)
    assert all("[on 'gx-103; reboot': unverified host name, shown only]" in c.text() for c in suggested)
    # nvidia-smi's spelling of the same GPU is normalised, not dropped for the index
    spelled = {**remap, "host": None, "pci_bus_id": "00000000:9B:00.0"}
    assert [c.argv for c in remediation.remediation_commands([spelled])] == [("nvidia-smi", "-r", "-i", "0000:9b:00.0")]


def test_lost_gpu_finding_leads_to_drain_and_power_cycle_not_reset():
    lost = checks.finding("gpu-lost-n1-0000_0f_00.0", "critical", "gpu_fell_off_bus", "GPU 1 is lost", host="n1",
                          gpu_index=1, gpu_pci="0000:0f:00.0")
    commands = [c.argv for c in remediation.remediation_commands([lost])]
    assert commands == [("scontrol", "update", "nodename=n1", "state=drain", "reason=gpulib: gpu_fell_off_bus on GPU 0000:0f:00.0"),
                        ("ipmitool", "chassis", "power", "cycle")]


def test_hardware_step_shows_the_snapshot_findings_of_hardware_categories_only():
    diagnosis = {"inputs": [{"path": "n1/nvidia-smi-q.txt", "kind": "nvidia_smi_q"}, {"path": "n1/dmesg", "kind": "kernel_log"}],
                 "findings": [
                     checks.finding("ecc-n1-0", "critical", "gpu_memory_error", "remap pending", host="n1",
                                    quotes=[{"file": "n1/nvidia-smi-q.txt", "line": 40, "text": "Pending : Yes"}]),
                     checks.finding("version-skew-driver", "warning", "driver_mismatch", "skew",
                                    quotes=[{"file": "n1/nvidia-smi-q.txt", "line": 3, "text": "Driver"}]),
                     checks.finding("xid79-n1", "critical", "gpu_fell_off_bus", "Xid 79",
                                    quotes=[{"file": "n1/dmesg", "line": 1, "text": "Xid 79"}])]}
    assert [f["id"] for f in checks.hardware_findings(diagnosis)] == ["ecc-n1-0"]
    assert [f["id"] for f in checks.kernel_findings(diagnosis)] == ["xid79-n1"]


def test_nccl_findings_leave_version_skew_to_the_diagnosis():
    ranks = pd.DataFrame({"rank": [0, 1], "host": ["a", "b"], "transport": ["IB", "IB"],
                          "nccl_version": ["2.21.5", "2.18.3"], "first_problem": [None, None]})
    assert checks.nccl_findings(ranks, {}) == []


def test_the_timeout_cascade_counts_as_the_diagnosis_does_and_keeps_its_own_category():
    """A rank whose watchdog got *stuck* (its own GPU hung) did not time out waiting for a peer: it
    is among the ranks that did not, as the diagnosis's "timeout on N rank(s); rank R never
    arrived" counts it, and the waiting ranks' row is the job's category, not the GPU's."""
    ranks = pd.DataFrame({"rank": [0, 1, 2, 3], "host": ["a", "a", "b", "b"], "transport": ["IB"] * 4,
                          "first_problem": ["watchdog_timeout: [Rank 0] Watchdog caught collective operation timeout",
                                            "watchdog_timeout: [Rank 1] Watchdog caught collective operation timeout",
                                            "watchdog_stuck: [Rank 2] ProcessGroupNCCL's watchdog got stuck",
                                            "watchdog_timeout: [Rank 3] Watchdog caught collective operation timeout"]})
    diagnosis = {"root_cause": {"category": "gpu_fell_off_bus", "finding": "xid79-b"}}
    [cascade] = checks.nccl_findings(ranks, diagnosis)
    assert cascade["title"].startswith("3 of 4 ranks first reported a watchdog timeout") and "did not: 2" in cascade["title"]
    assert cascade["category"] == "application_error" and cascade["caused_by"] == "xid79-b"


def test_timeline_table_names_the_source_kind_and_puts_hostless_events_on_their_files_host():
    timeline = pd.DataFrame({"time": pd.to_datetime(["2026-01-17T04:51:12Z", "2026-01-17T05:01:13Z",
                                                     "2026-01-17T05:01:20Z", "2026-01-17T05:02:00Z"]),
                             "host": ["gx-102", None, None, None],
                             "source": ["gx-102/journal-kernel.txt", "logs/train-gx-101.log:54", "notes/misc.txt",
                                        "gx-102/nvidia-smi.txt"],
                             "event": ["Xid 79", "NCCL watchdog timeout on 15 rank(s)", "?", "GPU lost"]})
    inputs = [{"path": "gx-102/journal-kernel.txt", "kind": "kernel_log", "host": "gx-102"},
              {"path": "logs/train-gx-101.log", "kind": "training_log", "host": "gx-101"},
              {"path": "gx-102/nvidia-smi.txt", "kind": "nvidia_smi_table", "host": "gx-102"}]
    table = checks.timeline_table(timeline, inputs)
    assert list(table["source_kind"]) == ["kernel log", "training log", "other", "nvidia-smi"]
    assert list(table["host"].fillna("-")) == ["gx-102", "gx-101", "-", "gx-102"]


def test_steps_compared_per_measure_and_rank():
    steps = pd.DataFrame({"rank": [0, 0, 0, 1, 1, 1, 2, 2], "step": [1, 2, 3, 1, 2, 3, 1, 2],
                          "step_time_s": [1.0, 1.0, 1.0, 1.0, 1.0, 3.5, 10.0, 10.0],
                          "measure": ["phases"] * 6 + ["s/step"] * 2})
    [slow] = checks.step_findings(steps, stall_factor=2.0)
    assert slow["rank"] == 1 and "3.50 s at step 3" in slow["title"]


def test_the_straggler_is_judged_on_compute_time_not_the_rank_that_waited_for_it():
    """Thermal incident shape: rank 0 prints s/step (its wait for rank 3 included) and every rank
    prints its phases; rank 3's compute doubled. Rank 0 waited: no finding blames it."""
    rows = []
    for step in range(1, 11):
        slow = step >= 8
        rows.append({"rank": 0, "step": step, "step_time_s": 2.8 if slow else 1.3, "measure": "s/step"})
        for rank in range(4):
            rows.append({"rank": rank, "step": step, "step_time_s": 2.5 if slow and rank == 3 else 1.2,
                         "measure": "compute+data"})
    found = checks.step_findings(pd.DataFrame(rows), stall_factor=1.8)
    assert [(f["rank"], f["measure"]) for f in found] == [(3, "compute+data")], found


def test_combine_hands_an_event_the_diagnosis_reports_back_to_the_diagnosis_finding():
    diagnosis = {"findings": [
        checks.finding("throttle-n1-0000_9b_00.0", "error", "thermal_throttling", "from diagnose", host="n1",
                       gpu_index=3, gpu_pci="0000:9b:00.0"),
        checks.finding("ecc-n1-0000_9b_00.0", "critical", "gpu_memory_error", "not this step's", host="n1", gpu_index=3)]}
    step = [checks.finding("throttle-n1-0000_9b_00.0-x", "warning", "thermal_throttling", "same GPU by PCI", host="n1",
                           pci_bus_id="00000000:9B:00.0"),
            checks.finding("hot-n1-4", "warning", "thermal_throttling", "other gpu", host="n1", gpu_index=4)]
    got = checks.combine(diagnosis, ["thermal_throttling"], step)
    assert [(f["id"], f["severity"]) for f in got] == [("throttle-n1-0000_9b_00.0", "error"), ("hot-n1-4", "warning")]


def test_go_no_go_and_next_step():
    assert checks.go_no_go([checks.finding("a", "warning", "none", "meh")])["verdict"] == "GO"
    assert checks.go_no_go([checks.finding("a", "error", "none", "bad")])["verdict"] == "NO-GO"
    text = checks.next_step({"verdict": {"category": "cuda_oom", "interruption": "soft"}})
    assert "02_gpu_memory_oom.ipynb" in text


def test_checkpoint_step_and_table_from_a_report_dict():
    report = {"resume_from": "/ck/ckpt_step_004000.pt", "rejected": [{"path": "/ck/ckpt_step_006000.pt",
                                                                     "reason": "truncated"}],
              "lacks": [], "resume_command": "torchrun ... --resume /ck/ckpt_step_004000.pt"}
    assert checks.checkpoint_step(report) == 4000
    assert list(checks.checkpoint_table(report)["verdict"]) == ["RESUME FROM THIS", "rejected"]
    found = checks.checkpoint_findings(report)
    assert found[0]["resume_from"] == "/ck/ckpt_step_004000.pt" and found[1]["severity"] == "warning"


def test_resume_loss_continuity_flags_a_jump_after_restart():
    t = pd.date_range("2025-08-14T12:00:00Z", periods=7, freq="10min")
    steps = pd.DataFrame({"time": t, "rank": 0, "step": [1000, 2000, 3000, 4000, 5000, 4000, 4100],
                          "loss": [4.0, 3.0, 2.6, 2.4, 2.3, 2.45, 2.4]})
    [ok] = checks.resume_findings(steps, max_jump_pct=10)
    assert ok["severity"] == "info" and "restart at step 4000" in ok["title"] and "+2.1 %" in ok["title"]
    steps.loc[5, "loss"] = 3.9  # optimizer state lost: loss back near the start
    [bad] = checks.resume_findings(steps, max_jump_pct=10)
    assert bad["severity"] == "warning" and "+62.5 %" in bad["title"]
    assert checks.resume_findings(steps.iloc[:5]) == []  # no restart, nothing to say


def test_torch_built_for_newer_cuda_than_the_driver_is_a_mismatch():
    versions = pd.DataFrame([{"host": "n1", "driver": "535.104", "cuda_driver": "12.2", "torch_cuda": "12.4",
                              "nvcc": "12.1"},
                             {"host": "n2", "driver": "550.54", "cuda_driver": "12.4", "torch_cuda": "12.4",
                              "nvcc": "12.6"}])
    found = {f["host"]: f for f in checks.version_findings(versions)}
    assert found["n1"]["severity"] == "error" and "CUDA 12.4" in found["n1"]["title"]
    assert found["n2"]["severity"] == "warning" and "nvcc" in found["n2"]["title"]


def test_the_checkpoint_table_lists_every_checkpoint_the_picker_offers():
    from gpulib.notebook.tables import open_evidence

    ev = open_evidence("examples/incident-ecc-truncated-checkpoint")
    report = ev.checkpoints("")
    table = checks.checkpoint_table(report)
    picker = checks.checkpoint_candidates(report, ev.training_steps())
    assert list(table["checkpoint"]) == [c["path"] for c in picker]
    assert list(table["verdict"]) == ["RESUME FROM THIS", "complete, older", "rejected"]
    assert "truncated" in table["reason"].iloc[2]
