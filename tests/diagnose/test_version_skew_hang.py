"""Mixed NCCL releases across the nodes of a job that hung in its collectives.

Ranks on different NCCL releases do not speak the same protocol: a job mixing them fails at its
first collective or waits there until the watchdog fires. When the job hung, printed no NCCL error
of its own and nothing else explains it, the odd node's NCCL is the answer (the cause of last
resort). Controls: a better cause in the same evidence, a run that completed, a skew in a field
that does not hang collectives, and a hang with no skew at all."""

from __future__ import annotations

from gpulib.diagnose import diagnose

BUS = ("1b000", "2c000")


def _job(tmp_path, nccl: dict[str, str], end: str = "hang", field: str = "nccl") -> None:
    """One log per host, two ranks each: NCCL banners and init lines, a step, then every rank's
    watchdog timeout (``hang``), a normal end (``done``) or a CUDA OOM on the last host (``oom``).
    ``field="driver"``: the NCCL banners agree and the versions differ in an nvidia-smi header."""
    hosts = list(nccl)
    for n, (host, version) in enumerate(nccl.items()):
        shown = version if field == "nccl" else "2.21.5"
        lines = [*(f"{host}:50{i}:50{i} [{i}] NCCL INFO NCCL version {shown}+cuda12.4" for i in range(2)),
                 *(f"{host}:50{i}:55{i} [{i}] NCCL INFO comm 0x{n}{i} rank {2 * n + i} nranks {2 * len(hosts)} "
                   f"cudaDev {i} busId {BUS[i]} commId 0x91 - Init COMPLETE" for i in range(2)),
                 f"2026-07-02 08:01:00,000 [rank{2 * n}] INFO step 10 | loss 3.0 | 1.0 s/step"]
        if end == "done":
            lines.append(f"2026-07-02 09:00:00,000 [rank{2 * n}] INFO Training completed")
        else:
            lines += [f"[rank{2 * n + i}]:[E702 08:31:02.118290412 ProcessGroupNCCL.cpp:632] [Rank {2 * n + i}] "
                      "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, "
                      "NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800082 milliseconds before timing out."
                      for i in range(2)]
        if end == "oom" and n == len(hosts) - 1:
            lines.insert(-2, f"[rank{2 * n}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                             "2.00 GiB (GPU 0; 79.11 GiB total capacity; 77.02 GiB already allocated)")
        (tmp_path / f"{host}.log").write_text("\n".join(lines) + "\n")
        if field == "driver":
            from gpulib.evidence.bundle import BundleWriter

            with BundleWriter(tmp_path / f"bundle-{host}", host=host) as bundle:
                bundle.write_json("nvml/snapshot.json", {"schema": "gpulib.nvml-snapshot/1", "driver_version": version,
                                                         "cuda_driver_version": "12.4", "gpu_count": 0, "gpus": []})


def test_a_hang_with_one_node_on_another_nccl_names_that_node(tmp_path):
    _job(tmp_path, {"hv-1": "2.21.5", "hv-2": "2.21.5", "hv-3": "2.18.3"})
    d = diagnose([tmp_path])
    assert (d.interruption, d.category, d.root_cause.host) == ("soft", "driver_mismatch", "hv-3")
    assert d.root_cause.rank is None  # the waiting ranks' timeouts date the hang, they do not name the odd node
    assert any(f.id.startswith("nccl-timeout") and f.caused_by == d.root_cause.id for f in d.findings)


def test_control_a_better_cause_wins_over_the_skew(tmp_path):
    _job(tmp_path, {"hv-1": "2.21.5", "hv-2": "2.21.5", "hv-3": "2.18.3"}, end="oom")
    assert diagnose([tmp_path]).category == "cuda_oom"


def test_control_a_completed_run_with_mixed_nccl_is_no_failure(tmp_path):
    _job(tmp_path, {"hv-1": "2.21.5", "hv-2": "2.21.5", "hv-3": "2.18.3"}, end="done")
    d = diagnose([tmp_path])
    skew = next(f for f in d.findings if f.id.startswith("version-skew-nccl"))
    assert d.interruption == "none" and (skew.role, skew.severity) == ("context", "warning")


def test_control_a_driver_skew_alone_does_not_explain_a_hang(tmp_path):
    _job(tmp_path, {"hv-1": "550.90.07", "hv-2": "550.90.07", "hv-3": "535.161.08"}, field="driver")
    d = diagnose([tmp_path])
    skew = next(f for f in d.findings if f.id.startswith("version-skew-driver"))
    assert skew.role == "context" and d.interruption == "unknown"


def test_control_a_hang_without_skew_stays_unknown(tmp_path):
    _job(tmp_path, {"hv-1": "2.21.5", "hv-2": "2.21.5", "hv-3": "2.21.5"})
    assert diagnose([tmp_path]).interruption == "unknown"


def _truncated(tmp_path, nccl: dict[str, str], on: str) -> None:
    """Every host's banners; the bootstrap 'Message truncated' WARN printed on host ``on``."""
    for host, version in nccl.items():
        lines = [f"{host}:60{i}:60{i} [{i}] NCCL INFO NCCL version {version}+cuda12.4" for i in range(2)]
        if host == on:
            lines += [f"{host}:600:688 [0] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4",
                      f"{host}:600:688 [0] NCCL INFO bootstrap.cc:554 -> 3"]
        (tmp_path / f"{host}.log").write_text("\n".join(lines) + "\n")


def test_a_wire_format_disagreement_on_a_majority_node_is_the_odd_nodes_nccl(tmp_path):
    _truncated(tmp_path, {"hv-1": "2.21.5", "hv-2": "2.21.5", "hv-3": "2.18.3"}, on="hv-1")
    d = diagnose([tmp_path])
    assert (d.category, d.root_cause.host) == ("driver_mismatch", "hv-3")


def test_control_a_wire_format_disagreement_without_skew_is_not_a_version_problem(tmp_path):
    _truncated(tmp_path, {"hv-1": "2.21.5", "hv-2": "2.21.5", "hv-3": "2.21.5"}, on="hv-1")
    assert diagnose([tmp_path]).category != "driver_mismatch"
