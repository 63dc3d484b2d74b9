"""The dataset's file-size histogram, and the sample of files the I/O measurement reads.

Why: one sample per small file means one open + one read per sample per rank: at 512 ranks x
32 samples/step that is 16,000 metadata operations per step, which a parallel file system
serves far slower than the same bytes in a few large files. The runbook's fix is packing the
samples into WebDataset/tar shards of 100 MiB to 1 GiB. The scan never follows directory
symlinks (loops) and stops after ``max_files`` files, saying so.
"""

from __future__ import annotations

import os
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

#: Upper bounds (bytes) of the histogram buckets; the last bucket is everything larger.
BUCKETS = ((4 << 10, "< 4 KiB"), (64 << 10, "4-64 KiB"), (1 << 20, "64 KiB-1 MiB"), (16 << 20, "1-16 MiB"),
           (256 << 20, "16-256 MiB"), (None, ">= 256 MiB"))
#: A dataset with at least this many files whose median is below SMALL_FILE_BYTES gets the packing advice.
MANY_FILES = 1000
SMALL_FILE_BYTES = 1 << 20
SHARD_BYTES = 512 << 20


@dataclass
class SizeBucket:
    label: str
    upper_bytes: int | None
    files: int = 0
    bytes: int = 0


@dataclass
class DatasetScan:
    root: str
    files: int
    total_bytes: int
    median_file_bytes: int
    buckets: list[SizeBucket]
    sample: list[str] = field(default_factory=list)  # files the I/O measurement reads
    truncated: bool = False  # stopped at max_files
    unreadable: int = 0  # directories/files that could not be listed or stat'ed

    @property
    def many_small_files(self) -> bool:
        return self.files >= MANY_FILES and self.median_file_bytes < SMALL_FILE_BYTES

    def packing_advice(self) -> str | None:
        if not self.many_small_files:
            return None
        shards = max(1, -(-self.total_bytes // SHARD_BYTES))
        return (f"{self.files:,} files with a median of {self.median_file_bytes / 1024:.0f} KiB: every sample costs an "
                f"open and a metadata lookup. Pack them into ~{shards:,} WebDataset/tar shards of "
                f"{SHARD_BYTES >> 20} MiB (e.g. `tar --sort=name -cf shard-000000.tar ...`, or webdataset's "
                "ShardWriter) and read the shards sequentially.")


def scan(root: str | Path, max_files: int = 200_000, sample_files: int = 256, seed: int = 0) -> DatasetScan:
    """Walk ``root`` (a folder, or one file) and return its size histogram and a reservoir
    sample of up to ``sample_files`` non-empty regular files (same ``seed``, same sample)."""
    root = Path(root)
    buckets = [SizeBucket(label, upper) for upper, label in BUCKETS]
    sizes: list[int] = []
    sample: list[str] = []
    rng = random.Random(seed)
    unreadable = nonempty = 0
    truncated = False
    stack = [root] if root.is_dir() else []
    entries = [] if stack else [root]
    while (stack or entries) and not truncated:
        if not entries:
            try:
                with os.scandir(stack.pop()) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                unreadable += 1
            continue  # an empty folder leaves nothing to pop: go round
        entry = entries.pop()
        try:
            if isinstance(entry, os.DirEntry) and entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
                continue
            stat = entry.stat()
        except OSError:
            unreadable += 1
            continue
        if not (stat.st_mode & 0o170000 == 0o100000):  # regular files only
            continue
        size = stat.st_size
        sizes.append(size)
        bucket = next(b for b in buckets if b.upper_bytes is None or size < b.upper_bytes)
        bucket.files += 1
        bucket.bytes += size
        if size > 0:  # reservoir sampling (Algorithm R): every non-empty file equally likely
            nonempty += 1
            path = str(entry.path if isinstance(entry, os.DirEntry) else entry)
            if len(sample) < sample_files:
                sample.append(path)
            elif (slot := rng.randrange(nonempty)) < sample_files:
                sample[slot] = path
        truncated = len(sizes) >= max_files
    return DatasetScan(str(root), len(sizes), sum(sizes), int(statistics.median(sizes)) if sizes else 0, buckets,
                       sorted(sample), truncated, unreadable)
