"""The same two measurements as :mod:`measure`, by ``fio`` (the reference tool), when installed.

fio carries out the :class:`measure.Plan` the Python engine carries out: the same files, block
sizes, readers (one ``psync`` job each), cache policy (``direct`` as the plan says; fio's
defaults ``invalidate=1`` and ``fadvise_hint=1``, spelled out, drop each file's cached pages
and announce the pattern at every open) and passes (``time_based``: a sequential job reads its
files in order, each once per pass, until the time is up). The job file lives in a private
temporary folder; the probed files are reached through symbolic links there with short names
(fio refuses an option value over 4,096 characters, which 256 real paths exceed), and
``--readonly`` on the command line makes fio refuse any write to them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from gpulib.collect.runner import run_command
from gpulib.storage.measure import RAND_BLOCK, Extent, IoMeasurement, Plan, make_plan, plan_fields

TIMEOUT_SLACK_S = 60  # fio gets the measurement time twice over plus this, then it is killed (a hung fio)


class FioError(Exception):
    """fio did not produce a usable result (the caller falls back to the Python engine)."""


def available() -> bool:
    return shutil.which("fio") is not None


def _names(plan: Plan) -> dict[str, str]:
    """A short link name for every file of the plan (fio's option values are limited to 4,096 characters)."""
    paths = dict.fromkeys(e.path for extents in plan.readers + plan.rand_readers for e in extents)
    return {path: f"{i:x}" for i, path in enumerate(paths)}


def _job(name: str, extents: list[Extent], names: dict[str, str]) -> list[str]:
    lines = [f"[{name}]", "filename=" + ":".join(names[e.path] for e in extents)]
    if len(extents) == 1 and not extents[0].whole_file:  # a slice of a file shared by several readers
        lines += [f"offset={extents[0].offset}", f"size={extents[0].length}"]
    return lines


def job_file(plan: Plan, seconds: float, directory: str, names: dict[str, str]) -> str:
    """One sequential job per reader over its extents, all running together; then, after a
    ``stonewall``, one random-read job per reader over its extents."""
    half_ms = max(1, round(seconds * 1000 / 2))
    lines = ["[global]", "ioengine=psync", f"direct={int(plan.direct)}", "invalidate=1", "fadvise_hint=1", "thread",
             "group_reporting", "time_based", f"runtime={half_ms}ms", "randrepeat=0",
             "directory=" + directory.replace("\\", "\\\\").replace(":", "\\:")]
    for k, extents in enumerate(plan.readers):
        lines += [*_job(f"seq{k}", extents, names), "rw=read", f"bs={plan.seq_block}", "file_service_type=sequential"]
    for k, extents in enumerate(plan.rand_readers):
        lines += [*_job(f"rand{k}", extents, names), *(["stonewall"] if k == 0 else []), "rw=randread",
                  f"bs={RAND_BLOCK}", "file_service_type=random"]
    return "\n".join(lines) + "\n"


def measure(files: list[str], seconds: float, threads: int, plan: Plan | None = None) -> IoMeasurement:
    plan = plan or make_plan(files, threads)
    if plan.tiny or not plan.readers:
        raise FioError("no sampled file holds a whole 4 KiB block (fio reads whole blocks only)")
    names = _names(plan)
    with tempfile.TemporaryDirectory(prefix="gpulib-fio-") as scratch:
        links = Path(scratch) / "files"
        links.mkdir()
        for path, name in names.items():
            os.symlink(os.path.abspath(path), links / name)
        job = Path(scratch) / "probe.fio"
        job.write_text(job_file(plan, seconds, str(links), names))
        result = run_command(["fio", "--readonly", "--output-format=json", str(job)], seconds * 2 + TIMEOUT_SLACK_S)
    if result.status != "ok":
        raise FioError(result.reason or "fio failed")
    text = result.stdout.decode("utf-8", "replace")
    try:
        doc = json.loads(text[text.index("{"):])
        jobs = {j["jobname"]: j["read"] for j in doc["jobs"]}
        seq, rand = jobs["seq0"], jobs["rand0"]  # group_reporting: one entry per group
        pct = rand["clat_ns"]["percentile"]
        return IoMeasurement(
            engine=f"fio {doc.get('fio version', '').removeprefix('fio-')}".strip(), direct=plan.direct,
            threads=threads, seq_read_mib_s=seq["bw_bytes"] / (1 << 20), rand_read_iops=rand["iops"],
            rand_lat_p50_us=pct["50.000000"] / 1000, rand_lat_p95_us=pct["95.000000"] / 1000,
            rand_lat_p99_us=pct["99.000000"] / 1000, seconds=(seq["runtime"] + rand["runtime"]) / 1000,
            note=plan.note(), **plan_fields(plan, seq["io_bytes"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise FioError(f"unreadable fio JSON ({type(exc).__name__}: {exc})") from exc
