"""Row remapping in a GPU snapshot: what needs a reset, what needs an RMA, what is history.

The remapped-row counts are the InfoROM's record over the GPU's life. Rows remapped after an
uncorrectable error, with nothing pending and no failure, are a GPU that repaired itself: history
to watch, not the cause of an interruption. A remap still pending after uncorrectable errors needs
a reset before the next job; a remapping failure needs an RMA; an uncorrectable error since the
last reset (volatile DBE) is a live fault."""

from __future__ import annotations

from gpulib.diagnose import diagnose
from tests.diagnose.test_bundles import nvml_gpu, snapshot_json, write_bundle


def _snapshot(tmp_path, **gpu2):
    gpus = [nvml_gpu(i) for i in range(4)]
    gpus[2].update(gpu2)
    write_bundle(tmp_path / "rr-07", "rr-07", {"nvml/snapshot.json": snapshot_json(gpus)}, {"nvml": "ok"})
    return diagnose([tmp_path])


def test_rows_remapped_in_the_past_with_nothing_pending_are_history_not_a_failure(tmp_path):
    d = _snapshot(tmp_path, remapped_rows_uncorrectable=2)
    assert d.interruption == "none"
    history = [f for f in d.findings if f.category == "gpu_memory_error"]
    assert [(f.role, f.severity, f.gpu_index) for f in history] == [("context", "info", 2)]
    assert "already remapped" in history[0].title


def test_control_a_remap_still_pending_after_uncorrectable_errors_needs_a_reset(tmp_path):
    d = _snapshot(tmp_path, remapped_rows_uncorrectable=2, remapped_rows_pending=True)
    assert (d.interruption, d.category, d.root_cause.gpu_index) == ("hard", "gpu_memory_error", 2)


def test_control_a_remapping_failure_is_an_rma(tmp_path):
    d = _snapshot(tmp_path, remapped_rows_uncorrectable=8, remapped_rows_failure=True)
    assert (d.interruption, d.category) == ("hard", "gpu_memory_error")
    assert any("RMA" in a for a in d.root_cause.actions)


def test_control_an_uncorrectable_error_since_the_last_reset_is_a_live_fault(tmp_path):
    d = _snapshot(tmp_path, remapped_rows_uncorrectable=2, ecc_volatile_dbe=1)
    assert (d.interruption, d.category) == ("hard", "gpu_memory_error")
