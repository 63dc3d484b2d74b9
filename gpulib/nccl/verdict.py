"""PASS / WARN / FAIL for one run, with the reason an operator can act on.

Order of judgement, most certain first:
1. the run did not finish (a rank never arrived, a timeout)      -> FAIL
2. ``#wrong`` > 0: the fabric corrupted data                      -> FAIL, whatever the speed
3. busbw at the largest message against the expectation for this GPU/fabric kind
   (``thresholds.yaml`` or ``--expect-busbw``): below -> FAIL, within the warn margin -> WARN.
   With no expectation (CPU/gloo, an unknown GPU, a multi-node shape without a number) the
   bandwidth is *not judged* and the verdict says so: WARN, never a made-up PASS.
4. small-message latency above the limit -> WARN (launch/proxy overhead or a slow path).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulib.nccl.report import Check, Row, Verdict
from gpulib.nccl.sizes import format_size
from gpulib.nccl.thresholds import Threshold, ThresholdTable

_RANK = {"PASS": 0, "SKIP": 0, "WARN": 1, "FAIL": 2}


@dataclass
class RunShape:
    """What the expectation depends on. ``gpu_name`` is ``cpu`` for gloo on CPU."""

    collective: str
    backend: str
    gpu_name: str
    gpus_per_node: int
    nodes: int

    @property
    def kind(self) -> str:
        if self.gpu_name == "cpu":
            return f"{self.backend}/cpu"
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}"
        return f"{self.backend} on {self.gpus_per_node} x {self.gpu_name} per node, {nodes}"


def _bandwidth_check(rows: list[Row], shape: RunShape, table: ThresholdTable,
                     expect_busbw: float | None) -> tuple[Check, str | None]:
    if expect_busbw is not None:
        threshold = Threshold("command-line", expect_busbw, "--expect-busbw", collective=shape.collective)
    else:
        threshold = table.match(gpu_name=shape.gpu_name, backend=shape.backend, collective=shape.collective,
                                gpus_per_node=shape.gpus_per_node, nodes=shape.nodes)
    if threshold is None:
        return Check("busbw", "SKIP", f"no threshold for {shape.kind} {shape.collective} in {table.path}: bandwidth "
                     "not judged (set one with --expect-busbw GBPS or --thresholds FILE)"), None
    if not rows:
        return Check("busbw", "FAIL", "no rows were measured"), threshold.source
    largest = max(rows, key=lambda r: r.size_bytes)
    got, want = largest.best_busbw_gbps, threshold.min_busbw_gbps
    where = f"busbw {got:.2f} GB/s at {format_size(largest.size_bytes)}"
    if got < want:
        reference = threshold.reference_bytes
        if expect_busbw is None and largest.size_bytes < (reference or table.default_reference_bytes):
            ref = format_size(reference or table.default_reference_bytes)
            return Check("busbw", "WARN", f"{where} < {want:g} GB/s expected for {shape.kind}, but the expectation "
                         f"holds at {ref}: rerun with -e {ref} before calling it slow"), threshold.source
        return Check("busbw", "FAIL", f"{where} < {want:g} GB/s expected for {shape.kind} ({threshold.id})"), threshold.source
    if got < want * (1 + table.warn_margin):
        return Check("busbw", "WARN", f"{where} is within {table.warn_margin:.0%} of the {want:g} GB/s minimum "
                     f"for {shape.kind}: marginal"), threshold.source
    return Check("busbw", "PASS", f"{where} >= {want:g} GB/s expected for {shape.kind}"), threshold.source


def _latency_check(rows: list[Row], shape: RunShape, table: ThresholdTable, max_latency_us: float | None) -> Check:
    rule = table.latency
    limit = max_latency_us if max_latency_us is not None else (
        rule.max_latency_us if shape.backend in rule.backends else None)
    small = [r for r in rows if r.size_bytes <= rule.small_message_max_bytes and r.best_time_us is not None]
    if limit is None:
        return Check("latency", "SKIP", f"no small-message latency limit for {shape.kind}")
    if not small:
        return Check("latency", "SKIP", f"no message <= {format_size(rule.small_message_max_bytes)} "
                     "was measured (use -b 8 to measure latency)")
    row = min(small, key=lambda r: r.size_bytes)
    t = row.best_time_us
    if t > limit:
        return Check("latency", "WARN", f"{t:.1f} us at {format_size(row.size_bytes)} > {limit:g} us: small messages "
                     "take a slow path (network proxy, TCP instead of IB, or CPU contention)")
    return Check("latency", "PASS", f"{t:.1f} us at {format_size(row.size_bytes)} <= {limit:g} us")


def judge(rows: list[Row], shape: RunShape, table: ThresholdTable, *, wrong_total: int | None,
          failure: str | None = None, expect_busbw: float | None = None,
          max_latency_us: float | None = None) -> Verdict:
    checks: list[Check] = []
    if failure:
        checks.append(Check("completion", "FAIL", failure))
    if not rows:
        checks.append(Check("correctness", "SKIP", "no size was measured"))
    elif wrong_total is None:
        checks.append(Check("correctness", "SKIP", "not checked (-c 0)"))
    elif wrong_total > 0:
        checks.append(Check("correctness", "FAIL", f"{wrong_total} wrong elements: data was corrupted in transit "
                            "(a bad GPU, NVLink or NIC; run the pairwise mode to find which)"))
    else:
        checks.append(Check("correctness", "PASS", "0 wrong elements"))
    bandwidth, source = _bandwidth_check(rows, shape, table, expect_busbw)
    checks += [bandwidth, _latency_check(rows, shape, table, max_latency_us)]
    worst = max(checks, key=lambda c: _RANK[c.status])
    if _RANK[worst.status] > 0:
        return Verdict(worst.status, f"{worst.name}: {worst.detail}", checks, source)
    if bandwidth.status == "SKIP":
        return Verdict("WARN", f"completed, but {bandwidth.detail}", checks, source)
    return Verdict("PASS", bandwidth.detail, checks, source)
