"""``gpulib watch`` end to end: real child processes write training logs; the watch (another
child) must alert within its bound, capture a bundle, write the diagnosis, keep following across
rotation and truncation, and serve per-rank gauges on 127.0.0.1. Every child is stopped in a
``finally``; every wait is bounded."""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpulib.evidence.bundle import Bundle, verify
from tests.prometheus_server import sample_value, stop_process

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of "
       "79.15 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.10 GiB memory in use.")


class Watch:
    """A ``gpulib watch`` child whose stdout lines are collected by a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "gpulib", "watch", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout_s: float = 45) -> re.Match:
        deadline = time.monotonic() + timeout_s
        for line in self.lines:
            if m := re.search(pattern, line):
                return m
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if m := re.search(pattern, line):
                return m
        pytest.fail(f"no line matching {pattern!r} within {timeout_s:.0f} s; watch said:\n" + "\n".join(self.lines))

    def finish(self, timeout_s: float = 90) -> int:
        rc = self.proc.wait(timeout_s)
        while (line := self._queue.get(timeout=5)) is not None:
            self.lines.append(line)
        return rc


@contextmanager
def children():
    procs: list = []
    try:
        yield procs
    finally:
        for p in procs:
            stop_process(p.proc if isinstance(p, Watch) else p)


def trainer(log: Path, ranks: int, steps: int, then: str) -> subprocess.Popen:
    """A child that appends rank-prefixed step lines, then stalls (``then='stall'``) or dies of OOM on rank 2."""
    code = textwrap.dedent(f"""
        import sys, time
        with open({str(log)!r}, "a", buffering=1) as log:
            for step in range(1, {steps} + 1):
                for rank in range({ranks}):
                    log.write(f"[rank{{rank}}]: step {{step}} | loss 2.31 | 0.10 s/step\\n")
                time.sleep(0.1)
            if {then!r} == "oom":
                log.write("[rank2]: Traceback (most recent call last):\\n")
                log.write("[rank2]:   File \\"train.py\\", line 88, in forward\\n")
                log.write("[rank2]: " + {OOM!r} + "\\n")
                sys.exit(1)
            time.sleep(120)  # the hang: alive, silent
    """)
    return subprocess.Popen([sys.executable, "-c", code])


def watch_once(*args: str) -> subprocess.CompletedProcess:
    """``gpulib watch ARGS`` to its end (bad arguments, or a bounded ``--max-seconds`` run)."""
    return subprocess.run([sys.executable, "-m", "gpulib", "watch", *args], capture_output=True, text=True, timeout=60)


def _metrics(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_a_stalled_job_raises_silence_captures_a_bundle_and_writes_the_diagnosis(tmp_path):
    log, out = tmp_path / "train.log", tmp_path / "incidents"
    with children() as procs:
        watch = Watch("--log", str(log), "--silence", "2s", "--out", str(out), "--once", "--max-seconds", "90",
                      "--listen", "127.0.0.1:0", "--host", "node-t", "--poll", "0.2")
        procs.append(watch)
        url = watch.wait_for(r"metrics on (http://127\.0\.0\.1:\d+/metrics)")[1]
        procs.append(trainer(log, ranks=2, steps=15, then="stall"))
        def silence(text):
            return sample_value(text, "gpulib_watch_seconds_since_last_line", file=str(log), rank="1", host="node-t")

        deadline = time.monotonic() + 30
        while silence(text := _metrics(url)) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert silence(text) is not None, text
        assert sample_value(text, "gpulib_watch_step_seconds", rank="0", host="node-t") == 0.1, text
        started = time.monotonic()
        alert = watch.wait_for(r"ALERT job_silence \[critical\] .*no log line from any rank for (\d+) s")
        assert 2 <= int(alert[1]) < 30
        assert time.monotonic() - started < 30
        assert watch.finish() == 1
    incident = next(out.iterdir())
    assert incident.name.endswith("-job_silence")
    assert json.loads((incident / "alert.json").read_text())["kind"] == "job_silence"
    bundle = Bundle.open(incident / "node-t")
    assert bundle.host == "node-t" and verify(bundle.root).ok
    assert any(f.endswith("train.log") for f in bundle.manifest["files"]), "the followed log is in the bundle"
    diagnosis = json.loads((incident / "diagnosis.json").read_text())
    assert diagnosis["schema"] == "gpulib.diagnosis/1"
    assert (incident / "diagnosis.txt").read_text().strip()
    assert f"diagnosis ({incident / 'diagnosis.json'})" in "\n".join(watch.lines)
    assert watch.lines[-1] == f"gpulib watch: 1 incident(s) captured: {incident}"


def test_a_cuda_oom_raises_a_signature_alert_naming_the_rank_and_the_diagnosis_agrees(tmp_path):
    log, out = tmp_path / "slurm-7.out", tmp_path / "incidents"
    with children() as procs:
        watch = Watch("--log", str(log), "--silence", "5m", "--out", str(out), "--once", "--max-seconds", "90",
                      "--listen", "off", "--host", "node-o", "--poll", "0.2")
        procs.append(watch)
        watch.wait_for("following 1 file")
        procs.append(trainer(log, ranks=4, steps=5, then="oom"))
        alert = watch.wait_for(r"ALERT signature \[error\] \S+: rank (\d+): cuda oom at (\S+):(\d+): torch.OutOfMemoryError")
        assert alert[1] == "2" and alert[2] == str(log) and alert[3] == "23"  # 5 steps x 4 ranks, traceback, OOM
        assert watch.finish() == 1
    (incident,) = out.iterdir()
    diagnosis = json.loads((incident / "diagnosis.json").read_text())
    assert diagnosis["verdict"]["category"] == "cuda_oom" and diagnosis["verdict"]["interruption"] == "soft"
    assert diagnosis["root_cause"]["rank"] == 2


def test_rotation_and_copytruncate_keep_the_watch_following(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("[rank0]: step 1 | 0.1 s/step\n" * 40)  # before the watch: not read
    with children() as procs:
        watch = Watch("--log", str(log), "--silence", "5m", "--max-seconds", "60", "--listen", "127.0.0.1:0",
                      "--poll", "0.2")
        procs.append(watch)
        url = watch.wait_for(r"metrics on (http://127\.0\.0\.1:\d+/metrics)")[1]
        with log.open("a") as h:
            h.write("[rank0]: step 2 | 0.1 s/step\n")
        deadline = time.monotonic() + 20
        while sample_value(_metrics(url), "gpulib_watch_lines_total", file=str(log), rank="0") is None:
            assert time.monotonic() < deadline, "the appended line never arrived"
            time.sleep(0.2)
        # logrotate's default: rename, new file
        os.rename(log, tmp_path / "train.log.1")
        log.write_text("[rank5]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
        watch.wait_for(r"train.log: rotated")
        alert = watch.wait_for(r"ALERT signature .*rank (\d+): cuda error at \S+:(\d+):")
        assert (alert[1], alert[2]) == ("5", "1")
        # copytruncate: the same file emptied in place, then written again
        with log.open("r+") as h:
            h.truncate(0)
        with log.open("a") as h:
            h.write("[rank6]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
                    "unhandled system error, NCCL version 2.20.5\n")
        watch.wait_for(r"train.log: truncated")
        alert = watch.wait_for(r"ALERT signature .*rank (\d+): nccl error at \S+:(\d+):")
        assert (alert[1], alert[2]) == ("6", "1")
        text = _metrics(url)
        assert sample_value(text, "gpulib_watch_alerts_total", kind="signature") == 2, text
        watch.proc.terminate()  # SIGTERM: a clean stop
        assert watch.finish(30) == 1


def test_bad_arguments_are_clear_errors(tmp_path):
    done = watch_once("--log", str(tmp_path), "--max-seconds", "1")
    assert done.returncode == 2 and str(tmp_path) in done.stderr and "is a folder" in done.stderr
    done = watch_once("--log", "x.log", "--silence", "soon")
    assert done.returncode == 2 and "expected a positive duration" in done.stderr
    done = watch_once("--log", "x.log", "--listen", "localhost")
    assert done.returncode == 2 and "expected HOST:PORT" in done.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = watch_once("--log", "x.log", "--listen", f"127.0.0.1:{port}", "--max-seconds", "1")
    assert done.returncode == 2 and f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr, done.stderr


def test_no_alert_within_max_seconds_exits_0(tmp_path):
    log = tmp_path / "quiet.log"
    log.write_text("")
    done = watch_once("--log", str(log), "--silence", "1h", "--max-seconds", "1", "--listen", "off")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ALERT" not in done.stdout
