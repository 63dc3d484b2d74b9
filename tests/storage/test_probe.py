"""storage-probe on real directories: many small files, a few large ones; never writes; exit codes."""

from __future__ import annotations

import dataclasses
import mmap
import os
import subprocess
import sys
import threading

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


needs_fio = pytest.mark.skipif(not fio.available(), reason="fio not installed (apt-get install fio)")


@needs_fio
def test_fio_engine_reads_readonly_and_never_writes(large_files, small_files):
    for root in (large_files, small_files):  # small: 256 sampled paths, far over fio's 4,096-character option values
        before = _tree_state(root)
        files = scan.scan(root).sample
        io = fio.measure(files, seconds=1, threads=2)
        assert io.engine.startswith("fio") and io.seq_read_mib_s > 0 and io.rand_read_iops > 0 and io.seq_passes > 0
        assert io.rand_lat_p50_us <= io.rand_lat_p99_us and io.cache == (measure.DIRECT if io.direct else measure.BUFFERED)
        assert _tree_state(root) == before


def test_plan_is_what_both_engines_read(large_files, small_files):
    files = scan.scan(large_files).sample  # 3 x 24 MiB
    plan = measure.make_plan(files, 2)
    assert plan.seq_block == 1 << 20 and [[e.path for e in r] for r in plan.readers] == [files[0::2], files[1::2]]
    assert plan.rand_readers == plan.readers, "24 MiB: whole 1 MiB blocks are whole 4 KiB blocks"
    assert all(e.length == 24 << 20 and e.whole_file for r in plan.readers for e in r)
    assert plan.rand_files == plan.seq_files == 3 and plan.pass_bytes == 72 << 20
    # more readers than files: the readers of a file share it in slices, no block read by two readers in a pass
    four = measure.make_plan(files, 4)
    assert len(four.readers) == len(four.rand_readers) == 4 and all(len(r) == 1 for r in four.readers)
    first = sorted((e.offset, e.length) for r in four.readers for e in r if e.path == files[0])
    assert first == [(0, 12 << 20), (12 << 20, 12 << 20)] and four.pass_bytes == 72 << 20
    job = fio.job_file(four, 4, "/tmp/x:y", fio._names(four))
    assert "directory=/tmp/x\\:y" in job and job.count("offset=") == 4 and job.count("size=12582912") == 4
    # small files: blocks of the largest power of two within the median size; whole blocks only, as fio reads
    sample = scan.scan(small_files).sample
    small = measure.make_plan(sample, 2)
    sizes = {f: os.stat(f).st_size for f in sample}
    assert small.seq_block == 4096 and small.rand_files == sum(n >= 4096 for n in sizes.values())
    assert all(e.length == sizes[e.path] // 4096 * 4096 for r in small.readers + small.rand_readers for e in r)
    assert sorted(e.path for r in small.rand_readers for e in r) == sorted(f for f, n in sizes.items() if n >= 4096)


def test_fio_job_names_files_by_short_links_and_says_the_cache_policy():
    a, c = measure.Extent("/data/a:b.bin", 0, 1 << 20), measure.Extent("/d/c", 0, 2 << 20)
    plan = measure.Plan(False, 2, 1 << 20, [[a], [c]], [[a], [c]])
    job = fio.job_file(plan, 4, "/tmp/links", fio._names(plan))
    assert "[seq0]\nfilename=0\nrw=read\nbs=1048576\nfile_service_type=sequential\n" in job
    assert "direct=0" in job and "invalidate=1" in job and "fadvise_hint=1" in job and "runtime=2000ms" in job
    assert "[rand1]\nfilename=1\nrw=randread" in job and job.count("stonewall") == 1
    assert max(len(line) for line in job.splitlines()) < 4096


def test_buffered_policy_drops_each_file_from_the_cache_at_open(large_files, monkeypatch):
    files = scan.scan(large_files).sample
    plan = dataclasses.replace(measure.make_plan(files, 2), direct=False)
    per_reader: dict[int, list[int]] = {}  # the readers are threads: each one's advice in its order
    real = os.posix_fadvise

    def record(fd, off, n, advice):
        per_reader.setdefault(threading.get_ident(), []).append(advice)
        return real(fd, off, n, advice)

    monkeypatch.setattr(os, "posix_fadvise", record)
    io = measure.measure(files, 0.4, 2, plan=plan)
    assert not io.direct and io.cache == measure.BUFFERED and "O_DIRECT refused" in io.note
    patterns = {os.POSIX_FADV_SEQUENTIAL, os.POSIX_FADV_RANDOM}
    for calls in per_reader.values():  # every open: the file's pages dropped, then the pattern announced
        assert all(calls[i - 1] == os.POSIX_FADV_DONTNEED for i, advice in enumerate(calls) if advice in patterns)
        assert calls[0] == os.POSIX_FADV_DONTNEED
    every = [advice for calls in per_reader.values() for advice in calls]
    assert os.POSIX_FADV_SEQUENTIAL in every and os.POSIX_FADV_RANDOM in every


def test_files_without_a_whole_block(tmp_path, monkeypatch):
    for i in range(3):
        (tmp_path / f"{i}.txt").write_bytes(os.urandom(100 + i))
    files = scan.scan(tmp_path).sample
    plan = measure.make_plan(files, 2)
    assert plan.tiny and "smaller than 4 KiB" in plan.note()
    with pytest.raises(fio.FioError, match="whole 4 KiB block"):
        fio.measure(files, 1, 2, plan)
    io = measure.measure(files, 0.4, 2, plan=plan)
    assert io.seq_read_mib_s > 0 and io.rand_read_iops > 0
    monkeypatch.setattr(fio, "available", lambda: True)
    result = probe(str(tmp_path), 0.4, 2, None)
    assert result["io"].engine == "python" and "fio failed (no sampled file holds a whole 4 KiB block" in result["io"].note


def test_python_reader_reads_whole_blocks_only(tmp_path):
    path = tmp_path / "odd.bin"
    path.write_bytes(os.urandom((3 << 20) + 5000))
    plan = measure.make_plan([str(path)], 1)
    (ext,), = plan.readers
    assert (ext.offset, ext.length) == (0, 3 << 20) and plan.rand_readers == [[measure.Extent(str(path), 0, 769 * 4096)]]
    buf = mmap.mmap(-1, plan.seq_block)
    assert measure._read_extent(ext, plan.seq_block, plan.direct, buf, float("inf")) == 3 << 20


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


@pytest.mark.parametrize("script", ["#!/bin/sh\nsleep 30\n", "#!/bin/sh\necho 'not json'\n", "#!/bin/sh\nexit 1\n"])
def test_probe_falls_back_when_fio_hangs_or_fails(large_files, tmp_path, monkeypatch, script):
    fake = tmp_path / "bin" / "fio"
    fake.parent.mkdir()
    fake.write_text(script)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(fio, "TIMEOUT_SLACK_S", 1)
    result = probe(str(large_files), 0.4, 2, None)
    assert result["io"].engine == "python" and result["io"].note.startswith("fio failed (")
    assert result["io"].seq_read_mib_s > 0
