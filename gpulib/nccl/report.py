"""Result records and their two renderings: the nccl-tests table and the ``gpulib.nccl-test/1`` JSON.

The table reproduces nccl-tests' layout (``src/util.cu`` printf formats) so that people and tools
that read ``all_reduce_perf`` output read ours; our own first line names gpulib, the backend and
the torch/NCCL versions instead of pretending to be nccl-tests. gpulib's additions (latency,
verdict, pairwise) come after the nccl-tests footer as ``# gpulib ...`` comment lines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpulib.nccl.bandwidth import average_bus_bandwidth

SCHEMA = "gpulib.nccl-test/1"


@dataclass
class Placement:
    """One measurement (out-of-place or in-place) of one size. ``wrong`` is None with ``-c 0``."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    rank_time_us: list[float] = field(default_factory=list)


@dataclass
class Row:
    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: Placement | None
    in_place: Placement | None

    def placements(self) -> list[Placement]:
        return [p for p in (self.out_of_place, self.in_place) if p is not None]

    @property
    def best_busbw_gbps(self) -> float:
        return max((p.busbw_gbps for p in self.placements()), default=0.0)

    @property
    def best_time_us(self) -> float | None:
        return min((p.time_us for p in self.placements()), default=None)


@dataclass
class DeviceInfo:
    """One rank's line of ``# Using devices``; ``node`` is torchrun's node rank (GROUP_RANK)."""

    rank: int
    pid: int
    host: str
    node: int
    local_rank: int
    device: int
    pci_bus_id: str | None
    name: str
    group: int = 0

    @property
    def where(self) -> str:
        pci = f" [{self.pci_bus_id}]" if self.pci_bus_id else ""
        return f"rank {self.rank} ({self.host}, node {self.node}, device {self.device}{pci} {self.name})"


@dataclass
class RunConfig:
    collective: str
    backend: str
    dtype: str
    op: str
    root: int
    min_bytes: int
    max_bytes: int
    step_factor: int
    step_bytes: int
    iters: int
    warmup_iters: int
    agg_iters: int
    check: int
    average: int
    world_size: int
    nodes: int
    timeout_s: float


@dataclass
class Check:
    name: str
    status: str  # PASS | WARN | FAIL | SKIP
    detail: str
    rule: str = ""  # which rule judged: "fleet minimum", "bandwidth model", "interconnect bounds", ...

    @property
    def line(self) -> str:
        """``busbw (bandwidth model): 476 GB/s at 4 GiB = 0.99 of ...``: the rule and its numbers."""
        return f"{self.name} ({self.rule}): {self.detail}" if self.rule else f"{self.name}: {self.detail}"


@dataclass
class Verdict:
    """PASS / WARN / FAIL with the reason; ``checks`` say what was judged and against what."""

    status: str
    reason: str
    checks: list[Check] = field(default_factory=list)
    threshold_source: str | None = None  # the vendor/fleet source of the expectation
    expected: dict | None = None  # the bandwidth model at the measured sizes (plateau, bound, curve)
    causes: list[str] = field(default_factory=list)  # keys of the causes named for a degraded run


@dataclass
class TestResult:
    tool: dict
    config: RunConfig
    devices: list[DeviceInfo]
    rows: list[Row] = field(default_factory=list)
    injections: dict = field(default_factory=dict)
    verdict: Verdict | None = None
    pairwise: dict | None = None
    failure: str | None = None

    @property
    def avg_busbw_gbps(self) -> float:
        return average_bus_bandwidth(p.busbw_gbps for r in self.rows for p in r.placements())

    @property
    def wrong_total(self) -> int | None:
        values = [p.wrong for r in self.rows for p in r.placements() if p.wrong is not None]
        return sum(values) if values else None

    def to_dict(self) -> dict:
        out = {"schema": SCHEMA, **asdict(self)}
        out["avg_busbw_gbps"] = self.avg_busbw_gbps
        out["wrong_total"] = self.wrong_total
        return out


# -- nccl-tests text layout ------------------------------------------------------------------------

def fit_number(value: float, width: int) -> str:
    """nccl-tests ``getFloatStr``: ``%.2f``, else ``%.1f``, ``%.0f``, ``%.1e``, ``%.0e``, whichever fits."""
    text = ""
    for spec in (".2f", ".1f", ".0f", ".1e", ".0e"):
        text = format(value, spec)
        if len(text) <= width:
            break
    return text.rjust(width)


_PREAMBLE = "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}"
_BODY = "  {:>7}  {:>6}  {:>6}  {:>6}"


def header_lines(result: TestResult) -> list[str]:
    c, tool = result.config, result.tool
    step = f"{c.step_factor}(factor)" if c.step_factor > 1 else f"{c.step_bytes}(bytes)"
    lines = [
        f"# gpulib nccl-tester {tool['gpulib']} backend={c.backend} torch={tool['torch']} nccl={tool['nccl']} "
        f"collective={c.collective} nranks={c.world_size} nodes={c.nodes}",
        f"# Collective test starting: {c.collective}_perf",
        f"# nThread 1 nGpus 1 minBytes {c.min_bytes} maxBytes {c.max_bytes} step: {step} warmup iters: "
        f"{c.warmup_iters} iters: {c.iters} agg iters: {c.agg_iters} validation: {1 if c.check else 0} graph: 0",
    ]
    lines += [f"# gpulib TEST INJECTION active: {k}={v} (results are deliberately wrong or slow)"
              for k, v in sorted(result.injections.items())]
    lines += ["#", "# Using devices"]
    for d in result.devices:
        lines.append(f"#  Rank {d.rank:2d} Group {d.group:2d} Pid {d.pid:6d} on {d.host:>10} device {d.device:2d} "
                     f"[{_short_pci(d.pci_bus_id)}] {d.name}")
    lines += [
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
        _PREAMBLE.format("size", "count", "type", "redop", "root") + _BODY.format("time", "algbw", "busbw", "#wrong") * 2,
        _PREAMBLE.format("(B)", "(elements)", "", "", "") + _BODY.format("(us)", "(GB/s)", "(GB/s)", "") * 2,
    ]
    return lines


def _short_pci(pci: str | None) -> str:
    """nccl-tests prints ``[%04x:%02x:%02x]`` (domain:bus:device, no function); CPU ranks say ``cpu``."""
    if not pci:
        return "cpu"
    return pci.rsplit(".", 1)[0]


def row_line(row: Row) -> str:
    text = f"{row.size_bytes:12d}  {row.count:12d}  {row.type:>8}  {row.redop:>6}  {row.root:>6}"
    for p in (row.out_of_place, row.in_place):
        if p is None:
            text += _BODY.format("N/A", "N/A", "N/A", "N/A")
        else:
            wrong = "N/A" if p.wrong is None else str(p.wrong)
            text += _BODY.format(fit_number(p.time_us, 7), fit_number(p.algbw_gbps, 6), fit_number(p.busbw_gbps, 6), wrong)
    return text


def footer_lines(result: TestResult) -> list[str]:
    wrong = result.wrong_total or 0
    lines = [
        f"# {'Out of bounds values':<20} : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
        f"# {'Avg bus bandwidth':<20} : {result.avg_busbw_gbps:g}",
        "#",
        f"# Collective test concluded: {result.config.collective}_perf",
    ]
    skew = rank_time_spread(result.rows)
    if skew:
        lines.append(f"# gpulib rank times: {skew}")
    if result.failure:
        lines.append(f"# gpulib failure: {result.failure}")
    if result.pairwise:
        lines += [f"# gpulib pairwise: {line}" for line in result.pairwise.get("lines", [])]
    if result.verdict:
        for check in result.verdict.checks:
            lines.append(f"# gpulib check {check.name}: {check.status} {check.detail}")
        lines.append(f"# gpulib verdict: {result.verdict.status} {result.verdict.reason}")
    return lines


def rank_time_spread(rows: list[Row]) -> str | None:
    """Per-rank time spread at the largest size: which rank took longest, and by how much.

    In a collective every rank waits for the slowest, so the spread is small even with a slow
    rank; a large one points at ranks that started late (host jitter, a busy CPU). The slow
    *link* is found by the pairwise mode, not here."""
    if not rows:
        return None
    row = max(rows, key=lambda r: r.size_bytes)
    p = row.out_of_place or row.in_place
    if p is None or len(p.rank_time_us) < 2:
        return None
    times = p.rank_time_us
    lo, hi = min(range(len(times)), key=times.__getitem__), max(range(len(times)), key=times.__getitem__)
    spread = (times[hi] - times[lo]) / times[lo] if times[lo] > 0 else 0.0
    return (f"at {row.size_bytes} B min {times[lo]:.1f} us (rank {lo}), max {times[hi]:.1f} us (rank {hi}), "
            f"spread {spread:.0%}")


def render(result: TestResult) -> str:
    return "\n".join(header_lines(result) + [row_line(r) for r in result.rows] + footer_lines(result)) + "\n"
