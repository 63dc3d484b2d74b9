"""Read many evidence files on several CPUs: chunks of work handed to forked worker processes.

Why: a 1,024-node incident is ~8,000 files whose reading (detect, parse, reduce) is pure Python
and independent file by file; one process uses one core while the user waits. Forked workers
start with gpulib already imported, read a chunk each, and send its
records back pickled. What that costs is paid on top: the pickling on both sides (~1.5 s of CPU
at 1,024 nodes, most of it unpickling in the parent), so the total CPU time rises while the wait
(wall time) falls - worth it only with many files and more than one *idle* CPU, which
:func:`workers` decides: on a machine whose cores are already busy (the load average at or above
the CPU count) workers only add the pickling to the wait, so the files are then read in-process.
Results come back in the order of the chunks, so what is read is merged exactly as one process
would have merged it, and the answer does not depend on how many workers read it.

``GPULIB_READ_WORKERS=N`` sets the number of workers (``1``: read in this process, as below
:data:`MIN_FILES`); a platform without ``fork`` always reads in-process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from gpulib.logs import get_logger

log = get_logger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: Environment variable: how many worker processes read the files (1: none, read here).
WORKERS_ENV = "GPULIB_READ_WORKERS"
#: Fewer files than this are read in-process: starting workers and pickling records back costs
#: more than it saves below a few hundred nodes (an incident of 256 nodes is ~2,300 files).
MIN_FILES = 4000
#: At most this many workers: the parent unpickles every chunk alone, so more workers soon wait on it.
MAX_WORKERS = 4
#: Files per chunk handed to a worker: small enough to balance a big job log in one chunk against
#: the others, large enough that a chunk's pickling overhead is small.
CHUNK_FILES = 96


def workers(files: int) -> int:
    """How many worker processes should read ``files`` files: 1 (read in this process) unless
    there are many files, ``fork``, and several CPUs this process may run on that the last minute's
    load average leaves idle."""
    said = os.environ.get(WORKERS_ENV, "").strip()
    if said:
        try:
            wanted = int(said)
        except ValueError:
            raise ValueError(f"{WORKERS_ENV}={said!r}: give a whole number of worker processes "
                             "(1 reads in this process)") from None
        return max(1, wanted) if "fork" in multiprocessing.get_all_start_methods() else 1
    if files < MIN_FILES or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    idle = cpus - (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0)
    return max(1, min(cpus, MAX_WORKERS, int(idle + 0.5)))  # a core busy more than half the time is not idle


def chunked(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` in consecutive chunks of ``size`` (the last one shorter)."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def ordered_map(fn: Callable[[T], R], chunks: Iterable[T], processes: int) -> Iterator[R]:
    """``fn`` of each chunk, in the chunks' order: in this process when ``processes`` is 1, else on
    ``processes`` forked workers (``fn`` and its results must pickle). A pool that breaks (a worker
    killed, out of memory) is said in the log and its chunks are done in this process instead."""
    chunks = list(chunks)
    if processes <= 1 or len(chunks) <= 1:
        yield from map(fn, chunks)
        return
    done = 0
    try:
        with ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(fn, chunk) for chunk in chunks]
            for future in futures:
                result = future.result()
                done += 1
                yield result
    except BrokenProcessPool as exc:
        log.warning("reading on %d worker processes failed (%s); reading the rest in this process", processes, exc)
        yield from map(fn, chunks[done:])
