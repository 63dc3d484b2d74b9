"""Steps that wait most of their time for data (trainers' data-time vs step-time readings), and controls.

Fixtures are progress lines in the shapes trainers print them (open_clip, timm, mmengine); hosts,
paths, times and figures are ours.
"""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose


def _clip(times: list[tuple[float, float]]) -> str:
    lines = ["2024-03-05,09:00:00 | INFO | Start epoch 0"]
    for i, (data, batch) in enumerate(times, 1):
        lines.append(f"2024-03-05,09:{i // 60:02d}:{i % 60:02d} | INFO | Train Epoch: 0 [{i * 2048:8d}/1281167 ( 0%)] "
                     f"Data (t): {data:.3f} Batch (t): {batch:.3f}, {2048 / batch:.2f}/s, {256 / batch:.3f}/s/gpu "
                     "LR: 0.000100 Logit Scale: 14.286 Contrastive_loss: 6.1000 (6.2000) Loss: 6.1000 (6.2000)")
    return "\n".join(lines) + "\n"


def _timm(times: list[tuple[float, float]]) -> str:
    return "".join(f"Train: 1 [{i * 50:4d}/5004 ({i:2d}%)]  Loss: 6.421 (6.50)  Time: {batch:.3f}s,  {256 / batch:7.2f}/s  "
                   f"({batch:.3f}s,  {256 / batch:7.2f}/s)  LR: 2.000e-03  Data: {data:.3f} ({data:.3f})\n"
                   for i, (data, batch) in enumerate(times, 1))


def _mmengine(times: list[tuple[float, float]]) -> str:
    return "".join(f"03/05 09:{i:02d}:00 - mmengine - INFO - Epoch(train)  [1][{i * 50:4d}/2000]  lr: 1.0000e-02  "
                   f"eta: 1:02:03  time: {batch:.4f}  data_time: {data:.4f}  memory: 9120  loss: 1.2345\n"
                   for i, (data, batch) in enumerate(times, 1))


def _periodic(every: int = 8, wait: float = 55.0, n: int = 40) -> list[tuple[float, float]]:
    return [(wait, wait + 1.1) if i and i % every == 0 else (0.08, 1.1) for i in range(n)]


def _run(tmp_path, text: str):
    (tmp_path / "train.log").write_text(text)
    return diagnose([tmp_path])


def _found(d) -> list:
    return [f for f in d.findings if f.id.startswith("data-wait")]


@pytest.mark.parametrize("shape", [_clip, _timm, _mmengine])
def test_periodic_long_data_waits_are_a_data_pipeline_stall(tmp_path, shape):
    d = _run(tmp_path, shape(_periodic()))
    root = d.root_cause
    assert (d.interruption, root.category, root.id[:9]) == ("soft", "data_pipeline_stall", "data-wait")
    assert "4 of 39 logged steps waited for data (up to 55 s)" in root.title
    assert len(root.quotes) == 3 and "55.0" in root.quotes[0].text


def test_a_slow_first_batch_and_one_cold_read_are_no_finding(tmp_path):
    times = [(40.0, 41.2)] + [(0.05, 1.1)] * 20 + [(30.0, 31.1)] + [(0.05, 1.1)] * 20
    d = _run(tmp_path, _clip(times))  # workers starting, then one cold cache read
    assert not _found(d) and d.category != "data_pipeline_stall"


def test_short_or_rare_waits_are_no_finding(tmp_path):
    assert not _found(_run(tmp_path, _timm([(0.3, 0.5)] * 30)))  # data-bound, but by fractions of a second
    rare = tmp_path / "rare"
    rare.mkdir()
    (rare / "train.log").write_text(_mmengine(_periodic(every=50, wait=15.0, n=200)))
    assert not _found(diagnose([rare]))  # 3 waits of 15 s in 200 steps: 23% of the time, under the share


def test_a_process_killed_later_is_the_cause_not_the_slow_steps(tmp_path):
    killed = ("Traceback (most recent call last):\n  File \"/srv/det/train.py\", line 77, in <module>\n"
              "RuntimeError: DataLoader worker (pid 48120) is killed by signal: Killed.\n")
    d = _run(tmp_path, _mmengine(_periodic(every=3, wait=2.0, n=12)) + killed)
    assert _found(d) and d.root_cause.category == "host_oom"  # the stall is context for what killed it
