"""The same verdict for nccl-tests files an engineer already has (``gpulib nccl-parse FILE``).

A parsed run carries its rank lines (GPU name, host per rank), so the shape that selects the
expectation (GPU kind, GPUs per node, nodes) comes from the file itself, and its NCCL_DEBUG lines
(when the run had them) say which NICs and transports were used. Runs written by ``gpulib
nccl-test`` name their backend in the header line; anything else is nccl-tests on NCCL.
"""

from __future__ import annotations

from pathlib import Path

from gpulib.nccl import thresholds
from gpulib.nccl.causes import read_fabric
from gpulib.nccl.identity import identify
from gpulib.nccl.model import Nics
from gpulib.nccl.report import Placement, Row
from gpulib.nccl.sizes import format_size
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


def shape_of(run: nccl_tests.NcclTestsRun, nics: Nics | None = None, *, collective: str | None = None,
             gpu: str | None = None) -> RunShape:
    """GPU kind and layout from the rank lines (else from the hosts that printed NCCL lines and the rank count
    the table shows); NICs from the caller (flags, ibstat), else from NCCL_DEBUG lines. ``collective`` and
    ``gpu`` (``--collective``, ``--gpu``) override what the output says."""
    backend = (run.gpulib or {}).get("backend", "nccl")
    per_host: dict[str, set[int]] = {}
    for d in run.devices:
        per_host.setdefault(d.host, set()).add(d.device)
    fabric = read_fabric(run.debug)
    who = identify(run, collective)
    nranks = who.nranks
    if per_host:
        gpus_per_node, nodes, known = max(len(v) for v in per_host.values()), len(per_host), True
        nodes = max(nodes, -(-(nranks or 1) // gpus_per_node))  # rank lines cut before the last host
    elif fabric.hosts:
        nodes, known = len(fabric.hosts), True
        gpus_per_node = max(1, (nranks or nodes) // nodes)
    else:  # a pasted table alone: assume full 8-GPU nodes, and say the nodes are unknown
        nodes, known = max(1, -(-(nranks or 1) // 8)), False
        gpus_per_node = max(1, (nranks or 1) // nodes)
    cpu = backend == "gloo" or (run.devices and all(d.pci_raw == "cpu" for d in run.devices))
    name = gpu or ("cpu" if cpu else (run.devices[0].name if run.devices else "unknown GPU"))
    clue = None if who.clue == "--collective" else who.clue
    return RunShape(who.collective, backend, name, gpus_per_node, nodes, nranks, nics or fabric.nics, fabric,
                    len(run.devices), nodes_known=known, collective_clue=clue, collective_ambiguous=who.ambiguous)


def nranks_of(run: nccl_tests.NcclTestsRun) -> int | None:
    """From the rank lines; a pasted table without them still shows n in its count-to-size or busbw/algbw ratio."""
    return identify(run).nranks


def _failure(run: nccl_tests.NcclTestsRun) -> str | None:
    """Why the run did not finish: its own failure line, an NCCL error, or the launcher/operator stopping it."""
    first_warn = next((d for d in run.debug if d.level == "WARN"), None)
    warn = f" (first NCCL error, line {first_warn.line}: NCCL WARN {first_warn.text})" if first_warn else ""
    lines = [f"{(f.host + ': ') if f.host else ''}Test {f.kind} failure {f.file}:{f.source_line} '{f.message}'"
             for f in run.failures]
    if not run.rows and (lines or first_warn):
        said = "; ".join(lines) if lines else f"line {first_warn.line}: NCCL WARN {first_warn.text}"
        return f"error before the first size: {said}" + (warn if lines else "")
    if lines:
        return "; ".join(lines) + warn
    if run.avg_busbw_gbps is not None:
        return None
    where = (f"the table stops after {format_size(run.rows[-1].size_bytes)} (line {run.rows[-1].line})" if run.rows
             else "no result row was printed")
    if run.stopped:
        return (f"{where} and the run was ended by {run.stopped}: it hung (a rank stopped progressing), or was "
                "killed; rerun with -T SECONDS and NCCL_DEBUG=INFO")
    late_warn = next((d for d in run.debug if d.level == "WARN" and run.first_row_line and d.line > run.first_row_line),
                     None)
    if late_warn:
        return f"{where} after an NCCL error (line {late_warn.line}: NCCL WARN {late_warn.text})"
    return None


def _cut(run: nccl_tests.NcclTestsRun) -> str | None:
    """The output stops with no footer, no error line and nothing that ended the run: cut, or still running."""
    if run.avg_busbw_gbps is not None or run.complete or _failure(run):
        return None
    if not run.rows:
        return "the header was printed and then nothing: no result row, no error line"
    last = run.rows[-1]
    return (f"the table stops after {format_size(last.size_bytes)} (line {last.line}) with no '# Avg bus bandwidth' "
            "footer and no error line (the paste was cut, or the run was still going)")


def summarize_run(run: nccl_tests.NcclTestsRun, table: thresholds.ThresholdTable,
                  expect_busbw: float | None = None, nics: Nics | None = None, *, collective: str | None = None,
                  gpu: str | None = None) -> dict:
    rows = to_rows(run)
    shape = shape_of(run, nics, collective=collective, gpu=gpu)
    verdict = judge(rows, shape, table, wrong_total=run.wrong_total, failure=_failure(run), expect_busbw=expect_busbw,
                    cut=_cut(run))
    largest = max(rows, key=lambda r: r.size_bytes) if rows else None
    return {
        "line": run.line, "program": run.program, "collective": shape.collective,
        "collective_clue": shape.collective_clue or "--collective", "collective_ambiguous": shape.collective_ambiguous,
        "nranks": shape.nranks,
        "hosts": run.hosts or list(shape.fabric.hosts if shape.fabric else []), "gpu": shape.gpu_name,
        "backend": shape.backend, "rows": len(rows),
        "largest_bytes": largest.size_bytes if largest else None,
        "busbw_at_largest_gbps": largest.best_busbw_gbps if largest else None,
        "avg_busbw_gbps": run.avg_busbw_gbps, "avg_busbw_computed_gbps": run.computed_avg_busbw_gbps,
        "wrong_total": run.wrong_total, "failures": [f.message for f in run.failures],
        "verdict": {"status": verdict.status, "reason": verdict.reason, "causes": verdict.causes,
                    "expected": verdict.expected},
    }


def summarize_file(path: str | Path, thresholds_path: str | None = None, expect_busbw: float | None = None, *,
                   table: thresholds.ThresholdTable | None = None, nics: Nics | None = None,
                   collective: str | None = None, gpu: str | None = None) -> dict:
    """Parse and judge one file; pass ``table`` (from :func:`thresholds.load`) when judging many."""
    text, problems = read_text(path)
    result = nccl_tests.parse(text, source=str(path)) if text else None
    problems = [str(p) for p in problems + (result.problems if result else [])]
    if not text and not problems:  # an empty file is no result: not "0 runs", exit 0
        problems.append(f"{path}: empty file: no nccl-tests output in it")
    table = table or thresholds.load(thresholds_path)
    runs = [summarize_run(r, table, expect_busbw, nics, collective=collective, gpu=gpu)
            for r in (result.records if result else [])]
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
        lines.append(f"  line {r['line']}: {r['collective']} on {r['nranks'] or '?'} ranks, "
                     f"{r['gpu']}, {r['rows']} sizes; busbw {busbw} GB/s at {size}; avg {avg} GB/s; "
                     f"#wrong {r['wrong_total'] if r['wrong_total'] is not None else 'N/A'}")
        lines.append(f"    verdict: {r['verdict']['status']} {r['verdict']['reason']}")
    lines += [f"  problem: {p}" for p in summary["problems"]]
    return "\n".join(lines)
