"""A hang before the first step of a training set with no length (:mod:`gpulib.diagnose.first_batch`).

The Trainer's header and torch's watchdog line are written in their layouts with invented sizes,
times and paths. Negative controls: the same hang after a logged step, and with a sized dataset.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

HEADER = ["[INFO|trainer.py:2310] 2026-02-11 08:10:04,220 >> ***** Running training *****",
          "[INFO|trainer.py:2311] 2026-02-11 08:10:04,220 >>   Num examples = 64,000",
          "[INFO|trainer.py:2312] 2026-02-11 08:10:04,220 >>   Num Epochs = {epochs}"]
STUCK = ("[rank5]:[E211 08:31:40.118204553 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
         "ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued "
         "collectives.")
STEP = "  1%|          | 12/1000 [00:31<42:10,  2.56s/it]"


def _run(tmp_path, epochs: str, between: list[str] = ()) -> dict:
    (tmp_path / "train.log").write_text("\n".join([*(h.format(epochs=epochs) for h in HEADER), *between]) + "\n")
    (tmp_path / "hang.log").write_text(STUCK + "\n")
    return diagnose([tmp_path]).to_dict()


def test_a_hang_before_the_first_batch_of_a_stream_is_a_data_stall(tmp_path):
    doc = _run(tmp_path, "9,223,372,036,854,775,807")
    assert (doc["verdict"]["interruption"], doc["verdict"]["category"]) == ("soft", "data_pipeline_stall")
    assert doc["root_cause"]["rank"] is None  # rank 5 reported the hang; it did not cause it


def test_a_sized_training_set_is_not_this(tmp_path):
    doc = _run(tmp_path, "3")
    assert doc["verdict"]["category"] != "data_pipeline_stall"


def test_a_stream_that_gave_a_step_is_not_this(tmp_path):
    doc = _run(tmp_path, "9,223,372,036,854,775,807", between=[STEP])
    assert not any(f["id"].startswith("first-batch-stall") for f in doc["findings"])
