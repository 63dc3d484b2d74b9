"""Bandwidth arithmetic of nccl-tests (``src/*.cu`` ``*GetBw``, ``doc/PERFORMANCE.md``).

*algbw* = S / t, the bytes a rank sees divided by the time, in GB/s with GB = 1e9 bytes.
*busbw* = algbw x factor(n): the factor turns algbw into the bandwidth each link must carry for
that algorithm, so it is comparable across rank counts and with the hardware's link speed (an
8-GPU all_reduce moves 2(n-1)/n of the data over each link). That is why health checks quote
busbw, and why the factor must match nccl-tests exactly for numbers to be comparable.
"""

from __future__ import annotations

from gpulib.parsers.nccl_tests import average_bus_bandwidth, canonical_collective

__all__ = ["BUSBW_FACTORS", "algbw_gbps", "average_bus_bandwidth", "bus_factor", "busbw_gbps", "canonical_collective",
           "infer_nranks"]

#: n = total ranks. Reference: nccl-tests AllReduceGetBw, ReduceScatterGetBw, ...
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "alltoallv": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
    "hypercube": lambda n: 1.0,
}

def bus_factor(collective: str, nranks: int) -> float:
    """The busbw/algbw ratio nccl-tests uses for ``collective`` on ``nranks`` ranks."""
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks}")
    return BUSBW_FACTORS[collective](nranks)


def algbw_gbps(size_bytes: int, seconds: float) -> float:
    return size_bytes / 1.0e9 / seconds if seconds > 0 else 0.0


def busbw_gbps(collective: str, nranks: int, size_bytes: int, seconds: float) -> float:
    return algbw_gbps(size_bytes, seconds) * bus_factor(collective, nranks)


def infer_nranks(collective: str, ratio: float) -> int | None:
    """Rank count implied by an observed busbw/algbw ratio (1.75 for all_reduce -> 8); None if ambiguous."""
    if collective in ("all_reduce",) and ratio < 2:
        n = 2 / (2 - ratio)
    elif collective in ("all_gather", "reduce_scatter", "alltoall", "alltoallv", "gather", "scatter") and ratio < 1:
        n = 1 / (1 - ratio)
    else:
        return None
    return round(n) if round(n) >= 1 else None
