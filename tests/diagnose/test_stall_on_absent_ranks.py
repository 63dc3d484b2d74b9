"""A data stall printed without a rank, beside time-outs that say which ranks never arrived.

The ranks that timed out were in a collective, not reading data: a data-preparation bar in the
same console, naming no rank, is one of the ranks that never arrived - the soft root cause. The
rank printed beside it (the waiter's own watchdog line) is not its rank. Lines are written in
tqdm's and torch's layouts with invented sizes and times; the negative controls: the same
time-out without a bar, and a bar that a waiting rank printed itself.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

BAR = "Tokenizing corpus-b:  41%|████      | 8204/20000 [30:02<43:11, 4.55 examples/s]"
TIMEOUT = ("[E ProcessGroupNCCL.cpp:485] [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802117 milliseconds before timing out.")


def _run(tmp_path, lines: list[str]) -> dict:
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n")
    return diagnose([tmp_path]).to_dict()


def test_a_bar_without_a_rank_is_on_a_rank_that_never_arrived(tmp_path):
    doc = _run(tmp_path, ["Preparing shard index for /data/corpus-b", BAR, TIMEOUT])
    assert (doc["verdict"]["interruption"], doc["verdict"]["category"]) == ("soft", "data_pipeline_stall")
    assert doc["root_cause"]["rank"] is None  # rank 3 only waited


def test_the_same_time_out_without_a_bar_stays_unexplained(tmp_path):
    doc = _run(tmp_path, ["Preparing shard index for /data/corpus-b", TIMEOUT])
    assert doc["verdict"]["interruption"] == "unknown"


def test_a_bar_of_a_rank_that_waited_is_not_the_cause(tmp_path):
    doc = _run(tmp_path, [f"[rank3]: {BAR}", TIMEOUT])
    assert doc["verdict"]["category"] != "data_pipeline_stall" or doc["verdict"]["interruption"] == "unknown"
