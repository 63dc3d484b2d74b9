"""The same verdict for nccl-tests files an engineer already has (``gpulib nccl-parse FILE``).

A parsed run carries its rank lines (GPU name, host per rank), so the shape that selects the
expectation (GPU kind, GPUs per node, nodes) comes from the file itself. Runs written by
``gpulib nccl-test`` name their backend in the header line; anything else is nccl-tests on NCCL.
"""

from __future__ import annotations

from pathlib import Path

from gpulib.nccl import thresholds
from gpulib.nccl.bandwidth import infer_nranks
from gpulib.nccl.report import Placement, Row
from gpulib.nccl.verdict import RunShape, judge
from gpulib.parsers import nccl_tests
from gpulib.parsers.base import read_text


def _placement(time_us, algbw, busbw, wrong) -> Placement | None:
    if time_us is None and busbw is None:
        return None
    return Placement(time_us or 0.0, algbw or 0.0, busbw or 0.0, wrong)


def to_rows(run: nccl_tests.NcclTestsRun) -> list[Row]:
    return [Row(r.size_bytes, r.count, r.type or "?", r.redop or "none", r.root if r.root is not None else -1,
                _placement(r.oop_time_us, r.oop_algbw_gbps, r.oop_busbw_gbps, r.oop_wrong),
                _placement(r.ip_time_us, r.ip_algbw_gbps, r.ip_busbw_gbps, r.ip_wrong)) for r in run.rows]


def shape_of(run: nccl_tests.NcclTestsRun) -> RunShape:
    backend = (run.gpulib or {}).get("backend", "nccl")
    per_host: dict[str, int] = {}
    for d in run.devices:
        per_host[d.host] = per_host.get(d.host, 0) + 1
    cpu = backend == "gloo" or (run.devices and all(d.pci_raw == "cpu" for d in run.devices))
    name = "cpu" if cpu else (run.devices[0].name if run.devices else "unknown GPU")
    return RunShape(run.collective or "unknown", backend, name, max(per_host.values(), default=1), len(per_host) or 1)


def nranks_of(run: nccl_tests.NcclTestsRun) -> int | None:
    """From the rank lines; a grepped table without them still shows n in its busbw/algbw ratio."""
    if run.nranks:
        return run.nranks
    for r in reversed(run.rows):
        if run.collective and r.oop_algbw_gbps and r.oop_busbw_gbps is not None:
            return infer_nranks(run.collective, r.oop_busbw_gbps / r.oop_algbw_gbps)
    return None


def summarize_run(run: nccl_tests.NcclTestsRun, table: thresholds.ThresholdTable,
                  expect_busbw: float | None = None) -> dict:
    rows = to_rows(run)
    shape = shape_of(run)
    failure = "; ".join(f"{f.host}: Test {f.kind} failure {f.file}:{f.source_line} '{f.message}'" for f in run.failures)
    if not failure and rows and run.avg_busbw_gbps is None:
        failure = f"the run was cut off after {len(rows)} sizes (no '# Avg bus bandwidth' line)"
    verdict = judge(rows, shape, table, wrong_total=run.wrong_total, failure=failure or None, expect_busbw=expect_busbw)
    largest = max(rows, key=lambda r: r.size_bytes) if rows else None
    return {
        "line": run.line, "program": run.program, "collective": run.collective, "nranks": nranks_of(run),
        "hosts": run.hosts, "gpu": shape.gpu_name, "backend": shape.backend, "rows": len(rows),
        "largest_bytes": largest.size_bytes if largest else None,
        "busbw_at_largest_gbps": largest.best_busbw_gbps if largest else None,
        "avg_busbw_gbps": run.avg_busbw_gbps, "avg_busbw_computed_gbps": run.computed_avg_busbw_gbps,
        "wrong_total": run.wrong_total, "failures": [f.message for f in run.failures],
        "verdict": {"status": verdict.status, "reason": verdict.reason},
    }


def summarize_file(path: str | Path, thresholds_path: str | None = None, expect_busbw: float | None = None, *,
                   table: thresholds.ThresholdTable | None = None) -> dict:
    """Parse and judge one file; pass ``table`` (from :func:`thresholds.load`) when judging many."""
    text, problems = read_text(path)
    result = nccl_tests.parse(text, source=str(path)) if text else None
    problems = [str(p) for p in problems + (result.problems if result else [])]
    table = table or thresholds.load(thresholds_path)
    runs = [summarize_run(r, table, expect_busbw) for r in (result.records if result else [])]
    worst = max((r["verdict"]["status"] for r in runs), key=["PASS", "WARN", "FAIL"].index, default=None)
    out = {"file": str(path), "kind": nccl_tests.KIND, "runs": runs, "problems": problems}
    if worst:
        out["verdict"] = {"status": worst}
    return out


def summary_text(summary: dict) -> str:
    lines = [f"{summary['file']}: {len(summary['runs'])} run(s)"]
    for r in summary["runs"]:
        size = f"{r['largest_bytes']} B" if r["largest_bytes"] is not None else "-"
        busbw = f"{r['busbw_at_largest_gbps']:.2f}" if r["busbw_at_largest_gbps"] is not None else "-"
        avg = r["avg_busbw_gbps"] if r["avg_busbw_gbps"] is not None else f"{r['avg_busbw_computed_gbps']:.4g} (computed)"
        lines.append(f"  line {r['line']}: {r['collective'] or 'unknown collective'} on {r['nranks'] or '?'} ranks, "
                     f"{r['gpu']}, {r['rows']} sizes; busbw {busbw} GB/s at {size}; avg {avg} GB/s; "
                     f"#wrong {r['wrong_total'] if r['wrong_total'] is not None else 'N/A'}")
        lines.append(f"    verdict: {r['verdict']['status']} {r['verdict']['reason']}")
    lines += [f"  problem: {p}" for p in summary["problems"]]
    return "\n".join(lines)
