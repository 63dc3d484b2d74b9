"""PASS / WARN / FAIL for one run, with the reason an operator can act on.

Order of judgement, most certain first:
1. the run did not finish (an error before the first size, a rank that never arrived, a run ended by
   Ctrl-C or a time limit)                                                                  -> FAIL
   (a header and then nothing, with no error: "no result: hung or cut" -> WARN; a table that stops with
   no footer and no error is judged on its rows and the cut is said)
2. ``#wrong`` > 0: the fabric corrupted data                                                -> FAIL
3. busbw 0.00 at every size while algbw is not: busbw = algbw x 2(n-1)/n is 0 only for n = 1,
   so every process ran its own one-rank communicator and no link was measured (unless the output
   shows exactly one process on one GPU)                                                     -> FAIL
4. busbw at the largest message against what a healthy run of this shape reaches *at that size*:
   a fleet-proven minimum from ``thresholds.yaml`` where one matches (or ``--expect-busbw``), else
   the bandwidth model (``model.py``): PASS near it, WARN clearly below, FAIL far below, with the
   bound (intra- or inter-node) and the likely cause the output shows. An unknown GPU (a paste
   without rank lines) is judged by the interconnect's bounds (``bounds.py``); gloo on CPU is *not
   judged* and the verdict says so - never a made-up PASS, never a FAIL for what was not measured.
   Each verdict line names its rule and numbers, and the clue that named the collective.
5. small-message latency above the limit -> WARN (launch/proxy overhead or a slow path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulib.nccl.bounds import bounds_check
from gpulib.nccl.causes import Cause, Fabric, name_causes
from gpulib.nccl.model import MODELLED, Expectation, ModelTable, Nics, expect, smallest_judgeable
from gpulib.nccl.model import load as load_model
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
    nranks: int | None = None
    nics: Nics | None = None  # from flags, ibstat or NCCL_DEBUG lines; None = unknown
    fabric: Fabric | None = field(default=None, repr=False)  # what NCCL_DEBUG lines showed, if any
    rank_lines: int = 0  # "# Rank" lines in the output (> nranks when every process printed its own "Rank 0")
    nodes_known: bool = True  # False for a paste without rank lines or NCCL lines naming the hosts
    collective_clue: str | None = None  # what said the collective (the banner, a command line, the columns...)
    collective_ambiguous: bool = False  # no clue decided: judged with the all_reduce curve

    @property
    def kind(self) -> str:
        if self.gpu_name == "cpu":
            return f"{self.backend}/cpu"
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}"
        return f"{self.backend} on {self.gpus_per_node} x {self.gpu_name} per node, {nodes}"


def _threshold_check(rows: list[Row], shape: RunShape, table: ThresholdTable, threshold: Threshold,
                     from_flag: bool, exp: Expectation | None) -> Check:
    """A fleet-proven minimum (or ``--expect-busbw``): below it is FAIL at its reference size.

    Below the reference size the minimum is scaled down by the model's size curve (a healthy
    8xH100 makes 460 GB/s at 16 GiB but ~430 at 1 GiB), so a run that stopped early is judged
    against what *its* largest size should reach instead of being sent back with "rerun"."""
    largest = max(rows, key=lambda r: r.size_bytes)
    got, want = largest.best_busbw_gbps, threshold.min_busbw_gbps
    where = f"busbw {got:.2f} GB/s at {format_size(largest.size_bytes)} = {got / want:.2f} of the fleet minimum"
    model = f"; {exp.describe()}" if exp else ""
    reference = threshold.reference_bytes or table.default_reference_bytes
    if not from_flag and largest.size_bytes < reference and exp is not None:
        want = want * exp.fraction_at(largest.size_bytes) / exp.fraction_at(reference)
        if got >= want:
            return Check("busbw", "PASS", f"{where} >= {want:.0f} GB/s: {threshold.min_busbw_gbps:g} GB/s at "
                         f"{format_size(reference)} ({threshold.id}) scaled to this size by the model's curve")
    if got < want:
        if not from_flag and largest.size_bytes < reference:
            ref = format_size(reference)
            return Check("busbw", "WARN", f"{where} < {want:.0f} GB/s expected at this size for {shape.kind} "
                         f"({threshold.min_busbw_gbps:g} GB/s at {ref}, {threshold.id}): rerun with -e {ref} before "
                         "calling it slow")
        return Check("busbw", "FAIL", f"{where} < {want:g} GB/s expected for {shape.kind} ({threshold.id}){model}")
    if got < want * (1 + table.warn_margin):
        return Check("busbw", "WARN", f"{where} is within {table.warn_margin:.0%} of the {want:g} GB/s minimum "
                     f"for {shape.kind}: marginal")
    return Check("busbw", "PASS", f"{where} >= {want:g} GB/s expected for {shape.kind} ({threshold.id})")


def _model_check(rows: list[Row], shape: RunShape, exp: Expectation, model: ModelTable) -> tuple[Check, list[Cause]]:
    largest = max(rows, key=lambda r: r.size_bytes)
    got, size = largest.best_busbw_gbps, largest.size_bytes
    want = exp.at(size)
    ratio = got / want if want > 0 else 0.0
    band = f"PASS >= {model.pass_at_least:.0%}, FAIL < {model.fail_below:.0%}"
    base = (f"{got:.1f} GB/s at {format_size(size)} = {ratio:.2f} of the {exp.label(shape.gpus_per_node, shape.nodes)} "
            f"curve at that size ({want:.0f} GB/s a healthy {shape.kind} reaches there; {exp.describe()})")
    assumed = " NICs were assumed: give --nic-gbps/--nics, or a bundle with ibstat, for a firmer verdict." \
        if exp.nics_assumed and exp.inter_gbps is not None else ""
    if ratio >= model.pass_at_least:
        return Check("busbw", "PASS", f"{base}; {band}.{assumed}"), []
    causes = _causes(rows, shape, exp, model)
    why = f"; bound: {exp.bound}; likely cause: " + "; ".join(c.render() for c in causes) if causes else ""
    small = exp.fraction_at(size) < model.min_fraction_to_judge
    if small:
        return Check("busbw", "WARN", f"{base}{why}; but {format_size(size)} reaches only {exp.fraction_at(size):.0%} "
                     f"of the plateau: rerun with -e {smallest_judgeable(exp, model)} or more before calling it slow"), causes
    status = "WARN" if ratio >= model.fail_below else "FAIL"
    network_unknown = exp.nics_assumed and shape.nodes > 1 and exp.bound != "NVLink domain"
    below_any_fabric = got < model.unknown_nic_floor_gbps and exp.gpu.reference_nics is not None
    if status == "FAIL" and network_unknown and not any(c.strong for c in causes) and not below_any_fabric:
        status = "WARN"
        assumed = (" Not failed: the NICs are unknown and the output names no cause; give --nic-gbps/--nics, a "
                   "bundle with ibstat (--ibstat), or NCCL_DEBUG=INFO output.")
    label = "clearly below the model" if status == "WARN" else "far below the model"
    return Check("busbw", status, f"{base}: {label} ({band}){why}.{assumed}"), causes


_NO_FABRIC = Fabric({}, None, None, None, None, False, False, None, {})


def _causes(rows: list[Row], shape: RunShape, exp: Expectation, model: ModelTable) -> list[Cause]:
    got = max(rows, key=lambda r: r.size_bytes).best_busbw_gbps
    return name_causes(shape.fabric or _NO_FABRIC, nodes=shape.nodes, has_nvlink=exp.gpu.nvlink_gbps > 0,
                       nvlink_domain=exp.bound == "NVLink domain", busbw_gbps=got,
                       pcie_gbps=model.pcie_x16_gbps[exp.gpu.pcie_gen], floor_gbps=model.unknown_nic_floor_gbps)


def _bandwidth_check(rows: list[Row], shape: RunShape, table: ThresholdTable, expect_busbw: float | None,
                     model: ModelTable) -> tuple[Check, str | None, Expectation | None, list[Cause]]:
    if shape.gpu_name == "cpu" and expect_busbw is None:
        return Check("busbw", "SKIP", f"no GPU model: bandwidth not judged ({shape.kind} exercises the launcher, the "
                     "rendezvous and correctness, not a GPU fabric)"), None, None, []
    exp = None if shape.gpu_name == "cpu" else expect(
        gpu_name=shape.gpu_name, collective=shape.collective, gpus_per_node=shape.gpus_per_node, nodes=shape.nodes,
        nranks=shape.nranks, nics=shape.nics, table=model)
    threshold = (Threshold("command-line", expect_busbw, "--expect-busbw", collective=shape.collective)
                 if expect_busbw is not None else
                 table.match(gpu_name=shape.gpu_name, backend=shape.backend, collective=shape.collective,
                             gpus_per_node=shape.gpus_per_node, nodes=shape.nodes))
    if not rows:
        return Check("busbw", "FAIL", "no rows were measured"), threshold.source if threshold else None, exp, []
    if threshold is not None:
        check = _threshold_check(rows, shape, table, threshold, expect_busbw is not None, exp)
        check.rule = "--expect-busbw" if expect_busbw is not None else f"fleet minimum {threshold.id}"
        if check.status == "WARN" and exp is not None and expect_busbw is None:
            by_model, causes = _model_check(rows, shape, exp, model)
            by_model.rule = "bandwidth model"
            if by_model.status == "FAIL":  # far below the model even at this size: no need to rerun to know
                return by_model, exp.gpu.source, exp, causes
        causes = _causes(rows, shape, exp, model) if check.status == "FAIL" and exp else []
        if causes:
            check.detail += f"; bound: {exp.bound}; likely cause: " + "; ".join(c.render() for c in causes)
        return check, threshold.source, exp, causes
    if exp is None and model.gpu(shape.gpu_name) is None and shape.collective in MODELLED:
        check, exp, causes = bounds_check(
            rows, collective=shape.collective, gpus_per_node=shape.gpus_per_node, nodes=shape.nodes,
            nodes_known=shape.nodes_known, nranks=shape.nranks, fabric=shape.fabric or _NO_FABRIC, nics=shape.nics,
            model=model, shape_kind=_layout(shape))
        check.rule = "interconnect bounds"
        return check, "gpulib/nccl/expectations.yaml unknown_gpu", exp, causes
    if exp is None:
        return Check("busbw", "SKIP", f"no bandwidth model for {shape.gpu_name!r} {shape.collective} in "
                     "gpulib/nccl/expectations.yaml: bandwidth not judged (set one with --expect-busbw GBPS or "
                     "--thresholds FILE)"), None, None, []
    check, causes = _model_check(rows, shape, exp, model)
    check.rule = "bandwidth model"
    return check, exp.gpu.source, exp, causes


def _layout(shape: RunShape) -> str:
    ranks = f"{shape.nranks} ranks" if shape.nranks else "an unknown number of ranks"
    if not shape.nodes_known:
        return ranks
    return f"{ranks} on {shape.nodes} node{'s' if shape.nodes != 1 else ''}"


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


def _communicator_check(rows: list[Row], shape: RunShape) -> Check | None:
    """busbw 0 everywhere with algbw > 0: one-rank communicators (nccl-tests' factor is 0 for n = 1).

    Only a run that shows exactly one rank line (one process on one GPU) is let off: there busbw is 0 by
    definition. Several rank lines, or none at all (a paste of the table), is ranks that never formed one
    communicator."""
    if shape.collective not in ("all_reduce", "all_gather", "reduce_scatter", "alltoall") or not rows:
        return None
    placements = [p for r in rows for p in r.placements()]
    if any(p.busbw_gbps > 0 for p in placements) or not any(p.algbw_gbps > 0 for p in placements):
        return None
    single = shape.rank_lines == 1 and not (shape.fabric and shape.fabric.single_rank_comms)
    if single:  # one process on one GPU: correct, just nothing to measure
        return None
    grounds = "" if shape.rank_lines else " [no rank lines in the output: the table alone shows busbw 0]"
    if shape.nranks and shape.rank_lines > shape.nranks:
        grounds += f" [{shape.rank_lines} processes each printed their own 'Rank 0' line]"
    if shape.fabric and shape.fabric.single_rank_comms:
        d = shape.fabric.single_rank_comms
        grounds += f" [line {d.line}: NCCL INFO {d.text}]"
    return Check("communicator", "FAIL", f"busbw 0.00 GB/s at every size while algbw is up to "
                 f"{max(p.algbw_gbps for p in placements):.2f} GB/s: busbw = algbw x 2(n-1)/n is 0 only for n = 1, so "
                 "each process ran its own one-rank communicator (nranks 1) and no link was measured - nccl-tests "
                 f"built without MPI=1, or started without a working MPI/PMI launch{grounds}")


def judge(rows: list[Row], shape: RunShape, table: ThresholdTable, *, wrong_total: int | None,
          failure: str | None = None, expect_busbw: float | None = None,
          max_latency_us: float | None = None, model: ModelTable | None = None, cut: str | None = None) -> Verdict:
    """``failure``: why the run did not finish (FAIL). ``cut``: the output stops with no footer and no error
    line: with rows they are judged and the cut is said; with none it is "no result" (WARN, never a silent pass)."""
    model = model or load_model()
    checks: list[Check] = []
    if failure:
        checks.append(Check("completion", "FAIL", failure))
    elif cut and not rows:
        checks.append(Check("completion", "WARN", f"no result: hung or cut - {cut}; rerun with -T SECONDS (nccl-tests "
                            "names the rank that stops) and NCCL_DEBUG=INFO"))
    elif cut:
        checks.append(Check("completion", "SKIP", f"{cut}: judged on the {len(rows)} rows it has"))
    if not rows:
        checks.append(Check("correctness", "SKIP", "no size was measured"))
    elif wrong_total is None:
        checks.append(Check("correctness", "SKIP", "not checked (-c 0)"))
    elif wrong_total > 0:
        checks.append(Check("correctness", "FAIL", f"{wrong_total} wrong elements: data was corrupted in transit "
                            "(a bad GPU, NVLink or NIC; run the pairwise mode to find which)"))
    else:
        checks.append(Check("correctness", "PASS", "0 wrong elements"))
    communicator = _communicator_check(rows, shape)
    if communicator:
        checks.append(communicator)
        bandwidth, source, exp, causes = Check("busbw", "SKIP", "not judged: no link was measured"), None, None, []
    elif not rows and (failure or cut):
        bandwidth, source, exp, causes = Check("busbw", "SKIP", "not judged: no size was measured"), None, None, []
    elif shape.nranks == 1 and expect_busbw is None:
        bandwidth, source, exp, causes = Check("busbw", "SKIP", "one rank: nothing crosses a link, so bandwidth is "
                                               "not judged (start one rank per GPU: mpirun -np N, srun -n N, or -g N)"), \
            None, None, []
    else:
        bandwidth, source, exp, causes = _bandwidth_check(rows, shape, table, expect_busbw, model)
    checks += [bandwidth, _latency_check(rows, shape, table, max_latency_us)]
    worst = max(checks, key=lambda c: _RANK[c.status])
    extra = {"expected": _expected(exp, rows), "causes": [c.key for c in causes]}
    said = _said(shape, checks)
    if _RANK[worst.status] > 0:
        return Verdict(worst.status, worst.line + said, checks, source, **extra)
    if bandwidth.status == "SKIP":
        return Verdict("WARN", f"completed, but {bandwidth.detail}{said}", checks, source, **extra)
    return Verdict("PASS", bandwidth.line + said, checks, source, **extra)


def _said(shape: RunShape, checks: list[Check]) -> str:
    """What the verdict rests on besides its rule: the clue that named the collective, a cut table."""
    out = ""
    judged = any(c.name == "busbw" and c.status != "SKIP" for c in checks)
    if shape.collective_clue and judged:
        out += f" [{shape.collective} from {shape.collective_clue}]"
    note = next((c for c in checks if c.name == "completion" and c.status == "SKIP"), None)
    if note:
        out += f" [{note.detail}]"
    return out


def _expected(exp: Expectation | None, rows: list[Row]) -> dict | None:
    """The model's curve at the measured sizes, for plots beside the measured curve."""
    if exp is None:
        return None
    sizes = sorted({r.size_bytes for r in rows if r.size_bytes > 0})
    return {"plateau_gbps": round(exp.plateau_gbps, 3), "bound": exp.bound, "gpu_model": exp.gpu.id,
            "nics": None if exp.nics is None else {"count": exp.nics.count, "rate_gbit": exp.nics.rate_gbit,
                                                   "origin": exp.nics.origin},
            "curve": [[s, g] for s, g in exp.curve(sizes)]}
