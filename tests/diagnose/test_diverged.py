"""A collective time-out whose cause is one rank's own code path (:mod:`gpulib.diagnose.diverged`).

Lines are written in torch's, gloo's and Lightning's layouts with invented paths, values and
times. Each sign has its negative control: the same time-out without the sign (or with a sign
that names two ranks) stays "cause not shown", never a guessed rank.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

#: One rank's time-out in a layout that names no waiting rank (a lone watchdog report).
LONE = ("[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=918, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing out.")
GLOO = ("RuntimeError: [/src/gloo/transport/tcp/unbound_buffer.cc:136] Timed out waiting 600000ms for send "
        "operation to complete")


def _run(tmp_path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return diagnose([tmp_path]).to_dict()


def _verdict(doc: dict) -> tuple:
    root = doc["root_cause"] or {}
    return doc["verdict"]["interruption"], doc["verdict"].get("category") or root.get("category"), root.get("rank")


def test_a_phase_labelled_with_one_rank_is_what_the_others_waited_for(tmp_path):
    work = "\n".join(f"Scoring shard {i} on rank=0: {i * 25}%|##   | {i}/4" for i in range(1, 4))
    doc = _run(tmp_path, {"eval.log": work + "\n", "train.log": LONE + "\n"})
    assert _verdict(doc) == ("soft", "application_error", 0)
    assert doc["root_cause"]["finding"].startswith("rank-only-work")


def test_phases_labelled_with_two_ranks_name_no_rank(tmp_path):
    doc = _run(tmp_path, {"eval-a.log": "Scoring shard 1 on rank=0\n", "eval-b.log": "Scoring shard 2 on rank=1\n",
                          "train.log": LONE + "\n"})
    assert doc["verdict"]["interruption"] == "unknown"
    assert not any(f["id"].startswith("rank-only-work") for f in doc["findings"])


def test_a_phase_announced_once_is_not_work_in_progress(tmp_path):
    work = "epoch 3 step 1200 loss 2.113\nsaving checkpoint (gathering shards on rank 0)\n"
    doc = _run(tmp_path, {"eval.log": work, "train.log": LONE + "\n"})
    assert doc["verdict"]["interruption"] == "unknown"


def test_labelled_work_the_rank_went_on_from_is_not_where_it_was(tmp_path):
    work = "rank 0: read 12/40 partials\nrank 0: read 24/40 partials\nepoch 3 step 1200 loss 2.113\n"
    doc = _run(tmp_path, {"eval.log": work, "train.log": LONE + "\n"})
    assert doc["verdict"]["interruption"] == "unknown"
    assert not any(f["id"].startswith("rank-only-work") for f in doc["findings"])


def test_the_odd_rank_of_a_per_rank_dump_is_named(tmp_path):
    dump = "".join(f"rank{r} ['loss', 'acc'{', ' + repr('wer') if r != 2 else ''}]\n" for r in range(4))
    log = "2025-06-03 11:02:07,100 (trainer:80) INFO: 2epoch started\n" + GLOO + "\n"
    doc = _run(tmp_path, {"keys.txt": dump, "train.log": log})
    assert _verdict(doc) == ("soft", "application_error", 2)


def test_a_dump_where_two_ranks_differ_names_no_rank(tmp_path):
    dump = "rank0 ['loss']\nrank1 ['loss', 'wer']\nrank2 ['loss', 'cer']\nrank3 ['loss']\n"
    log = "2025-06-03 11:02:07,100 (trainer:80) INFO: 2epoch started\n" + GLOO + "\n"
    doc = _run(tmp_path, {"keys.txt": dump, "train.log": log})
    assert doc["verdict"]["interruption"] == "unknown"
    assert not any(f["id"].startswith("rank-diverged") for f in doc["findings"])


def test_a_time_out_after_the_loop_ended_is_teardown_code(tmp_path):
    log = ("Epoch 19: 100%|##########| 400/400\n`Trainer.fit` stopped: `max_epochs=20` reached.\n"
           + LONE.replace("Rank 2", "Rank 0") + "\n")
    doc = _run(tmp_path, {"train.log": log})
    assert _verdict(doc)[:2] == ("soft", "application_error")
    assert doc["root_cause"]["finding"].startswith("post-loop-collective")


def test_a_time_out_before_the_loop_ended_is_not_teardown(tmp_path):
    log = "Epoch 3: 40%|####      | 160/400\n" + LONE.replace("Rank 2", "Rank 0") + "\n"
    doc = _run(tmp_path, {"train.log": log})
    assert doc["verdict"]["interruption"] == "unknown"
    assert not any(f["id"].startswith("post-loop-collective") for f in doc["findings"])


def test_a_log_that_stops_in_work_prefixed_with_one_rank_names_it(tmp_path):
    work = "epoch 3 step 1200 loss 2.113\nrank 0: read 12/40 partials\nrank 0: read 24/40 partials\n"
    doc = _run(tmp_path, {"eval.log": work, "train.log": LONE + "\n"})
    assert _verdict(doc) == ("soft", "application_error", 0)


def test_rank_only_data_preparation_is_a_data_stall(tmp_path):
    """What the labelled work is decides the category: tokenizing on one rank starves the others."""
    work = "\n".join(f"rank 0: tokenizing documents of part {i} of 6 ({i * 1000} docs)" for i in range(1, 4))
    doc = _run(tmp_path, {"prep.log": work + "\n", "train.log": LONE + "\n"})
    assert _verdict(doc) == ("soft", "data_pipeline_stall", 0)
