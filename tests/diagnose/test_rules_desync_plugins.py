"""Collective desync (same SeqNum, different calls), mixed NCCL network plugins, hung nccl-tests.

Each rule has its negative control: ranks in the same call, all-to-all sizes that may differ, nodes
on the same plugin, a completed nccl-tests run.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.parsers import nccl_tests

WATCHDOG = ("[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600{r}31 "
            "milliseconds before timing out.")


def _timeouts(tmp_path, calls: dict[int, tuple[str, int]], seq: int = 812):
    (tmp_path / "train.log").write_text("\n".join(WATCHDOG.format(r=r, seq=seq, op=op, n=n)
                                                 for r, (op, n) in calls.items()) + "\n")
    return diagnose([tmp_path]).to_dict()


def _ids(doc):
    return {f["id"].split("-")[0] + "-" + f["id"].split("-")[1] for f in doc["findings"]}


def test_ranks_in_different_allreduce_sizes_are_a_code_desync(tmp_path):
    doc = _timeouts(tmp_path, {0: ("ALLREDUCE", 25165824), 1: ("ALLREDUCE", 1), 2: ("ALLREDUCE", 1), 3: ("ALLREDUCE", 1)})
    root = doc["root_cause"]
    assert (root["category"], doc["verdict"]["interruption"]) == ("application_error", "soft")
    assert "SeqNum 812" in doc["verdict"]["summary"] and root["rank"] == 0


def test_different_optypes_at_one_seqnum_are_a_desync(tmp_path):
    doc = _timeouts(tmp_path, {0: ("BROADCAST", 4096), 1: ("ALLREDUCE", 4096)})
    assert (doc["root_cause"]["category"], doc["verdict"]["interruption"]) == ("application_error", "soft")


MISMATCH = ("[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running collective: "
            "CollectiveFingerPrint(SequenceNumber=1204, OpType=BROADCAST, TensorShape=[{a}], TensorDtypes=Float), but "
            "Rank {o} is running collective: CollectiveFingerPrint(SequenceNumber=1204, OpType=BROADCAST, "
            "TensorShape=[{b}], TensorDtypes=Float).")


def test_two_ranks_on_two_sides_name_no_culprit_and_blame_no_missing_rank(tmp_path):
    """Ranks 0 and 1 never printed: with one rank on each side nobody is the odd one, and the two
    silent ranks did not 'fail to arrive' (every rank was in some collective)."""
    doc = _timeouts(tmp_path, {2: ("BROADCAST", 5120), 3: ("BROADCAST", 64)})
    assert (doc["root_cause"]["category"], doc["root_cause"]["rank"]) == ("application_error", None)
    assert doc["verdict"]["interruption"] == "soft"
    timeout = next(f for f in doc["findings"] if f["id"].startswith("nccl-timeout"))
    assert "never arrived" not in timeout["title"]


def test_a_detail_mismatch_report_breaks_the_tie(tmp_path):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL says rank 0 ran the 64-element call that rank 3 timed out in:
    rank 2, alone with 5120 elements, is the odd one."""
    (tmp_path / "detail.log").write_text(MISMATCH.format(r=2, a="5120", o=0, b="64") + "\n")
    doc = _timeouts(tmp_path, {2: ("BROADCAST", 5120), 3: ("BROADCAST", 64)})
    assert doc["root_cause"]["rank"] == 2


def test_a_mismatch_report_of_other_calls_decides_nothing(tmp_path):
    (tmp_path / "detail.log").write_text(MISMATCH.format(r=2, a="77", o=0, b="64") + "\n")
    doc = _timeouts(tmp_path, {2: ("BROADCAST", 5120), 3: ("BROADCAST", 64)})
    assert doc["root_cause"]["rank"] is None


def test_same_call_everywhere_is_only_the_cascade(tmp_path):
    doc = _timeouts(tmp_path, {r: ("ALLREDUCE", 25165824) for r in range(4)})
    assert doc["verdict"]["interruption"] == "unknown"
    assert not any("desync" in f["id"] for f in doc["findings"])


def test_all_to_all_sizes_may_differ(tmp_path):
    doc = _timeouts(tmp_path, {0: ("_ALLTOALL_BASE", 1000), 1: ("_ALLTOALL_BASE", 1200)})
    assert not any("desync" in f["id"] for f in doc["findings"])


def _nccl_tests(hosts_nets: dict[str, str], completed: bool) -> str:
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
             "validation: 1 graph: 0", "#", "# Using devices"]
    for r, host in enumerate(hosts_nets):
        lines.append(f"#  Rank  {r} Group  0 Pid {4100 + r:6d} on {host:>10s} device  0 [0x18] NVIDIA H100 80GB HBM3")
    for r, (host, net) in enumerate(hosts_nets.items()):
        lines.append(f"{host}:{4100 + r}:{4170 + r} [0] NCCL INFO Using network {net}")
    if completed:
        lines += ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
                  "busbw #wrong",
                  "     1048576        262144     float     sum      -1    61.20   17.13   17.13      0    60.90   17.22   "
                  "17.22      0",
                  "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 17.1750 "]
    return "\n".join(lines) + "\n"


def test_nodes_on_different_network_plugins_cannot_connect(tmp_path):
    (tmp_path / "nccl.log").write_text(_nccl_tests({"gpu-a": "IBext_v8", "gpu-b": "IB"}, completed=False))
    doc = diagnose([tmp_path]).to_dict()
    root = doc["root_cause"]
    assert (root["category"], doc["verdict"]["interruption"]) == ("network_fabric", "soft")
    assert "IBext_v8 on gpu-a" in doc["verdict"]["summary"] and "IB on gpu-b" in doc["verdict"]["summary"]


def test_same_plugin_everywhere_and_completed_is_healthy(tmp_path):
    (tmp_path / "nccl.log").write_text(_nccl_tests({"gpu-a": "IBext_v8", "gpu-b": "IBext_v8"}, completed=True))
    assert diagnose([tmp_path]).to_dict()["verdict"]["interruption"] == "none"


def test_a_run_that_stops_after_its_header_is_never_none(tmp_path):
    (tmp_path / "nccl.log").write_text(_nccl_tests({"gpu-a": "IB", "gpu-b": "IB"}, completed=False))
    doc = diagnose([tmp_path]).to_dict()
    assert doc["verdict"]["interruption"] == "unknown"
    assert any(f["id"].startswith("nccl-test-stopped") for f in doc["findings"])


def test_parser_keeps_a_header_only_run_with_nccl_lines_and_says_it_hung():
    result = nccl_tests.parse(_nccl_tests({"gpu-a": "IB", "gpu-b": "IB"}, completed=False), source="x.log")
    assert len(result.records) == 1 and not result.records[0].rows and len(result.records[0].devices) == 2
    assert any("hung while connecting" in p.message for p in result.problems)
    assert not nccl_tests.parse("# Using devices\nnothing else\n", source="y.log").records
