"""Incident-log scan speed: ``gpulib diagnose`` vs ``grep -E`` with the same catalogue of patterns.

Generates (in a temp dir, removed after) an incident of ~800 MB in each of two shapes:

- ``sparse`` (error-sparse): a 64-rank training console (``[rankN]:`` progress lines with per-rank
  timings, NCCL init at the head, watchdog timeouts at the end) plus a node's kernel log (~2 %) with
  a buried Xid 79;
- ``dense`` (progress-dense, what real trainers print): one 8-rank console where *every* line is a
  trainer progress line (``[rank3]:2026-03-10 00:00:00,428 INFO trainer.py:412 step=... loss=...
  lr=... grad_norm=... tok/s=...``), one CUDA OOM on rank 5 and its cascade (watchdog timeouts,
  torchrun's ChildFailedError) at the end.

and times, alternately in the same run (best of N each):

- the anchor: ``grep -E -c`` with the error catalogue (``training_log.CATALOGUE_KEYWORDS``, the
  kernel parser's anchors and the signature catalogue's keywords) over the same files;
- ``gpulib diagnose DIR --format json`` as a subprocess (the whole product: start-up, detection,
  streaming scan, parsing, rules, report), and its peak RSS.

Prints both times, the ratio (target <= 1.0x) and the peak memory (flat in the log size).
Usage: ``.venv/bin/python benchmarks/log_scan.py [MEGABYTES] [--shape sparse|dense|both] [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpulib.catalog.signatures import load_signatures
from gpulib.parsers import kernel_log
from gpulib.parsers.training_log import CATALOGUE_KEYWORDS

RANKS = 64
HOSTS = [f"bench-node-{i:02d}" for i in range(RANKS // 8)]
BUS = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"]


def _training_log(path: Path, megabytes: int, rng: random.Random) -> None:
    target = megabytes * 1024 * 1024
    with open(path, "w") as out:
        for r in range(RANKS):
            host, dev = HOSTS[r // 8], r % 8
            out.write(f"{host}:{4000 + r}:{4100 + r} [{dev}] NCCL INFO Bootstrap : Using bond0:10.9.{r // 8}.1<0>\n"
                      f"{host}:{4000 + r}:{4100 + r} [{dev}] NCCL INFO Using network IB\n"
                      f"{host}:{4000 + r}:{4100 + r} [{dev}] NCCL INFO comm 0x{r:012x} rank {r} nranks {RANKS} "
                      f"cudaDev {dev} nvmlDev {dev} busId {BUS[dev]} commId 0xbe9c - Init COMPLETE\n")
        written, step, second = out.tell(), 0, 0
        while written < target - 200_000:
            step += 1
            lines = []
            for r in range(RANKS):
                second += 1 if r == 0 else 0
                hh, mm, ss = (second // 3600) % 24, (second // 60) % 60, second % 60
                lines.append(f"[rank{r}]:2026-02-01 {hh:02d}:{mm:02d}:{ss:02d},{rng.randrange(1000):03d} - train - "
                             f"INFO - step {step} | loss {2 + rng.random():.4f} | lr 3.000e-04 | "
                             f"timing fwd_bwd_ms={1180 + rng.random() * 30:.1f} data_ms={rng.random() * 3:.2f} "
                             f"allreduce_wait_ms={10 + rng.random() * 8:.1f} | 1.31 s/step\n")
            block = "".join(lines)
            out.write(block)
            written += len(block)
        for r in range(RANKS):
            if r == 13:
                continue
            out.write(f"[rank{r}]:[E201 23:59:59.000000001 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
                      f"collective operation timeout: WorkNCCL(SeqNum={step * 3}, OpType=ALLREDUCE, NumelIn=1024, "
                      f"NumelOut=1024, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n")


def _kernel_log(path: Path, megabytes: int, rng: random.Random) -> None:
    target = megabytes * 1024 * 1024
    noise = ("IPv6: ADDRCONF(NETDEV_CHANGE): cali{n:x}: link becomes ready",
             "docker0: port {d}(veth{n:x}) entered forwarding state",
             "EXT4-fs (nvme1n1): mounted filesystem with ordered data mode. Opts: (null). Quota mode: none.")
    with open(path, "w") as out:
        i, buried = 0, False
        while out.tell() < target:
            i += 1
            msg = rng.choice(noise).format(n=rng.randrange(1 << 20), d=rng.randrange(1, 250))
            out.write(f"2026-02-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d},{i % 999999:06d}+00:00 {msg}\n")
            if not buried and out.tell() > target // 2:
                buried = True
                out.write("2026-02-01T23:49:58,000000+00:00 NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', "
                          "name=<unknown>, GPU has fallen off the bus.\n")


DENSE_RANKS, OOM_RANK = 8, 5


def _dense_log(path: Path, megabytes: int, rng: random.Random) -> None:
    """Every line a trainer progress line, 8 ranks in step; an OOM on one rank and the cascade at the end."""
    target = megabytes * 1024 * 1024
    with open(path, "w") as out:
        written, step, ms = 0, 0, 0
        while written < target - 8192:
            step += 1
            ms += 412
            s = ms // 1000
            stamp = f"2026-03-10 {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d},{ms % 1000:03d}"
            block = "".join(f"[rank{r}]:{stamp} INFO trainer.py:412 step={step} loss={2 + rng.random():.4f} "
                            f"lr=3.000e-04 grad_norm={0.5 + rng.random():.3f} tok/s={118000 + rng.randrange(4000)}\n"
                            for r in range(DENSE_RANKS))
            out.write(block)
            written += len(block)
        s = ms // 1000 + 1
        stamp = f"2026-03-10 {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
        r = OOM_RANK
        out.write(f"[rank{r}]:Traceback (most recent call last):\n"
                  f'[rank{r}]:  File "/app/trainer.py", line 412, in train_step\n'
                  f"[rank{r}]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} has a "
                  f"total capacity of 79.14 GiB of which 1.02 GiB is free. Process 4242 has 78.11 GiB memory in use.\n")
        for q in range(DENSE_RANKS):
            if q != r:
                out.write(f"[rank{q}]:[E310 {stamp[11:]}.000000000 ProcessGroupNCCL.cpp:616] [Rank {q}] Watchdog caught "
                          f"collective operation timeout: WorkNCCL(SeqNum={step * 3}, OpType=ALLREDUCE, NumelIn=1024, "
                          f"NumelOut=1024, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n")
        out.write(f"E0310 {stamp[11:]} torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
                  f"local_rank: {r} (pid: {4100 + r}) of binary: /usr/bin/python3\n"
                  "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")


def generate(root: Path, megabytes: int, shape: str = "sparse") -> None:
    rng = random.Random(11)
    root.mkdir(parents=True)
    if shape == "dense":
        _dense_log(root / "train-console.log", megabytes, rng)
        return
    (root / HOSTS[1]).mkdir()
    _kernel_log(root / HOSTS[1] / "dmesg-iso.txt", max(1, megabytes // 50), rng)
    _training_log(root / "train-console.log", megabytes - max(1, megabytes // 50), rng)


def grep_patterns(path: Path) -> None:
    """The same catalogue, as one ERE per line: the job keywords, the kernel parser's anchors and the
    signature catalogue's keywords (every line of every file goes through it)."""
    literals = [k.decode().rstrip("\n") for k in CATALOGUE_KEYWORDS]
    literals += list(kernel_log.UPPER_ANCHORS + kernel_log.LOWER_ANCHORS)
    literals += sorted({k.strip("\n") for sig in load_signatures() for k in sig.keywords})
    path.write_text("\n".join(re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", lit) for lit in literals if lit) + "\n")


def timed(cmd: list[str]) -> tuple[float, float, int, str]:
    """CPU seconds (user+sys), wall seconds, peak RSS (KiB) and stdout of one subprocess.

    CPU time is the fair measure on a shared machine (other jobs stretch wall time unevenly)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - start, usage.ru_maxrss, out.decode("utf-8", "replace")


def measure(megabytes: int, shape: str, runs: int, grep: str) -> dict:
    """Generate one incident, time grep and gpulib on it alternately (best of ``runs`` each)."""
    with tempfile.TemporaryDirectory(prefix="gpulib-logscan-") as tmp:
        root = Path(tmp) / "incident"
        generate(root, megabytes, shape)
        patterns = Path(tmp) / "patterns.txt"
        grep_patterns(patterns)
        files = [str(p) for p in sorted(root.rglob("*")) if p.is_file()]
        size_mb = sum(os.path.getsize(f) for f in files) / 1e6
        subprocess.run([grep, "-c", "-F", "zzzz-warm-the-page-cache", *files], capture_output=True)
        grep_runs, gpulib_runs = [], []
        for _ in range(runs):  # alternate, keep the best of each: shared machines are noisy
            grep_runs.append(timed([grep, "-E", "-c", "-f", str(patterns), *files]))
            gpulib_runs.append(timed([sys.executable, "-m", "gpulib", "diagnose", str(root), "--format", "json"]))
    grep_cpu, grep_wall, _, grep_out = min(grep_runs)
    cpu, wall, rss_kib, out = min(gpulib_runs)
    verdict = json.loads(out)["verdict"] if out.strip().startswith("{") else {"summary": out[:200]}
    matches = sum(int(x.rsplit(":", 1)[-1]) for x in grep_out.split()) if grep_out else "?"
    print(f"log_scan [{shape}]: {size_mb:.0f} MB ({len(files)} files), grep -E matching lines {matches}, "
          f"verdict {verdict.get('interruption')} / {verdict.get('category')}")
    print(f"  grep -E          cpu {grep_cpu:6.2f} s  wall {grep_wall:6.2f} s")
    print(f"  gpulib diagnose  cpu {cpu:6.2f} s  wall {wall:6.2f} s  ({size_mb / wall:.0f} MB/s wall), "
          f"peak RSS {rss_kib / 1024:.0f} MiB")
    print(f"  ratio gpulib/grep = {cpu / grep_cpu:.2f}x cpu, {wall / grep_wall:.2f}x wall  (target <= 1.0x)")
    return {"shape": shape, "ratio_cpu": cpu / grep_cpu, "ratio_wall": wall / grep_wall, "rss_mib": rss_kib / 1024,
            "category": verdict.get("category")}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("megabytes", nargs="?", type=int, default=800)
    parser.add_argument("--shape", choices=("sparse", "dense", "both"), default="both")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    grep = shutil.which("grep")
    if grep is None:
        print("grep not found: no anchor to compare against")
        return 2
    # gpulib as a wheel install runs it, byte-compiled: under this environment's
    # PYTHONDONTWRITEBYTECODE=1 every run would otherwise compile its modules from source, ~0.3 s of
    # CPU that grep does not pay (a 315 MB dense log: 0.96x grep compiled; +0.3 s is ~1.17x)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parents[1] / "gpulib")],
                   stdout=subprocess.DEVNULL, check=True)
    for shape in ("sparse", "dense") if args.shape == "both" else (args.shape,):
        measure(args.megabytes, shape, args.runs, grep)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
