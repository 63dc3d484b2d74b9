"""Read throughput, IOPS and latency percentiles, measured the way fio does, in pure Python.

One :class:`Plan` says what is read, and both engines (this one and :mod:`fio`) carry out the
same plan, so their numbers can be compared:

* the same files: the scan's sample of the dataset's real files, opened ``O_RDONLY`` (nothing
  is ever written under the probed path);
* the same cache policy: ``O_DIRECT`` with page-aligned buffers (``mmap``) where the file system
  accepts it, else buffered reads; either way each file's cached pages are dropped
  (``posix_fadvise(DONTNEED)``) and the access pattern announced (``SEQUENTIAL``/``RANDOM``)
  every time a file is opened, as fio does with its defaults ``invalidate=1`` and ``fadvise_hint=1``;
* the same reads: fio reads whole blocks only (the part of a file after its last whole block,
  and a file smaller than one block, are never read), so this engine reads exactly those blocks;
* the same concurrency: ``threads`` readers, one outstanding read each (fio ``ioengine=psync``,
  one job per reader); the read calls release the GIL, so the threads overlap their I/O.

Two phases of ``seconds / 2`` each, each reader with its own share of the files (:func:`share`:
reader k takes files k, k + threads, ...; when there are fewer files than readers, the readers
of one file each take an equal slice of it), so that no block is read by two readers in a pass
(a block another reader has just read would come from the cache in buffered mode):

* sequential: each reader streams its files in order in ``seq_block`` reads (1 MiB; smaller
  when most sampled files hold no whole MiB), every file once per pass, passes repeated until
  the time is up -> MiB/s (fio ``rw=read``, ``file_service_type=sequential``, ``time_based``);
* random: each reader picks one of its files at random for each 4 KiB read and, within it, a
  block not read yet in this pass (fio's random map: no block twice until the whole file was
  read; then the file starts a new pass, its cache dropped again) -> IOPS and completion-latency
  percentiles p50/p95/p99 (fio ``rw=randread bs=4k file_service_type=random``, ``clat``).
"""

from __future__ import annotations

import itertools
import mmap
import os
import random
import statistics
import threading
import time
from dataclasses import dataclass, field

SEQ_BLOCK = 1 << 20
RAND_BLOCK = 4096
DIRECT = "O_DIRECT"
BUFFERED = "buffered, page cache dropped (posix_fadvise DONTNEED) at each file open"


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
    cache: str = ""  # DIRECT or BUFFERED: how the page cache was kept out
    seq_block_bytes: int = SEQ_BLOCK
    seq_files: int = 0  # sampled files with at least one whole sequential block
    rand_files: int = 0  # sampled files with at least one whole 4 KiB block
    seq_passes: float = 0.0  # bytes read sequentially / bytes of one pass over the files


@dataclass
class Extent:
    """The part of one file a reader reads in a pass: whole blocks only."""

    path: str
    offset: int
    length: int
    whole_file: bool = True  # the whole file (its whole blocks), not a slice shared with other readers


@dataclass
class Plan:
    """What both engines read: the same files, blocks, readers and cache policy."""

    direct: bool
    threads: int
    seq_block: int
    readers: list[list[Extent]]  # sequential phase: one list per reader
    rand_readers: list[list[Extent]] = field(default_factory=list)  # random phase: one list per reader
    tiny: bool = False  # no sampled file holds a whole 4 KiB block: one short read per file (fio cannot)

    @property
    def cache(self) -> str:
        return DIRECT if self.direct else BUFFERED

    @property
    def seq_files(self) -> int:
        return len({e.path for extents in self.readers for e in extents})

    @property
    def rand_files(self) -> int:
        return len({e.path for extents in self.rand_readers for e in extents})

    @property
    def pass_bytes(self) -> int:
        return sum(e.length for extents in self.readers for e in extents)

    def note(self) -> str | None:
        notes = []
        if not self.direct:
            notes.append("O_DIRECT refused by this file system: buffered reads, each file's cached pages dropped before "
                         "it is read (a file system that keeps its data in memory, such as tmpfs, still reads at memory speed)")
        if self.tiny:
            notes.append("every sampled file is smaller than 4 KiB: one short read per file")
        return "; ".join(notes) or None


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile, as fio reports its clat percentiles."""
    if not sorted_values:
        return 0.0
    rank = max(1, -(-len(sorted_values) * pct // 100))
    return sorted_values[int(rank) - 1]


def _open(path: str, direct: bool) -> int:
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECT if direct else 0))


def _buffer(size: int) -> mmap.mmap:
    """A page-aligned read buffer (O_DIRECT needs the alignment) of private anonymous memory, as fio's
    ``malloc`` gives it; ``mmap``'s default, shared anonymous memory (shmem), made 1 MiB direct reads slower."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def _advise(fd: int, offset: int, length: int, pattern: int) -> None:
    """What fio does at every open (``invalidate=1``, ``fadvise_hint=1``): drop the cached pages, announce the
    pattern, over the part of the file it reads (``length`` 0: to the end, fio's range for a whole file)."""
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(fd, offset, length, pattern)
    except OSError:  # advice only; fio goes on too
        pass


def direct_supported(path: str) -> bool:
    """Whether ``path``'s file system accepts an aligned ``O_DIRECT`` read."""
    try:
        fd = _open(path, True)
    except OSError:
        return False
    buf = _buffer(RAND_BLOCK)
    try:
        os.preadv(fd, [buf], 0)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        buf.close()


def seq_block_for(sizes: list[int]) -> int:
    """1 MiB, or, when most files hold no whole MiB, the largest power of two (>= 4 KiB) within the median size."""
    median = int(statistics.median(sizes)) if sizes else 0
    if median >= SEQ_BLOCK:
        return SEQ_BLOCK
    return max(RAND_BLOCK, 1 << (max(median, 1).bit_length() - 1))


def share(files: list[tuple[str, int]], threads: int, block: int) -> list[list[Extent]]:
    """The whole ``block``s of ``files`` (path, size) shared among ``threads`` readers, no block
    read by two: reader k takes files k, k + threads, ...; when there are fewer files than
    readers, the readers of one file each take an equal slice of it."""
    whole = [(p, s // block * block) for p, s in files if s >= block]
    if len(whole) >= threads:
        return [[Extent(p, 0, n) for p, n in whole[k::threads]] for k in range(threads)]
    readers = []
    for i, (path, n) in enumerate(whole):
        mine = len(range(i, threads, len(whole)))
        cuts = [n // block * j // mine for j in range(mine + 1)]
        readers += [[Extent(path, a * block, (b - a) * block, mine == 1)] for a, b in itertools.pairwise(cuts) if b > a]
    return readers


def make_plan(files: list[str], threads: int) -> Plan:
    """The plan both engines carry out on the sampled ``files`` with ``threads`` readers (deterministic)."""
    sized = []
    for path in files:
        try:
            sized.append((path, os.stat(path).st_size))
        except OSError:
            continue
    whole = [(p, s) for p, s in sized if s >= RAND_BLOCK]
    if not whole:  # nothing fio could read: one (short) 4 KiB read per file
        readers = [r for r in ([Extent(p, 0, RAND_BLOCK) for p, _ in sized[k::threads]] for k in range(threads)) if r]
        return Plan(bool(sized) and direct_supported(sized[0][0]), threads, RAND_BLOCK, readers, readers, tiny=bool(sized))
    block = seq_block_for([s for _, s in sized])
    return Plan(direct_supported(whole[0][0]), threads, block, share(sized, threads, block), share(sized, threads, RAND_BLOCK))


class _Clock:
    """Starts a phase when every reader has opened its files (fio starts its clock after setup too)."""

    def __init__(self, readers: int, seconds: float):
        self.seconds = seconds
        self.started = time.monotonic()
        self.ends: list[float] = []
        self._barrier = threading.Barrier(max(1, readers), action=self._start)

    def _start(self) -> None:
        self.started = time.monotonic()

    def wait(self) -> float:
        """Block until all readers are ready; the phase's deadline."""
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:  # a reader failed before the start: the others go on
            pass
        return self.started + self.seconds

    def leave(self, started: bool) -> None:
        """A reader is done; one that failed before the start releases the others from waiting for it."""
        self.ends.append(time.monotonic())  # list.append is atomic under the GIL
        if not started:
            self._barrier.abort()

    def elapsed(self) -> float:
        return max(self.ends, default=self.started) - self.started


def _read_extent(ext: Extent, block: int, direct: bool, buf: mmap.mmap, deadline: float) -> int:
    try:
        fd = _open(ext.path, direct)
    except OSError:  # vanished or unreadable since the scan: skip it, as a reader would
        return 0
    done = 0
    try:
        _advise(fd, ext.offset, 0 if ext.whole_file else ext.length, os.POSIX_FADV_SEQUENTIAL)
        pos, end = ext.offset, ext.offset + ext.length
        while pos < end and time.monotonic() < deadline:
            got = os.preadv(fd, [buf], pos)
            done += got
            pos += block
            if got < block:  # the file shrank since the scan (or a tiny file)
                break
    finally:
        os.close(fd)
    return done


def _sequential(extents: list[Extent], block: int, direct: bool, clock: _Clock, counter: list[int],
                lock: threading.Lock) -> None:
    done = 0
    deadline = None
    try:
        buf = _buffer(block)
        deadline = clock.wait()
        while time.monotonic() < deadline:  # one pass: every extent once, in order
            before = done
            for ext in extents:
                if time.monotonic() >= deadline:
                    break
                done += _read_extent(ext, block, direct, buf, deadline)
            if done == before:  # nothing readable any more
                break
        buf.close()
    finally:
        clock.leave(deadline is not None)
        with lock:
            counter[0] += done


def _random(extents: list[Extent], direct: bool, clock: _Clock, latencies: list[float], seed: int) -> None:
    rng = random.Random(seed)
    opened: list[tuple[int, int, int, Extent]] = []  # fd, first block, blocks, extent
    mine: list[int] = []  # completion latencies, ns
    deadline = None
    try:
        buf = _buffer(RAND_BLOCK)
        for ext in extents:
            try:
                fd = _open(ext.path, direct)
            except OSError:
                continue
            _advise(fd, ext.offset, 0 if ext.whole_file else ext.length, os.POSIX_FADV_RANDOM)
            opened.append((fd, ext.offset // RAND_BLOCK, max(1, ext.length // RAND_BLOCK), ext))
        # fio's random map: per file, a random order of its blocks drawn as it goes (sparse Fisher-Yates:
        # read[f] blocks done this pass, moved[f] the swapped positions), no block twice in a pass
        read = [0] * len(opened)
        moved: list[dict[int, int]] = [{} for _ in opened]
        bufs, draw, clock_ns, now = [buf], rng.random, time.perf_counter_ns, time.monotonic
        deadline = clock.wait()
        while opened and now() < deadline:  # the loop is lean: its time is a Python reader's own overhead
            f = int(draw() * len(opened))
            fd, first, blocks, ext = opened[f]
            i, swaps = read[f], moved[f]
            j = i + int(draw() * (blocks - i))
            block = swaps.get(j, j)
            moved_i = swaps.pop(i, i)
            if j != i:
                swaps[j] = moved_i
            read[f] = i + 1
            if i + 1 == blocks:  # every block read once: a new pass over this file, its cache dropped again
                read[f] = 0
                swaps.clear()
                if not direct:
                    _advise(fd, ext.offset, 0 if ext.whole_file else ext.length, os.POSIX_FADV_RANDOM)
            started = clock_ns()
            os.preadv(fd, bufs, (first + block) * RAND_BLOCK)
            mine.append(clock_ns() - started)
        buf.close()
    finally:
        clock.leave(deadline is not None)
        for fd, *_ in opened:
            os.close(fd)
        us = [ns / 1000 for ns in mine]
        latencies.extend(us)  # list.extend of a list is atomic under the GIL


def _run(workers: list[threading.Thread]) -> None:
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def measure(files: list[str], seconds: float = 10.0, threads: int = 4, seed: int = 0, plan: Plan | None = None) -> IoMeasurement:
    """Measure the sampled ``files`` for ``seconds`` in all (half sequential, half random)."""
    plan = plan or make_plan(files, threads)
    half = seconds / 2
    counter, lock = [0], threading.Lock()
    seq_clock = _Clock(len(plan.readers), half)
    _run([threading.Thread(target=_sequential, args=(extents, plan.seq_block, plan.direct, seq_clock, counter, lock))
          for extents in plan.readers])
    seq_s = seq_clock.elapsed()
    latencies: list[float] = []
    rand_clock = _Clock(len(plan.rand_readers), half)
    _run([threading.Thread(target=_random, args=(extents, plan.direct, rand_clock, latencies, seed + k))
          for k, extents in enumerate(plan.rand_readers)])
    rand_s = rand_clock.elapsed()
    latencies.sort()
    return IoMeasurement(
        engine="python", direct=plan.direct, threads=threads,
        seq_read_mib_s=counter[0] / (1 << 20) / seq_s if seq_s else 0.0,
        rand_read_iops=len(latencies) / rand_s if rand_s else 0.0, rand_lat_p50_us=percentile(latencies, 50),
        rand_lat_p95_us=percentile(latencies, 95), rand_lat_p99_us=percentile(latencies, 99),
        seconds=seq_s + rand_s, note=plan.note(), **plan_fields(plan, counter[0]))


def plan_fields(plan: Plan, seq_bytes: int) -> dict:
    """The plan's share of an :class:`IoMeasurement` (the same for both engines)."""
    return {"cache": plan.cache, "seq_block_bytes": plan.seq_block, "seq_files": plan.seq_files,
            "rand_files": plan.rand_files, "seq_passes": round(seq_bytes / plan.pass_bytes, 2) if plan.pass_bytes else 0.0}
