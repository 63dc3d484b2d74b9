"""The watch's rules with a controlled clock: silence of the job and of one rank, error
signatures from the diagnosis catalogue (replayed on the recorded incidents), step-time band."""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose
from gpulib.watch import rules as rules_module
from gpulib.watch.metrics import exposition
from gpulib.watch.rules import WatchConfig, WatchRules
from tests.prometheus_server import sample_value

LOG = "train.log"


def _steps(rules: WatchRules, t: float, ranks, step: int, s_per_step: float = 0.5) -> list:
    lines = [f"[rank{r}]: step {step} | loss 2.1 | {s_per_step} s/step".encode() for r in ranks]
    return rules.feed(LOG, lines, now=t)


def test_one_silent_rank_then_the_silent_job_each_alert_once():
    rules = WatchRules(WatchConfig(silence_s=10), [LOG], now=0)
    rules.feed(LOG, [b"[rank2]: dataset ready"], now=0)  # rank 2 never prints progress
    _steps(rules, 1, [0, 1], 1)
    for t in range(2, 12):
        _steps(rules, t, [0], t)
    assert rules.tick(now=10.5) == []  # rank 1 quiet for 9.5 s: not yet
    alerts = rules.tick(now=12)
    assert [(a.kind, a.rank) for a in alerts] == [("rank_silence", 1)]
    assert "rank 1 printed nothing for 11 s" in alerts[0].message
    assert rules.tick(now=13) == []  # once per episode
    alerts = rules.tick(now=22)
    assert [a.kind for a in alerts] == ["job_silence"] and alerts[0].severity == "critical"
    assert "no log line from any rank for 11 s" in alerts[0].message
    assert rules.tick(now=40) == []
    _steps(rules, 41, [0, 1], 41)  # the job prints again: both re-arm
    assert rules.tick(now=60)[0].kind == "job_silence"
    assert rules.alerts_total == {"job_silence": 2, "rank_silence": 1, "signature": 0, "step_time": 0}


def test_a_job_that_never_prints_is_silent_from_the_watch_start():
    rules = WatchRules(WatchConfig(silence_s=5), [LOG], now=100)
    assert rules.tick(now=104) == []
    (alert,) = rules.tick(now=106)
    assert alert.kind == "job_silence" and "since the watch started" in alert.message


def test_cuda_oom_names_the_rank_and_is_raised_once():
    rules = WatchRules(WatchConfig(), [LOG], now=0)
    oom = (b"[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total "
           b"capacity of 79.15 GiB of which 1.02 GiB is free.")
    (alert,) = rules.feed(LOG, [b"[rank0]: step 1 | 0.5 s/step", oom], now=1)
    assert (alert.kind, alert.signature, alert.rank, alert.line, alert.severity) == ("signature", "cuda_oom", 2, 2, "error")
    assert "rank 2" in alert.message and "Tried to allocate 2.00 GiB" in alert.message
    assert rules.feed(LOG, [oom], now=2) == []


def test_benign_lines_and_keyboard_interrupt_raise_nothing():
    rules = WatchRules(WatchConfig(), [LOG], now=0)
    lines = [b"host-1:100:100 [0] NCCL INFO NET/IB : No device found.",
             b"[rank0]: torch 2.3.1+cu121 starting", b"host-1:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
             b"[rank0]: Saving checkpoint to /ckpt/step_100.pt", b"[rank0]: Training completed",
             b"Traceback (most recent call last):", b"KeyboardInterrupt"]
    assert rules.feed(LOG, lines, now=1) == []


@pytest.mark.parametrize("case, log, rank, signature", [
    ("case-01-xid79-fell-off-bus", "slurm-88231.out", 13, "watchdog_stuck"),
    ("case-03-cuda-oom-rank2", "slurm-41877.out", 2, "cuda_oom"),
    ("case-06-ecc-dbe-truncated-ckpt", "train.log", 5, "cuda_error"),
])
def test_the_first_signature_on_a_recorded_incident_is_the_diagnosed_culprit(incidents, case, log, rank, signature):
    """Streamed in 40-line polls, the first alert names the rank ``gpulib diagnose`` blames."""
    path = incidents / case / "input" / log
    rules = WatchRules(WatchConfig(), [str(path)], now=0)
    lines = path.read_bytes().split(b"\n")
    alerts = []
    for i in range(0, len(lines), 40):
        alerts += rules.feed(str(path), lines[i:i + 40], now=i)
    first = next(a for a in alerts if a.kind == "signature")
    assert (first.signature, first.rank) == (signature, rank)
    assert diagnose([incidents / case / "input"]).root_cause.rank == rank


def test_a_healthy_run_raises_nothing_not_even_silence_after_it_completed(incidents):
    root = incidents / "case-07-healthy-run" / "input"
    logs = sorted(p for p in root.rglob("*.log"))
    assert logs
    for path in logs:
        rules = WatchRules(WatchConfig(silence_s=60), [str(path)], now=0)
        lines = path.read_bytes().split(b"\n")
        alerts = [a for i in range(0, len(lines), 40) for a in rules.feed(str(path), lines[i:i + 40], now=i)]
        assert alerts == [], path
        assert rules.tick(now=10_000) == []
        assert "the job reports completion" in rules.notices[-1] and "Training completed" in rules.notices[-1]
        rules.feed(str(path), [b"[rank0]: step 1 | loss 2.0 | 1.0 s/step"], now=10_001)  # a new run in the same file
        assert "training steps again" in rules.notices[-1]
        assert [a.kind for a in rules.tick(now=10_100)] == ["job_silence"]


def test_step_time_out_of_band_after_warmup_with_hysteresis():
    rules = WatchRules(WatchConfig(step_band=2.0, step_warmup=5), [LOG], now=0)
    assert _steps(rules, 1, [0], 1, s_per_step=3.0) == []  # warm-up steps are not judged
    for step in range(2, 8):
        assert _steps(rules, step, [0], step, s_per_step=1.0) == []
    (alert,) = _steps(rules, 8, [0], 8, s_per_step=2.6)
    assert alert.kind == "step_time" and alert.rank == 0 and "2.6 s" in alert.message and "median of 1 s" in alert.message
    assert _steps(rules, 9, [0], 9, s_per_step=1.9) == []  # still slow-ish: no re-alert at the band's edge
    assert _steps(rules, 10, [0], 10, s_per_step=2.7) == []
    _steps(rules, 11, [0], 11, s_per_step=1.0)  # back well inside the band: re-armed
    assert [a.kind for a in _steps(rules, 12, [0], 12, s_per_step=3.0)] == ["step_time"]


def test_step_time_from_timestamps_when_the_log_prints_no_rate():
    rules = WatchRules(WatchConfig(step_warmup=3), [LOG], now=0)
    alerts = []
    for i, (stamp, step) in enumerate([("10:00:00", 100), ("10:00:10", 110), ("10:00:20", 120), ("10:00:30", 130),
                                       ("10:01:30", 140)]):
        alerts += rules.feed(LOG, [f"2026-02-10 {stamp},000 [rank3] INFO step {step} | loss 1.2".encode()], now=i)
    stream = rules.streams[(LOG, 3)]
    assert list(stream.steps)[:3] == [1.0, 1.0, 1.0] and stream.step_seconds == 6.0
    assert [a.kind for a in alerts] == ["step_time"]


def test_metrics_exposition_has_the_per_rank_gauges():
    rules = WatchRules(WatchConfig(silence_s=30), [LOG], now=0)
    rules.feed(LOG, [b'[rank1]: step 4 | 0.25 s/step | fwd_bwd_ms=200.5', b'host-"x": hello'], now=10)
    text = exposition(rules, host="node-a", now=25)

    def value(name, **labels):
        return sample_value(text, name, **labels)

    assert value("gpulib_watch_seconds_since_last_line", file="train.log", rank="1", host="node-a") == 15.0
    assert value("gpulib_watch_seconds_since_last_line", file="train.log", rank="", host="node-a") == 15.0
    later = WatchRules(WatchConfig(), [LOG], now=1795946903.25)
    later.feed(LOG, [b"[rank0]: hello"], now=1795946903.25)
    assert sample_value(exposition(later, host="h", now=1795946904), "gpulib_watch_last_line_timestamp_seconds",
                        file="train.log", rank="0", host="h") == 1795946903.25  # unix times keep their digits
    assert value("gpulib_watch_step_seconds", file="train.log", rank="1", host="node-a") == 0.25
    assert value("gpulib_watch_step_phase_ms", file="train.log", rank="1", host="node-a", phase="fwd_bwd_ms") == 200.5
    assert value("gpulib_watch_silence_threshold_seconds", host="node-a") == 30
    assert value("gpulib_watch_alerts_total", host="node-a", kind="signature") == 0
    assert value("gpulib_watch_heartbeat", file="train.log", rank="1", host="node-a") == 1
    assert "# TYPE gpulib_watch_lines_total counter" in text


def test_binary_junk_and_undecodable_lines_are_survived():
    rules = WatchRules(WatchConfig(), [LOG], now=0)
    junk = [b"\x00\xff\xfe" * 300, b"[rank\xff]: step \xff", b"\x1b[31m[rank4]: step 9 | 0.5 s/step\x1b[0m", b""]
    assert rules.feed(LOG, junk, now=1) == []
    assert rules.streams[(LOG, None)].lines_total == 4


def test_a_burst_samples_each_ranks_newest_step_and_still_sees_every_signature(monkeypatch):
    monkeypatch.setattr(rules_module, "EXACT_PROGRESS_LINES", 10)
    rules = WatchRules(WatchConfig(), [LOG], now=0)
    burst = [f"[rank{r}]: step {s} | loss 2.0 | {0.5 + r / 10} s/step".encode() for s in range(1, 30) for r in range(4)]
    burst.insert(57, b"[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered")
    burst.append(b"[rank1]: progress note without a step")
    (alert,) = rules.feed(LOG, burst, now=1)
    assert (alert.signature, alert.rank, alert.line) == ("cuda_error", 3, 58)
    for r in range(4):
        stream = rules.streams[(LOG, r)]
        assert stream.heartbeat and stream.step_seconds == pytest.approx(0.5 + r / 10) and len(stream.steps) == 1
