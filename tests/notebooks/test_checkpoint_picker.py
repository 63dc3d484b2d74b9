"""Notebook 07's candidate picker without a kernel: the recommended checkpoint first, the older
and the rejected ones with why, the picked one's copyable resume command, and the steps lost."""

from __future__ import annotations

import pandas as pd
import pytest

from gpulib.checkpoints import find_latest
from gpulib.notebook import face as nbk
from gpulib.notebook import steps as checks
from gpulib.notebook.checkpoint_picker import CheckpointPicker, candidate_text
from gpulib.notebook.tables import open_evidence
from tests.conftest import INCIDENTS

#: The corpus incident with checkpoints: step 6000 truncated by the crash, 4000 and 2000 complete;
#: the log's last step is 6000 (train.log:556), at about 2.3 s per step.
CASE_06 = INCIDENTS / "case-06-ecc-dbe-truncated-ckpt" / "input"


@pytest.fixture(scope="module")
def candidates():
    if not CASE_06.is_dir():
        pytest.skip(f"incident not found at {CASE_06}")
    ev = open_evidence(str(CASE_06))
    return checks.checkpoint_candidates(ev.checkpoints(), ev.training_steps())


def test_candidates_recommended_first_then_older_then_rejected_with_why(candidates):
    assert [(c["name"], c["verdict"]) for c in candidates] == [
        ("ckpt_step_004000.pt", "recommended"), ("ckpt_step_002000.pt", "complete"),
        ("ckpt_step_006000.pt", "rejected")]
    rejected = candidates[2]
    assert "truncated" in rejected["why"] and "never committed" in rejected["why"]
    assert rejected["resume_command"].startswith("# do not resume from ") and rejected["steps_lost"] is None
    assert candidates[0]["label"] == "ckpt_step_004000.pt (step 4000) - recommended"
    assert candidates[2]["label"].startswith("ckpt_step_006000.pt (step 6000) - REJECTED: truncated")


def test_steps_lost_is_the_last_logged_step_minus_the_checkpoint_step(candidates):
    recommended, older = candidates[0], candidates[1]
    assert recommended["steps_lost"] == 2000 and older["steps_lost"] == 4000
    assert recommended["last_step"]["step"] == 6000 and recommended["last_step"]["line"] == 556
    text = checks.steps_lost_text(recommended)
    assert text.startswith("steps lost: 2000 (last logged step 6000 at 2025-08-14T16:19:59Z in train.log:556; "
                           "checkpoint step 4000)")
    assert "about 1 h 1" in text and "s/step" in text  # 2000 steps x ~2.3 s


def test_picker_starts_on_the_recommended_command_and_follows_the_pick(candidates):
    picker = CheckpointPicker(candidates)
    assert picker.dropdown.options[0][0].endswith("- recommended")
    assert picker.command.value.startswith("torchrun ") and picker.command.value.endswith("ckpt_step_004000.pt")
    assert "steps lost: 2000" in picker.details.value
    picker.dropdown.value = 1  # go further back
    assert picker.command.value.endswith("ckpt_step_002000.pt") and "--resume" in picker.command.value
    assert "steps lost: 4000" in picker.details.value and "older than the recommended" in picker.details.value
    picker.dropdown.value = 2  # the truncated one: why, and a command that cannot run
    assert picker.command.value.startswith("# do not resume") and "truncated" in picker.details.value
    assert "steps lost: not resumable" in picker.details.value
    assert picker.widget().children == (picker.dropdown, picker.details, picker.command)


def test_headless_shows_the_recommended_one_as_plain_text(candidates, monkeypatch):
    shown = []
    monkeypatch.setattr("gpulib.notebook.checkpoint_picker.display", lambda obj, **kw: shown.append(obj))
    CheckpointPicker(candidates).display(interactive=False)
    text = shown[0]["text/plain"]
    assert text.startswith("ckpt_step_004000.pt: RESUME FROM THIS") and "steps lost: 2000" in text
    assert text.splitlines()[-1] == candidates[0]["resume_command"]  # the command alone on its last line
    assert "ckpt_step_006000" not in text
    nbk.CheckpointPicker([]).display(interactive=True)
    assert "no checkpoint found" in shown[-1]["text/plain"]


def test_only_broken_checkpoints_offer_no_command(tmp_path):
    (tmp_path / "ckpt_step_000100.pt").write_bytes(b"PK\x03\x04" + b"\0" * 200)  # a save cut after 204 bytes
    [only] = checks.checkpoint_candidates(find_latest([tmp_path]))
    assert only["verdict"] == "rejected" and only["resume_command"].startswith("#")
    assert candidate_text(only).startswith("ckpt_step_000100.pt: REJECTED: ")


def test_last_logged_step_is_the_last_in_time_not_the_highest():
    steps = pd.DataFrame({"time": pd.to_datetime(["2025-01-01T00:00Z", "2025-01-01T01:00Z", "2025-01-01T02:00Z"]),
                          "rank": [0, 0, 0], "step": [900, 1000, 850],  # restarted from 800 at 01:30
                          "step_time_s": [1.0, 1.0, 3.0], "file": "train.log", "line": [1, 2, 3]})
    last = checks.last_logged_step(steps)
    assert last["step"] == 850 and last["line"] == 3 and last["seconds_per_step"] == 1.0
    row = checks.checkpoint_candidates({"resume_from": "/c/ckpt_800.pt", "step": 800, "resume_command": "x"},
                                       steps)[0]
    assert row["steps_lost"] == 50 and row["redo_s"] == 50.0
    assert "checkpoint's step 900 is past" in checks.steps_lost_text({**row, "step": 900, "steps_lost": None})
    assert checks.last_logged_step(steps.iloc[0:0]) is None
    assert "unknown (no training step" in checks.steps_lost_text({**row, "last_step": None})
