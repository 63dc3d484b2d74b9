"""Judge a measurement against what the job needs per second, with the numbers shown.

What N ranks need: every step, each rank's DataLoader reads ``batch`` samples of
``sample_bytes``, so the path must deliver ``ranks x batch x sample_bytes / step_seconds``
bytes/s. When samples are small files (median below 1 MiB), each sample is also at least one
random read, so it must serve ``ranks x batch / step_seconds`` reads/s: compared with the
measured random-read IOPS. Headroom: below 1x the need is a no-go (the GPUs will wait on I/O),
1x to 1.5x is a warning (caches and other jobs on the same storage eat that margin).

Exit codes (docs/ARCHITECTURE.md): 0 enough, 1 marginal or many small files, 3 not enough.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulib.storage.measure import IoMeasurement
from gpulib.storage.scan import SMALL_FILE_BYTES, DatasetScan

HEADROOM = 1.5


@dataclass
class Need:
    ranks: int
    batch: int  # samples per rank per step
    sample_bytes: int
    step_seconds: float = 1.0

    @property
    def bytes_per_s(self) -> float:
        return self.ranks * self.batch * self.sample_bytes / self.step_seconds

    @property
    def samples_per_s(self) -> float:
        return self.ranks * self.batch / self.step_seconds


@dataclass
class Verdict:
    status: str  # enough | marginal | insufficient | measured (no need given)
    exit_code: int
    lines: list[str] = field(default_factory=list)  # what to tell the operator, numbers included

    @property
    def severity(self) -> str:
        """The finding severity of this verdict: error (no-go), warning, info."""
        return {3: "error", 1: "warning"}.get(self.exit_code, "info")


def judge(scan: DatasetScan, io: IoMeasurement, need: Need | None) -> Verdict:
    lines = []
    advice = scan.packing_advice()
    if need is None:
        lines.append("no --ranks/--batch/--sample-bytes given: measured only")
        if advice:
            lines.append(f"warning: {advice}")
        return Verdict("measured", 1 if advice else 0, lines)
    need_mib_s = need.bytes_per_s / (1 << 20)
    ratios = [io.seq_read_mib_s / need_mib_s if need_mib_s else float("inf")]
    lines.append(f"need {need_mib_s:,.1f} MiB/s = {need.ranks} ranks x {need.batch} samples x "
                 f"{need.sample_bytes:,} B / {need.step_seconds:g} s; measured {io.seq_read_mib_s:,.1f} MiB/s "
                 f"sequential ({ratios[0]:.2f}x)")
    if scan.median_file_bytes < SMALL_FILE_BYTES:
        ratios.append(io.rand_read_iops / need.samples_per_s if need.samples_per_s else float("inf"))
        lines.append(f"need {need.samples_per_s:,.0f} reads/s (one per sample: median file "
                     f"{scan.median_file_bytes / 1024:.0f} KiB); measured {io.rand_read_iops:,.0f} random-read IOPS "
                     f"({ratios[-1]:.2f}x), p99 latency {io.rand_lat_p99_us:,.0f} us")
    worst = min(ratios)
    if worst < 1:
        status, code = "insufficient", 3
        lines.append("NO-GO: the path cannot feed all ranks; the GPUs will idle on I/O and slow readers hit "
                     "read timeouts. Stage the data to local NVMe, pack small files into shards, or lower the load.")
    elif worst < HEADROOM:
        status, code = "marginal", 1
        lines.append(f"warning: less than {HEADROOM}x headroom; another job on the same storage tips it over")
    else:
        status, code = "enough", 0
    if advice:
        lines.append(f"warning: {advice}")
        code = max(code, 1)
    return Verdict(status, code, lines)
