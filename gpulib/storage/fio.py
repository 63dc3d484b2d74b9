"""The same two measurements as :mod:`measure`, by ``fio`` (the reference tool), when installed.

The job file lives in a private temporary folder; the probed files are named in it with
``--readonly`` on its command line, so fio refuses any write to them (fio would otherwise lay out missing files).
``ioengine=psync`` with one job per reader and ``direct`` as :mod:`measure` decided makes
the two engines measure the same thing; the benchmark compares them on one directory.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from gpulib.collect.runner import run_command
from gpulib.storage.measure import RAND_BLOCK, SEQ_BLOCK, IoMeasurement, reader_files


class FioError(Exception):
    """fio did not produce a usable result (the caller falls back to the Python engine)."""


def available() -> bool:
    return shutil.which("fio") is not None


def _escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace(":", "\\:")


def job_file(files: list[str], seconds: float, threads: int, direct: bool) -> str:
    """One sequential job per reader over its own files (as :func:`measure.reader_files`), all
    running together; then, after a ``stonewall``, one random-read job per reader over all files."""
    half = max(1, round(seconds / 2))
    lines = ["[global]", "ioengine=psync", f"direct={int(direct)}", "thread", "group_reporting", "time_based",
             f"runtime={half}", "randrepeat=0"]
    for k, mine in enumerate(reader_files(files, threads)):
        lines += [f"[seq{k}]", "rw=read", f"bs={SEQ_BLOCK}", "file_service_type=sequential",
                  "filename=" + ":".join(_escape(f) for f in mine)]
    for k in range(threads):
        lines += [f"[rand{k}]", *(["stonewall"] if k == 0 else []), "rw=randread", f"bs={RAND_BLOCK}",
                  "file_service_type=random", "filename=" + ":".join(_escape(f) for f in files)]
    return "\n".join(lines) + "\n"


def measure(files: list[str], seconds: float, threads: int, direct: bool) -> IoMeasurement:
    with tempfile.TemporaryDirectory(prefix="gpulib-fio-") as scratch:
        job = Path(scratch) / "probe.fio"
        job.write_text(job_file(files, seconds, threads, direct))
        result = run_command(["fio", "--readonly", "--output-format=json", str(job)], seconds * 2 + 60)
    if result.status != "ok":
        raise FioError(result.reason or "fio failed")
    text = result.stdout.decode("utf-8", "replace")
    try:
        doc = json.loads(text[text.index("{"):])
        jobs = {j["jobname"]: j["read"] for j in doc["jobs"]}
        seq, rand = jobs["seq0"], jobs["rand0"]  # group_reporting: one entry per group
        pct = rand["clat_ns"]["percentile"]
        return IoMeasurement(
            engine=f"fio {doc.get('fio version', '').removeprefix('fio-')}".strip(), direct=direct, threads=threads,
            seq_read_mib_s=seq["bw_bytes"] / (1 << 20), rand_read_iops=rand["iops"],
            rand_lat_p50_us=pct["50.000000"] / 1000, rand_lat_p95_us=pct["95.000000"] / 1000,
            rand_lat_p99_us=pct["99.000000"] / 1000, seconds=(seq["runtime"] + rand["runtime"]) / 1000)
    except (ValueError, KeyError, TypeError) as exc:
        raise FioError(f"unreadable fio JSON ({type(exc).__name__}: {exc})") from exc
