"""storage-probe on real directories: many small files, a few large ones; never writes; exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpulib.storage import fio, measure, scan, verdict
from gpulib.storage.cli import probe


def _tree_state(root):
    return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*"))


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    for d in range(4):
        sub = root / f"part-{d}"
        sub.mkdir()
        for i in range(300):
            (sub / f"{i:05d}.jpg").write_bytes(os.urandom(2000 + 37 * i))
    return root


@pytest.fixture(scope="module")
def large_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("large")
    for i in range(3):
        (root / f"shard-{i:06d}.tar").write_bytes(os.urandom(24 << 20))
    return root


def gpulib(*args):
    return subprocess.run([sys.executable, "-m", "gpulib", *args], capture_output=True, text=True, timeout=120)


def test_scan_histogram_and_packing_advice(small_files, large_files):
    small = scan.scan(small_files, sample_files=64)
    assert small.files == 1200 and small.many_small_files and "WebDataset/tar shards" in small.packing_advice()
    # 2000 + 37 i < 4096 for i <= 56
    assert {b.label: b.files for b in small.buckets if b.files} == {"< 4 KiB": 4 * 57, "4-64 KiB": 4 * 243}
    assert len(small.sample) == 64 and small.sample == scan.scan(small_files, sample_files=64).sample, "seeded"
    large = scan.scan(large_files)
    assert large.files == 3 and not large.many_small_files and large.packing_advice() is None
    assert scan.scan(small_files, max_files=100).truncated


def test_python_engine_reads_and_never_writes(large_files):
    before = _tree_state(large_files)
    files = scan.scan(large_files).sample
    io = measure.measure(files, seconds=1.0, threads=2)
    assert io.seq_read_mib_s > 0 and io.rand_read_iops > 0
    assert 0 < io.rand_lat_p50_us <= io.rand_lat_p95_us <= io.rand_lat_p99_us
    assert _tree_state(large_files) == before, "the probe wrote into the probed path"


@pytest.mark.skipif(not fio.available(), reason="fio not installed (apt-get install fio)")
def test_fio_engine_reads_readonly_and_never_writes(large_files):
    before = _tree_state(large_files)
    files = scan.scan(large_files).sample
    io = fio.measure(files, seconds=2, threads=2, direct=measure.direct_supported(files[0]))
    assert io.engine.startswith("fio") and io.seq_read_mib_s > 0 and io.rand_read_iops > 0
    assert io.rand_lat_p50_us <= io.rand_lat_p99_us
    assert _tree_state(large_files) == before


def test_fio_job_file_escapes_colons_in_names():
    job = fio.job_file(["/data/a:b.bin", "/data/c.bin"], 4, 2, True)
    assert "[seq0]\nrw=read\nbs=1048576\nfile_service_type=sequential\nfilename=/data/a\\:b.bin\n" in job and "direct=1" in job
    assert "filename=/data/a\\:b.bin:/data/c.bin" in job.split("[rand0]")[1] and job.count("stonewall") == 1


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (measure.percentile(values, 50), measure.percentile(values, 99), measure.percentile([], 50)) == (50, 99, 0)


def test_verdict_thresholds_with_numbers():
    found = scan.DatasetScan("/d", 10, 10 << 30, 1 << 30, [])
    io = measure.IoMeasurement("python", True, 4, 1000.0, 5000.0, 100, 200, 300, 2.0)
    assert verdict.judge(found, io, verdict.Need(12, 10, 10 << 20)).exit_code == 3  # 1,200 MiB/s needed: 0.83x
    ok = verdict.judge(found, io, verdict.Need(4, 10, 10 << 20))  # 400 MiB/s needed, 2.5x
    assert (ok.status, ok.exit_code) == ("enough", 0) and "400.0 MiB/s" in ok.lines[0] and "(2.50x)" in ok.lines[0]
    marginal = verdict.judge(found, io, verdict.Need(8, 10, 10 << 20))  # 800 MiB/s: 1.25x
    assert (marginal.status, marginal.exit_code) == ("marginal", 1)
    assert verdict.judge(found, io, None).exit_code == 0


def test_small_files_are_judged_on_iops_too():
    found = scan.DatasetScan("/d", 50_000, 5 << 30, 100 << 10, [])
    io = measure.IoMeasurement("python", True, 4, 5000.0, 2000.0, 100, 200, 900, 2.0)
    judged = verdict.judge(found, io, verdict.Need(64, 32, 100 << 10))  # 2048 reads/s needed, 2000 measured
    assert judged.status == "insufficient" and judged.exit_code == 3
    assert any("2,048 reads/s" in line for line in judged.lines) and any("shards" in line for line in judged.lines)


def test_cli_text_json_and_exit_codes(small_files, large_files, tmp_path):
    done = gpulib("storage-probe", str(small_files), "--seconds", "1", "--threads", "2", "--engine", "python")
    assert done.returncode == 1, done.stderr  # measured only, but many small files
    assert "python, 2 readers" in done.stdout and "WebDataset/tar shards" in done.stdout
    huge_need = gpulib("storage-probe", str(large_files), "--seconds", "1", "--ranks", "100000", "--batch", "64",
                       "--sample-bytes", "1000000", "--format", "json")
    assert huge_need.returncode == 3 and '"status": "insufficient"' in huge_need.stdout
    assert gpulib("storage-probe", str(tmp_path / "nope")).returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    no_files = gpulib("storage-probe", str(empty))
    assert no_files.returncode == 2 and "no readable non-empty file" in no_files.stderr
    half = gpulib("storage-probe", str(large_files), "--ranks", "4")
    assert half.returncode == 2 and "go together" in half.stderr
    assert gpulib("storage-probe", str(large_files), "--seconds", "0").returncode == 2


def test_probe_falls_back_when_fio_is_asked_but_absent(large_files, monkeypatch):
    monkeypatch.setattr(fio, "available", lambda: False)
    result = probe(str(large_files), 1.0, 2, None, engine="fio")
    assert result["io"].engine == "python" and "fio not installed" in result["io"].note
