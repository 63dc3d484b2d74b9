"""``nvidia-bug-report.sh``: the file NVIDIA support asks for first (opt-in, ``--bug-report``).

It gathers the driver's view (``nvidia-smi -q``, the kernel log, PCI config space, ``dmesg``,
X/driver logs) into ``nvidia-bug-report.log.gz``. It takes one to several minutes and, on a
node with a hung GPU, can block in ``nvidia-smi``: hence a generous timeout of its own, its
process group killed at the deadline, and whatever it had written kept (the script writes the
plain log first and compresses at the end, so a cut-short run leaves ``nvidia-bug-report.log``).

The script writes into a private temporary folder, not the bundle: files enter the bundle only
through the sink, so a late write after the deadline cannot change a hashed bundle.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gpulib.collect.core import Collector, Outcome, Sink, from_command

SCRIPT = "nvidia-bug-report.sh"
#: Seconds: a healthy 8-GPU node takes 1 to 3 minutes; a hung one never finishes.
TIMEOUT_S = 600


def bug_report_collector() -> Collector:
    def run(sink: Sink, timeout_s: float) -> Outcome:
        with tempfile.TemporaryDirectory(prefix="gpulib-bug-report-") as scratch:
            target = Path(scratch) / "nvidia-bug-report.log"
            result = sink.run([SCRIPT, "--output-file", str(target)], timeout_s, "vendor/nvidia-bug-report.stdout.txt")
            produced = sorted(Path(scratch).glob("nvidia-bug-report.log*"))
            for path in produced:
                sink.write_bytes(f"vendor/{path.name}", path.read_bytes())
        outcome = from_command(result)
        if outcome.status == "ok" and not produced:
            return Outcome("failed", f"{SCRIPT} exited 0 but wrote no nvidia-bug-report.log[.gz]")
        if outcome.status != "ok" and produced:
            outcome.reason = f"{outcome.reason}; kept the partial {produced[-1].name}"
        return outcome

    return Collector("nvidia-bug-report", TIMEOUT_S, run)
