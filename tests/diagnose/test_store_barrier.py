"""init_process_group's store-based barrier (torch < 2.2) timing out is a cascade like a watchdog
timeout: the ranks that printed it waited for those that never arrived. A silent rank 0 whose last
announcement before the timeout was a data-preparation step is a data stall; controls: the same
announcement followed by training steps is old news, and a rank 0 that failed is its own cause."""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.diagnose.busy import classify

PREP = "2026-01-19 08:02:12,317 INFO  Extracting scenarios from cache: /data/cache/full (this may take a while)...\n"
STEPS = "".join(f"2026-01-19 08:03:{i:02d},000 INFO  step {i}/5000 loss 2.{i:02d}\n" for i in range(10, 14))


def _barrier(world: int = 4) -> str:
    lines = [f"2026-01-19 08:02:2{r},000 INFO  Waiting in store based barrier to initialize process group for rank: {r}, "
             f"key: store_based_barrier_key:1 (world_size={world}, worker_count={world - 1}, timeout=0:30:00)\n"
             for r in range(1, world)]
    lines += [f"2026-01-19 08:32:2{r},000 ERROR  Timed out initializing process group in store based barrier on rank: {r}, "
              f"for key: store_based_barrier_key:1 (world_size={world}, worker_count={world - 1}, timeout=0:30:00)\n"
              for r in range(1, world)]
    return "".join(lines)


def _answer(tmp_path, text):
    (tmp_path / "train.log").write_text(text)
    got = diagnose([tmp_path]).to_dict()
    root = got.get("root_cause") or {}
    return root.get("category") or got["verdict"]["category"], root.get("rank"), got["findings"]


def test_silent_rank0_announcing_data_preparation_is_a_data_stall(tmp_path):
    category, rank, findings = _answer(tmp_path, PREP + _barrier())
    assert (category, rank) == ("data_pipeline_stall", 0)
    assert any(f["id"].startswith("store-barrier") and f["role"] == "symptom" for f in findings)


def test_control_an_announcement_followed_by_training_steps_is_not_what_rank0_was_doing(tmp_path):
    category, rank, _ = _answer(tmp_path, PREP + STEPS + _barrier())
    assert category != "data_pipeline_stall" and rank == 0


def test_control_a_rank0_that_failed_is_its_own_cause(tmp_path):
    oom = ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
           "capacity of 79.15 GiB of which 1.02 GiB is free.\n")
    category, rank, _ = _answer(tmp_path, PREP + oom + _barrier())
    assert (category, rank) == ("cuda_oom", 0)


def test_what_counts_as_a_data_preparation_announcement():
    assert classify("Extracting scenarios from cache: /data/cache/full (this may take a while)...") == "data"
    assert classify("Running tokenizer on dataset") == "data"
    # controls: model loading and a data word inside a path are not data preparation
    assert classify("Loading checkpoint shards: 100%") is None
    assert classify("#> Saving the indexing plan to /data/indexes/wiki.nbits=2/plan.json ..") is None
