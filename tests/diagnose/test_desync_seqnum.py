"""Ranks that timed out at different sequence numbers of one process group: a desync, not a straggler.

A rank that timed out in collective N+1 completed collective N, which needs every rank; ranks still
waiting in their N enqueued a different sequence of collectives. Lines are written in torch's watchdog
layout with invented hosts, pids and values. Negative controls: every rank on one SeqNum (a plain
time-out with suspects), a lagging rank with a hardware fault on its node, two runs of one job.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

WATCHDOG = ("[E ProcessGroupNCCL.cpp:691] [Rank {r}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 6001{r}7 "
            "milliseconds before timing out.")


def _run(tmp_path, seqs: dict[int, int], op: str = "ALLREDUCE", extra: list[str] = (),
         files: dict[str, str] | None = None) -> dict:
    lines = [*extra, *(WATCHDOG.format(r=r, seq=s, op=op) for r, s in seqs.items())]
    (tmp_path / "worker.log").write_text("\n".join(lines) + "\n")
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    return diagnose([tmp_path]).to_dict()


def _desync(doc: dict) -> bool:
    return any(f["id"].startswith("collective-desync") for f in doc["findings"])


def test_a_rank_one_collective_ahead_of_the_waiting_ranks_is_a_desync(tmp_path):
    doc = _run(tmp_path, {2: 731, 6: 731, 1: 732})
    assert (doc["verdict"]["interruption"], doc["root_cause"]["category"]) == ("soft", "application_error")
    assert doc["root_cause"]["finding"].startswith("collective-desync")
    assert doc["root_cause"]["rank"] is None  # the code is at fault, not one rank


def test_every_rank_on_one_seqnum_is_only_the_cascade(tmp_path):
    """Negative control: the ranks that timed out waited in one call for ranks that never came."""
    doc = _run(tmp_path, {0: 731, 1: 731, 3: 731})
    assert not _desync(doc)
    assert doc["verdict"]["interruption"] == "unknown"
    timeout = next(f for f in doc["findings"] if f["id"].startswith("nccl-timeout"))
    assert timeout["never_arrived"] == [2]


def test_pipeline_sends_at_different_seqnums_are_not_a_desync(tmp_path):
    """Negative control: point-to-point counts differ between pipeline stages by design."""
    assert not _desync(_run(tmp_path, {2: 731, 1: 732}, op="SEND"))


def test_a_hardware_fault_on_the_lagging_ranks_node_comes_first(tmp_path):
    """Negative control: a GPU that fell off the bus mid-collective leaves its rank behind."""
    init = ("gpu-q3:40711:40711 [2] NCCL INFO comm 0x55c1e0 rank 2 nranks 4 cudaDev 2 nvmlDev 2 busId 3b000 "
            "commId 0x91fe - Init COMPLETE")
    dmesg = "[Tue Apr 14 02:31:09 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=40711, GPU has fallen off the bus.\n"
    doc = _run(tmp_path, {2: 731, 0: 732, 1: 732, 3: 732}, extra=[init], files={"gpu-q3-dmesg.txt": dmesg})
    assert (doc["verdict"]["interruption"], doc["root_cause"]["category"]) == ("hard", "gpu_fell_off_bus")


def test_reports_of_two_runs_hours_apart_are_not_compared(tmp_path):
    """Negative control: a relaunched job counts its collectives anew; its time-outs are another run's."""
    stamped = ["2026-04-14T02:31:09Z " + WATCHDOG.format(r=2, seq=731, op="ALLREDUCE"),
               "2026-04-14T09:02:40Z " + WATCHDOG.format(r=1, seq=732, op="ALLREDUCE")]
    (tmp_path / "worker.log").write_text("\n".join(stamped) + "\n")
    assert not _desync(diagnose([tmp_path]).to_dict())
