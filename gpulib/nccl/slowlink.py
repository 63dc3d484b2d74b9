"""Find the slow one: pairwise schedules and the analysis that names a rank, node or link.

Why pairwise: in a ring or tree collective every rank waits for the slowest link, so one bad GPU,
NVLink, NIC or cable makes *everyone* slow and the collective's numbers cannot say who. Measured
pair by pair, a bad endpoint shows up as *every* pair it is part of being slow while its partners
are fast with everyone else; a bad link between two endpoints shows up as that one pair alone.

Schedules keep all ranks busy: the circle method pairs n ranks in n-1 rounds of disjoint pairs
(n even; one rank rests per round when n is odd). Across nodes the same schedule runs over
*nodes*, and in each round local rank i of node A exchanges with local rank i of node B, so every
NIC lane of a node pair is exercised at once.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

DEFAULT_SLOW_RATIO = 0.6


def round_robin(members: list[int]) -> list[list[tuple[int, int]]]:
    """Circle-method rounds: every pair of ``members`` exactly once, pairs disjoint within a round.

    >>> round_robin([0, 1, 2, 3])
    [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]
    """
    items: list[int | None] = list(members)
    if len(items) % 2:
        items.append(None)
    n = len(items)
    rounds = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = items[i], items[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        items = [items[0], items[-1], *items[1:-1]]
    return rounds


@dataclass
class PairResult:
    """One measured pair. ``a``/``b`` are ranks (rank mode) or node ranks (node mode)."""

    a: int
    b: int
    algbw_gbps: float
    time_us: float
    label: str = ""
    slowest_lane: int | None = None  # node mode: the local rank whose exchange was slowest


@dataclass
class SlowLinkReport:
    mode: str
    size_bytes: int
    pairs: list[PairResult]
    reference_gbps: float
    slow_ratio: float
    slow_pairs: list[PairResult] = field(default_factory=list)
    suspects: list[int] = field(default_factory=list)
    suspect_labels: list[str] = field(default_factory=list)
    summary: str = ""

    @property
    def slowest(self) -> PairResult | None:
        return min(self.pairs, key=lambda p: p.algbw_gbps, default=None)

    def lines(self) -> list[str]:
        out = [f"mode={self.mode} size={self.size_bytes} B pairs={len(self.pairs)} "
               f"typical={self.reference_gbps:.3f} GB/s (75th percentile) slow<{self.slow_ratio:g}x typical"]
        out += [f"pair {p.a}-{p.b} {p.algbw_gbps:.3f} GB/s {p.time_us:.1f} us {p.label}".rstrip()
                for p in sorted(self.pairs, key=lambda p: p.algbw_gbps)]
        if self.slowest:
            s = self.slowest
            out.append(f"slowest pair: {s.a}-{s.b} {s.algbw_gbps:.3f} GB/s {s.label}".rstrip())
        out.append(f"suspect: {self.summary}")
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d["slowest"] = asdict(self.slowest) if self.slowest else None
        d["lines"] = self.lines()
        return d


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q * 100) - 1]


def localize(pairs: list[PairResult], *, mode: str, size_bytes: int, names: dict[int, str] | None = None,
             slow_ratio: float = DEFAULT_SLOW_RATIO) -> SlowLinkReport:
    """Name the endpoint whose pairs are all slow, or else the slow links themselves.

    ``names`` maps an endpoint (rank or node) to words for the operator ("rank 2 (host-b, GPU 2 ...)").
    A pair is slow below ``slow_ratio`` x the 75th percentile of all pairs (what healthy links do).
    """
    names = names or {}
    word = "rank" if mode == "ranks" else "node"
    report = SlowLinkReport(mode, size_bytes, pairs, 0.0, slow_ratio)
    if not pairs:
        report.summary = "no pairs measured (one rank or one node only)"
        return report
    report.reference_gbps = _percentile([p.algbw_gbps for p in pairs], 0.75)
    if len(pairs) == 1:
        p = pairs[0]
        report.summary = (f"only one pair ({word}s {p.a}-{p.b}, {p.algbw_gbps:.3f} GB/s): nothing to compare it with, "
                          "and with two endpoints the tester cannot tell which end is slow; add a third known-good one")
        return report
    report.slow_pairs = [p for p in pairs if p.algbw_gbps < slow_ratio * report.reference_gbps]
    if not report.slow_pairs:
        s = report.slowest
        report.summary = (f"none: every pair is within {slow_ratio:g}x of typical "
                          f"(slowest {word}s {s.a}-{s.b} at {s.algbw_gbps:.3f} GB/s)")
        return report
    endpoints = sorted({e for p in pairs for e in (p.a, p.b)})
    slow_count = {e: sum(e in (p.a, p.b) for p in report.slow_pairs) for e in endpoints}
    total = {e: sum(e in (p.a, p.b) for p in pairs) for e in endpoints}
    all_slow = [e for e in endpoints if total[e] and slow_count[e] == total[e]]
    if all_slow and len(all_slow) < len(endpoints):
        report.suspects = all_slow
        report.summary = "; ".join(
            f"{names.get(e, f'{word} {e}')}: all {total[e]} of its pairs are slow" for e in all_slow)
    else:
        links = sorted(report.slow_pairs, key=lambda p: p.algbw_gbps)
        report.summary = "slow links (each endpoint is fast with others): " + ", ".join(
            f"{word}s {p.a}-{p.b} {p.algbw_gbps:.3f} GB/s" for p in links)
    report.suspect_labels = [names.get(e, f"{word} {e}") for e in report.suspects]
    return report
