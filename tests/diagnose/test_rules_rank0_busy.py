"""A silent rank 0 that the others timed out waiting for: busy with rank-0-only work.

Lines are written in torch's and the kernel's layouts with invented hosts, pids and values. Each
positive case has its negative controls: rank 0 printed its own error, the missing rank is not
rank 0, and a GPU fault on rank 0's node.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

TIMEOUT = ("[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=4410, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 18004{r}1 "
           "milliseconds before timing out.")
TQDM = "Tokenizing train split:  37%|███▋      | 740000/2000000 [29:58<51:02, 411.50 examples/s]"


def _run(tmp_path, ranks, extra: list[str] = (), files: dict[str, str] | None = None) -> dict:
    lines = [*extra, *(TIMEOUT.format(r=r) for r in ranks)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    return diagnose([tmp_path]).to_dict()


def test_the_others_waited_for_a_silent_rank0(tmp_path):
    doc = _run(tmp_path, [1, 2, 3])
    assert (doc["verdict"]["interruption"], doc["root_cause"]["category"]) == ("soft", "application_error")
    assert doc["root_cause"]["rank"] == 0


def test_a_data_preparation_bar_short_of_100_percent_is_what_rank0_did(tmp_path):
    doc = _run(tmp_path, [1, 2, 3], extra=[TQDM])
    assert (doc["root_cause"]["category"], doc["root_cause"]["rank"]) == ("data_pipeline_stall", 0)


def test_rank0_that_printed_its_own_error_is_read_as_that_error(tmp_path):
    error = "[rank0]: KeyError: 'lm_head.weight'"
    doc = _run(tmp_path, [1, 2, 3], extra=[error])
    assert not any(f["id"].startswith("rank0-busy") for f in doc["findings"])


def test_another_missing_rank_is_not_guessed(tmp_path):
    doc = _run(tmp_path, [0, 1, 3])
    assert doc["verdict"]["interruption"] == "unknown"
    assert not any(f["id"].startswith("rank0-busy") for f in doc["findings"])


def test_a_gpu_fault_on_rank0s_node_comes_first(tmp_path):
    init = ("gpu-k7:51022:51022 [0] NCCL INFO comm 0x5610aa0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 "
            "commId 0x77aa - Init COMPLETE")
    dmesg = "[Sat Mar  7 09:12:44 2026] NVRM: Xid (PCI:0000:18:00): 79, pid=51022, GPU has fallen off the bus.\n"
    doc = _run(tmp_path, [1, 2, 3], extra=[init], files={"gpu-k7-dmesg.txt": dmesg})
    assert (doc["verdict"]["interruption"], doc["root_cause"]["category"]) == ("hard", "gpu_fell_off_bus")



# tqdm prints a rate ("it/s") or, when an item takes over a second, its inverse ("s/it"): a named
# data-preparation bar counts either way; a training loop's bar in the same units does not.
SLOW_PREP = "Building index shards...:  43%|████▎     | 26/61 [27:02<33:18, 57.10s/it]"
FAST_PREP = "Tokenizing corpus:  43%|████▎     | 26000/61000 [01:02<01:28, 412.70it/s]"
TRAIN_BAR = "Epoch 3:  43%|████▎     | 26/61 [27:02<33:18, 57.10s/it, loss=2.31]"
CANCEL = "slurmstepd: error: *** STEP 5120.0 ON node-c3 CANCELLED AT 2026-03-07T10:04:27 ***"


def test_a_seconds_per_item_bar_names_data_preparation(tmp_path):
    for bar in (SLOW_PREP, FAST_PREP):
        doc = _run(tmp_path, [1, 2, 3], extra=[bar])
        assert (doc["root_cause"]["category"], doc["root_cause"]["rank"]) == ("data_pipeline_stall", 0), bar


def test_a_training_bar_in_seconds_per_item_is_not_data_preparation(tmp_path):
    doc = _run(tmp_path, [1, 2, 3], extra=[TRAIN_BAR])
    assert doc["root_cause"]["category"] == "application_error"


def _cancelled(tmp_path, lines: list[str]) -> dict:
    (tmp_path / "slurm-5120.out").write_text("\n".join(lines) + "\n")
    return diagnose([tmp_path]).to_dict()


def test_a_step_cancelled_during_data_preparation_is_a_data_stall(tmp_path):
    doc = _cancelled(tmp_path, [SLOW_PREP, CANCEL, "srun: error: node-c3: task 0: Terminated"])
    assert (doc["verdict"]["interruption"], doc["root_cause"]["category"]) == ("soft", "data_pipeline_stall")
    assert doc["root_cause"]["rank"] == 0


def test_a_step_cancelled_after_training_resumed_or_with_an_error_is_not(tmp_path):
    for lines in ([SLOW_PREP, TRAIN_BAR, CANCEL], [SLOW_PREP, "[rank0]: KeyError: 'xyz'", CANCEL],
                  [SLOW_PREP.replace("43%", "100%"), CANCEL],
                  [SLOW_PREP, CANCEL.replace(" ***", " DUE TO TIME LIMIT ***")]):
        doc = _cancelled(tmp_path, lines)
        assert not any(f["id"].startswith("cancelled-in-data-prep") for f in doc["findings"]), lines


# ------------------------------------------------ what the busy rank last did decides the category
SCAN_BAR = ("val: Scanning /srv/corpora/street-scenes/labels/val... 80211 images, 96 backgrounds, 2 corrupt:  "
            "38%|███▊      | 81309/214000 [29:50<48:41, 45.4it/s]")
INDEX = "[2026-03-07 09:41:12,004] INFO build_index: building the sample index over 4096 shards (this may take a while)"
SAVE = "[2026-03-07 10:01:55,310] INFO trainer: Saving checkpoint to /ckpt/run-17/step_12000 (full state dict)"
EVAL = "[2026-03-07 10:01:55,310] INFO trainer: Running evaluation on the held-out split (rank 0)"


def test_a_scan_over_images_or_an_index_build_is_data_preparation(tmp_path):
    for last in (SCAN_BAR, INDEX):
        doc = _run(tmp_path, [1, 2, 3], extra=[last])
        assert (doc["root_cause"]["category"], doc["root_cause"]["rank"]) == ("data_pipeline_stall", 0), last


def test_a_checkpoint_save_or_an_evaluation_stays_the_jobs_own_work(tmp_path):
    """Negative controls: rank 0's last line is a save (after a finished-looking data step) or an evaluation."""
    for lines in ([SAVE], [TQDM, SAVE], [INDEX, EVAL]):
        doc = _run(tmp_path, [1, 2, 3], extra=lines)
        assert (doc["root_cause"]["category"], doc["root_cause"]["rank"]) == ("application_error", 0), lines
