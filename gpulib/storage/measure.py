"""Read throughput, IOPS and latency percentiles, measured the way fio does, in pure Python.

Two phases over the sampled files, ``threads`` readers each (like fio's ``numjobs`` with
``ioengine=psync``, one outstanding read per reader):

* sequential: each reader streams its own share of the files in 1 MiB reads -> MiB/s (fio ``rw=read bs=1M``);
* random: each reader picks a random file and a random 4 KiB-aligned offset and reads 4 KiB ->
  IOPS and completion-latency percentiles p50/p95/p99 (fio ``rw=randread bs=4k``, ``clat``).

Files are opened ``O_RDONLY`` (never for writing) with ``O_DIRECT`` where the file system
allows it, so the page cache does not turn a storage test into a memory test; tmpfs and some
network file systems refuse ``O_DIRECT``: the reads are then buffered and the result says so
(an upper bound, since repeated reads may come from cache). The read calls release the GIL, so
threads overlap their I/O as fio's jobs do.
"""

from __future__ import annotations

import mmap
import os
import random
import threading
import time
from dataclasses import dataclass

SEQ_BLOCK = 1 << 20
RAND_BLOCK = 4096


@dataclass
class IoMeasurement:
    engine: str  # "fio 3.33" | "python"
    direct: bool  # O_DIRECT (page cache bypassed)
    threads: int
    seq_read_mib_s: float
    rand_read_iops: float
    rand_lat_p50_us: float
    rand_lat_p95_us: float
    rand_lat_p99_us: float
    seconds: float  # both phases
    note: str | None = None


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile, as fio reports its clat percentiles."""
    if not sorted_values:
        return 0.0
    rank = max(1, -(-len(sorted_values) * pct // 100))
    return sorted_values[int(rank) - 1]


def _open(path: str, direct: bool) -> int:
    return os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))


def direct_supported(path: str) -> bool:
    """Whether ``path``'s file system accepts an aligned ``O_DIRECT`` read."""
    try:
        fd = _open(path, True)
    except OSError:
        return False
    buf = mmap.mmap(-1, RAND_BLOCK)
    try:
        os.preadv(fd, [buf], 0)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        buf.close()


def reader_files(files: list[str], threads: int) -> list[list[str]]:
    """Reader k streams files k, k + threads, ...: readers never read the same bytes at once
    (which a cache below the file system would serve once and count twice)."""
    return [files[k::threads] or [files[k % len(files)]] for k in range(threads)]


def _sequential(files: list[str], direct: bool, deadline: float, counter: list[int], lock: threading.Lock) -> None:
    buf = mmap.mmap(-1, SEQ_BLOCK)  # page-aligned, as O_DIRECT requires
    done = 0
    i = 0
    try:
        while time.monotonic() < deadline:
            try:
                fd = _open(files[i % len(files)], direct)
            except OSError:  # vanished or unreadable since the scan: skip it, as a reader would
                i += 1
                continue
            try:
                offset = 0
                while time.monotonic() < deadline:
                    got = os.preadv(fd, [buf], offset)
                    done += got
                    offset += got
                    if got < SEQ_BLOCK:
                        break
            finally:
                os.close(fd)
            i += 1
    finally:
        buf.close()
        with lock:
            counter[0] += done


def _random(files: list[tuple[str, int]], direct: bool, deadline: float, latencies: list[float], seed: int) -> None:
    buf = mmap.mmap(-1, RAND_BLOCK)
    rng = random.Random(seed)
    mine = []
    fds: dict[str, int] = {}
    try:
        while time.monotonic() < deadline:
            path, size = files[rng.randrange(len(files))]
            offset = rng.randrange(max(1, size // RAND_BLOCK)) * RAND_BLOCK
            fd = fds.get(path)
            if fd is None:
                try:
                    fd = fds[path] = _open(path, direct)
                except OSError:
                    continue
            started = time.perf_counter_ns()
            os.preadv(fd, [buf], offset)
            mine.append((time.perf_counter_ns() - started) / 1000)
    finally:
        for fd in fds.values():
            os.close(fd)
        buf.close()
        latencies.extend(mine)  # list.extend is atomic under the GIL


def measure(files: list[str], seconds: float = 10.0, threads: int = 4, seed: int = 0) -> IoMeasurement:
    """Measure the sampled ``files`` for ``seconds`` in all (half sequential, half random)."""
    direct = direct_supported(files[0])
    half = seconds / 2
    counter, lock = [0], threading.Lock()
    started = time.monotonic()
    workers = [threading.Thread(target=_sequential, args=(mine, direct, started + half, counter, lock))
               for mine in reader_files(files, threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seq_s = time.monotonic() - started
    sized = [(f, os.stat(f).st_size) for f in files]
    latencies: list[float] = []
    rand_started = time.monotonic()
    workers = [threading.Thread(target=_random, args=(sized, direct, rand_started + half, latencies, seed + k))
               for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    rand_s = time.monotonic() - rand_started
    latencies.sort()
    return IoMeasurement(
        engine="python", direct=direct, threads=threads, seq_read_mib_s=counter[0] / (1 << 20) / seq_s,
        rand_read_iops=len(latencies) / rand_s, rand_lat_p50_us=percentile(latencies, 50),
        rand_lat_p95_us=percentile(latencies, 95), rand_lat_p99_us=percentile(latencies, 99),
        seconds=seq_s + rand_s,
        note=None if direct else "O_DIRECT refused by this file system: buffered reads, cached data reads faster")
