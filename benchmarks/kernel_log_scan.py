"""Kernel-log scan speed: ``gpulib.parsers.kernel_log.parse_file`` vs ``grep -E`` with the same anchors.

Generates a big ``dmesg --time-format=iso`` log (default 200 MB) of ordinary kernel noise with a
few real incident lines buried in it (AER, Xid 79, hung task, OOM kill, IB link loss), then times

- the anchor: ``grep -E -c`` with the parser's pre-filter anchors (finds the candidate lines only);
- gpulib: the full parse (pre-filter, prefix, classification, UTC times, typed events).

Prints both times and the ratio (gpulib / grep). Usage:
``.venv/bin/python benchmarks/kernel_log_scan.py [MEGABYTES]``.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpulib.parsers import kernel_log

NOISE = (
    "IPv6: ADDRCONF(NETDEV_CHANGE): cali{n:x}: link becomes ready",
    "docker0: port {d}(veth{n:x}) entered forwarding state",
    "perf: interrupt took too long ({n} > 2500), lowering kernel.perf_event_max_sample_rate to 79500",
    "audit: type=1400 audit(1741638921.822:{n}): apparmor=\"DENIED\" operation=\"capable\" profile=\"/usr/sbin/cups-browsed\"",
    "IPv4: martian source 10.42.17.255 from 10.42.16.{d}, on dev bond0",
    "EXT4-fs (nvme1n1): mounted filesystem with ordered data mode. Opts: (null). Quota mode: none.",
    "pci 0000:{d:02x}:00.0: [10de:2330] type 00 class 0x030200",
    "mlx5_core 0000:{d:02x}:00.0: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)",
    "nvme nvme{d}: 104/0/0 default/read/poll queues",
    "systemd[1]: Started Session {n} of User ai.",
)
INCIDENT = (
    "pcieport 0000:a8:02.0: AER: Uncorrected (Fatal) error received: 0000:a8:02.0",
    "NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "INFO: task pt_main_thread:48376 blocked for more than 120 seconds.",
    "Out of memory: Killed process 931577 (python) total-vm:312499040kB, anon-rss:190233412kB",
    "mlx5_core 0000:5e:00.0: Port module event: module 0, Cable unplugged",
)


def generate(path: Path, megabytes: int) -> None:
    rng = random.Random(7)
    target = megabytes * 1024 * 1024
    block = []
    for i in range(20000):
        msg = rng.choice(NOISE).format(n=rng.randrange(1, 1 << 20), d=rng.randrange(1, 250))
        block.append(f"2025-03-11T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d},{i % 999999:06d}+00:00 {msg}\n")
    chunk = "".join(block).encode()
    written = 0
    with open(path, "wb") as out:
        while written < target:
            out.write(chunk)
            written += len(chunk)
            if written // len(chunk) % 10 == 5:  # bury an incident line now and then
                out.write(f"2025-03-11T03:12:07,000000+00:00 {rng.choice(INCIDENT)}\n".encode())


def grep_pattern() -> str:
    literals = kernel_log.UPPER_ANCHORS + kernel_log.LOWER_ANCHORS
    return "|".join(re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", lit) for lit in literals)


def main() -> int:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    grep = shutil.which("grep")
    if grep is None:
        print("grep not found: no anchor to compare against")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dmesg-iso.log"
        generate(path, megabytes)
        size_mb = path.stat().st_size / 1e6
        start = time.perf_counter()
        done = subprocess.run([grep, "-E", "-c", grep_pattern(), str(path)], capture_output=True, text=True)
        grep_s = time.perf_counter() - start
        start = time.perf_counter()
        result = kernel_log.parse_file(path)
        gpulib_s = time.perf_counter() - start
    print(f"kernel_log_scan: {size_mb:.0f} MB, grep -E lines {done.stdout.strip()}, "
          f"gpulib events {len(result.records)}")
    print(f"  grep -E {grep_s:.2f} s   gpulib parse_file {gpulib_s:.2f} s   ({size_mb / gpulib_s:.0f} MB/s)")
    print(f"  ratio gpulib/grep = {gpulib_s / grep_s:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
