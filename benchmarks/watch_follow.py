"""Can ``gpulib watch`` keep up with a chatty job? Follow + rules throughput vs ``grep -E``.

Generates a multi-rank training console (default 64 MB: torchrun ``[rankN]:`` prefixes, step
lines with timings, NCCL INFO, a few warnings and one CUDA OOM buried in it), then times

- the anchor: ``grep -F -c`` with the error catalogue's keywords over the same file (what an
  operator's ``tail -F | grep`` pipeline does per line);
- gpulib: :class:`gpulib.watch.follow.Follower` reading the file in its per-poll reads and
  :class:`gpulib.watch.rules.WatchRules` updating every rank's last-line time, step times and
  signatures (the whole watch loop minus its sleep), twice: as when catching up on a backlog
  (8 MiB polls, step lines sampled per rank) and as in steady state (polls of
  ``EXACT_PROGRESS_LINES`` lines, every step line parsed).

Prints the times, lines/s and the ratios (gpulib / grep). Usage:
``.venv/bin/python benchmarks/watch_follow.py [MEGABYTES]``.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpulib.parsers.training_log import CATALOGUE_KEYWORDS
from gpulib.watch.follow import Follower
from gpulib.watch.rules import EXACT_PROGRESS_LINES, WatchConfig, WatchRules

OOM = ("[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
       "capacity of 79.15 GiB of which 1.02 GiB is free.")


def generate(path: Path, megabytes: int, ranks: int = 64) -> int:
    rng = random.Random(11)
    target, written, lines, step = megabytes << 20, 0, 0, 0
    with open(path, "w") as out:
        while written < target:
            step += 1
            block = []
            for r in range(ranks):
                block.append(f"[rank{r}]: 2026-02-10 03:{step // 60 % 60:02d}:{step % 60:02d},{r:03d} INFO trainer: "
                             f"step {step} | loss {2 + rng.random():.4f} | {0.9 + rng.random() / 10:.3f} s/step | "
                             f"fwd_bwd_ms={880 + rng.random() * 40:.1f} data_ms={1 + rng.random():.1f}\n")
                if rng.random() < 0.01:
                    block.append(f"[rank{r}]: node-{r // 8}:12{r}:12{r} [{r % 8}] NCCL INFO Channel 00/0 : "
                                 f"{r} -> {(r + 1) % ranks} via P2P/IPC\n")
            if step % 1000 == 500:
                block.append(OOM.format(r=rng.randrange(ranks)) + "\n")
            text = "".join(block)
            out.write(text)
            written += len(text)
            lines += len(block)
    return lines


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train.log"
        lines = generate(log, megabytes)
        patterns = Path(tmp) / "patterns.txt"
        patterns.write_text("\n".join(k.decode().rstrip("\n") for k in CATALOGUE_KEYWORDS) + "\n")
        grep = shutil.which("grep")
        t0 = time.perf_counter()
        done = subprocess.run([grep, "-F", "-c", "-f", str(patterns), str(log)], capture_output=True, text=True)
        anchor_s = time.perf_counter() - t0
        print(f"log: {megabytes} MB, {lines:,} lines, 64 ranks; grep -F matched {done.stdout.strip()} line(s)")
        print(f"anchor grep -F -c:                   {anchor_s:7.2f} s")
        for label, batch_lines in (("catching up (8 MiB polls, sampled)", None),
                                   (f"steady ({EXACT_PROGRESS_LINES}-line polls, exact)", EXACT_PROGRESS_LINES)):
            t0 = time.perf_counter()
            follower = Follower(log, from_start=True)
            rules = WatchRules(WatchConfig(silence_s=600), [str(log)])
            alerts, read = [], 0
            while batch := follower.poll():
                read += len(batch)
                step = batch_lines or len(batch)
                for i in range(0, len(batch), step):
                    alerts += rules.feed(str(log), batch[i:i + step])
            gpulib_s = time.perf_counter() - t0
            signatures = sorted({(a.signature, a.rank) for a in alerts if a.kind == "signature"})[:2]
            print(f"gpulib {label}: {gpulib_s:7.2f} s  ({read / gpulib_s:,.0f} lines/s, {megabytes / gpulib_s:.1f} MB/s; "
                  f"{len(rules.streams)} streams, signatures {signatures})  RATIO gpulib/grep: {gpulib_s / anchor_s:.1f}x")


if __name__ == "__main__":
    main()
