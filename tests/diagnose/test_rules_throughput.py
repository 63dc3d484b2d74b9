"""A run whose throughput collapsed (rules/throughput.py), the progress lines that carry a throughput
(training_log: ``images/sec``, ``samples/s``, ``tokens/s``, ``it/s``), and a log that ends in a user's
or launcher's interrupt (the catalogue's ``generic-interrupt`` row): never a "none". Own hosts, pids,
paths and numbers; the tools' own layouts (tf_cnn_benchmarks, top, iostat, nfsiostat, mount)."""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose
from gpulib.parsers import training_log

HEAD = ("[ml@gpu-r7 ~]$ mpirun -np 16 -H gpu-r7:8,gpu-r8:8 python tf_cnn_benchmarks.py --model resnet101 "
        "--batch_size 32 --variable_update horovod --data_dir /datasets/inet/train-tfr --num_batches 8000\n"
        "Model:       resnet101\nBatch size:  512 global\nRunning warm up\nDone warm up\nStep\tImg/sec\ttotal_loss\n")


def _steps(rates: list[float], every: int = 200) -> str:
    return "".join(f"{every * k + 1 if k == 0 else every * k}\timages/sec: {r:.1f} +/- 3.1 (jitter = 9.4)\t"
                   f"{7.9 - 0.01 * k:.3f}\n" for k, r in enumerate(rates))


COLLAPSING = [2210.4, 2214.9, 2207.3, 2203.8, 1844.0, 1302.5, 1021.7, 944.2]
INTERRUPT = "^C[gpu-r7:73120] *** Process received signal ***\n"
IO_SNAPSHOT = (
    "[root@gpu-r7 ~]# mount | grep datasets\n"
    "filer3:/vol/ds on /datasets type nfs4 (rw,relatime,vers=4.2,rsize=1048576,hard,proto=tcp,addr=10.8.0.3)\n"
    "[root@gpu-r7 ~]# top -b -n1 | sed -n 3p\n"
    "%Cpu(s):  5.2 us,  1.1 sy,  0.0 ni, 59.5 id, 34.0 wa,  0.0 hi,  0.2 si,  0.0 st\n")
NFSIOSTAT = (
    "filer3:/vol/ds mounted on /datasets:\n\n"
    "read:              ops/s            kB/s           kB/op         retrans         avg RTT (ms)    avg exe (ms)\n"
    "                 288.100       29018.700         100.720        0 (0.0%)         143.905         170.311\n")
IOSTAT = ("avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n"
          "           6.02    0.00    1.33   31.70    0.00   60.95\n")


def test_progress_lines_with_a_throughput_are_a_job_log():
    text = HEAD + _steps(COLLAPSING[:4])
    assert training_log.looks_like(text)
    steps = [ev for ev in training_log.parse(text).records if ev.kind == "step"]
    assert [ev.details["step"] for ev in steps] == [1, 200, 400, 600]
    assert steps[1].details["throughput"] == 2214.9 and steps[1].details["throughput_unit"] == "images/sec"


@pytest.mark.parametrize("line, rate, unit", [
    ("step 340 | loss 2.113 | 1184.6 samples/s | lr 3.0e-4", 1184.6, "samples/s"),
    ("iteration 1200/ 20000 | tokens/s: 48211 | loss 3.02", 48211.0, "tokens/s"),
    ("Epoch 2:  41%|████      | 410/1000 [02:10<03:07,  3.15it/s, loss=0.412]", 3.15, "it/s"),
])
def test_throughput_forms(line, rate, unit):
    (ev,) = training_log.parse(line + "\n").records
    assert ev.kind == "step" and ev.details["throughput"] == rate and ev.details["throughput_unit"] == unit


@pytest.mark.parametrize("evidence", [IO_SNAPSHOT, NFSIOSTAT, IOSTAT])
def test_a_collapse_beside_a_host_waiting_on_storage_is_a_data_stall(tmp_path, evidence):
    (tmp_path / "bench.txt").write_text(HEAD + _steps(COLLAPSING) + INTERRUPT)
    (tmp_path / "io-gpu-r7.txt").write_text(evidence)
    d = diagnose([tmp_path])
    assert (d.interruption, d.category) == ("soft", "data_pipeline_stall")
    assert d.root_cause.id.startswith("throughput-collapse")
    assert d.root_cause.quotes[0].text.startswith("800\timages/sec: 1844.0")


def test_a_collapse_while_a_gpu_throttled_is_thermal(tmp_path):
    (tmp_path / "bench.txt").write_text(HEAD + _steps(COLLAPSING) + INTERRUPT)
    (tmp_path / "dcgm.txt").write_text("Warning: clocks event due to thermal violation in GPU 5\n")
    d = diagnose([tmp_path])
    assert d.category == "thermal_throttling"
    (collapse,) = [f for f in d.findings if f.id.startswith("throughput-collapse")]
    assert collapse.category == "thermal_throttling" and "throttled" in collapse.title


def test_a_collapse_nothing_explains_is_quoted_and_the_interrupt_is_no_normal_end(tmp_path):
    (tmp_path / "bench.txt").write_text(HEAD + _steps(COLLAPSING) + INTERRUPT)
    d = diagnose([tmp_path])
    assert d.interruption == "unknown"
    assert any(f.id.startswith("throughput-collapse") for f in d.findings)


@pytest.mark.parametrize("end", [
    "^C\n",
    "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\nKeyboardInterrupt\n",
    "[1]+  Terminated              python train.py\n",
    "2026-05-02 10:14:03 INFO trainer: Received SIGTERM, stopping\n",
])
def test_a_log_that_ends_in_an_interrupt_is_never_none(tmp_path, end):
    steady = [1510.2, 1507.9, 1512.4, 1509.0]
    (tmp_path / "run.log").write_text("".join(f"step {100 * k} | loss {2.0 - 0.1 * k:.2f} | {r} samples/s\n"
                                              for k, r in enumerate(steady)) + end)
    assert diagnose([tmp_path]).interruption != "none"


@pytest.mark.parametrize("rates", [
    [2210.4, 2214.9, 2207.3, 902.0, 2203.8, 2209.1, 2206.5, 2211.0],  # one slow step, then back
    [402.0, 811.5, 1390.2, 2150.7, 2203.8, 2209.1, 2206.5, 2211.0],  # a slow warm-up
])
def test_a_dip_or_a_warm_up_of_a_completed_run_is_no_collapse(tmp_path, rates):
    (tmp_path / "bench.txt").write_text(HEAD + _steps(rates) + "Training completed\n")
    (tmp_path / "io-gpu-r7.txt").write_text(IO_SNAPSHOT)
    d = diagnose([tmp_path])
    assert d.interruption == "none"
    assert not any(f.id.startswith("throughput-collapse") for f in d.findings)
