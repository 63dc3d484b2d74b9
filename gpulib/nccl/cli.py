"""Command lines: ``python -m gpulib.nccl`` (under torchrun), ``gpulib nccl-test``, ``gpulib nccl-parse``.

The flags are nccl-tests' own (``-b -e -f -i -n -w -c -o -d -r -a -m -T``) so a command copied from
a runbook that used ``all_reduce_perf`` works here unchanged; gpulib adds ``--collective``,
``--backend``, the verdict options and the pairwise slow-link search.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from gpulib import exit_codes
from gpulib.cli_args import non_negative, positive
from gpulib.errors import GpulibError, InputError
from gpulib.nccl import nics
from gpulib.nccl import status as run_status
from gpulib.nccl.arguments import validate_args
from gpulib.nccl.bandwidth import canonical_collective
from gpulib.nccl.sizes import parse_size

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
_FLAGS = (  # (dest, flag) in the order they are forwarded to the torchrun workers
    ("collective", "--collective"), ("backend", "--backend"), ("minbytes", "-b"), ("maxbytes", "-e"),
    ("stepfactor", "-f"), ("stepbytes", "-i"), ("iters", "-n"), ("warmup_iters", "-w"), ("agg_iters", "-m"),
    ("check", "-c"), ("op", "-o"), ("datatype", "-d"), ("root", "-r"), ("average", "-a"), ("timeout", "-T"),
    ("json", "--json"), ("bundle", "--bundle"), ("thresholds", "--thresholds"), ("expect_busbw", "--expect-busbw"),
    ("max_latency_us", "--max-latency-us"), ("pairwise", "--pairwise"), ("pairwise_bytes", "--pairwise-bytes"),
    ("slow_ratio", "--slow-ratio"), ("nic_gbps", "--nic-gbps"), ("nics", "--nics"),
)


def _collective(text: str) -> str:
    name = canonical_collective(text)
    if name not in COLLECTIVES:
        raise argparse.ArgumentTypeError(f"unknown collective {text!r}; one of {', '.join(COLLECTIVES)}")
    return name


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_tester_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collective", type=_collective, default="all_reduce", help=f"one of {', '.join(COLLECTIVES)} "
                   "(nccl-tests program names like all_reduce_perf work too; default all_reduce)")
    p.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl when CUDA is available, else gloo")
    p.add_argument("-b", "--minbytes", type=_size, default=parse_size("1M"), help="min size, K/M/G binary (default 1M)")
    p.add_argument("-e", "--maxbytes", type=_size, default=parse_size("256M"), help="max size (default 256M)")
    p.add_argument("-f", "--stepfactor", type=positive(int), default=2, help="multiply size by this (default 2)")
    p.add_argument("-i", "--stepbytes", type=_size, default=parse_size("1M"), help="add this when -f is 1")
    p.add_argument("-n", "--iters", type=positive(int), default=20, help="timed iterations (default 20)")
    p.add_argument("-w", "--warmup_iters", type=non_negative(int), default=5, help="warmup iterations (default 5)")
    p.add_argument("-m", "--agg_iters", type=positive(int), default=1, help="collectives per timed iteration (default 1)")
    p.add_argument("-c", "--check", type=non_negative(int), default=1, help="correctness-check iterations, 0 = off (default 1)")
    p.add_argument("-o", "--op", choices=("sum", "prod", "min", "max", "avg"), default="sum", help="reduction op")
    p.add_argument("-d", "--datatype", default="float", help="float, half, bfloat16, double, int8, uint8, int32, int64")
    p.add_argument("-r", "--root", type=non_negative(int), default=0, help="root rank of broadcast/reduce (default 0)")
    p.add_argument("-a", "--average", type=int, choices=(0, 1, 2, 3), default=1,
                   help="combine rank times: 0 rank 0, 1 mean (nccl-tests default), 2 min, 3 max")
    p.add_argument("-T", "--timeout", type=positive(float), default=300.0,
                   help="seconds one step may take before the ranks that did not arrive are named (default 300)")
    p.add_argument("--json", metavar="FILE", help="write the gpulib.nccl-test/1 JSON result here")
    p.add_argument("--bundle", metavar="DIR", help="write the result as a new evidence bundle")
    p.add_argument("--thresholds", metavar="FILE", help="busbw expectations (default: gpulib/nccl/thresholds.yaml)")
    p.add_argument("--expect-busbw", type=float, metavar="GBPS", help="minimum busbw at the largest size (overrides the file)")
    p.add_argument("--max-latency-us", type=float, metavar="US", help="small-message latency limit (default 100 on nccl)")
    p.add_argument("--pairwise", choices=("auto", "off", "ranks", "nodes"), default="auto",
                   help="pairwise slow-link search: auto runs it when busbw is below expectation (default auto)")
    p.add_argument("--pairwise-bytes", type=_size, help="message size of the pairwise exchange (default: -e)")
    p.add_argument("--slow-ratio", type=float, default=0.6, help="a pair is slow below this x typical (default 0.6)")
    add_nic_arguments(p)


def add_nic_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nic-gbps", type=positive(float), metavar="GBIT", help="rate of each compute NIC in Gb/s (e.g. 400), for "
                   "the inter-node bound of the bandwidth model; with --nics")
    p.add_argument("--nics", type=positive(int), metavar="N", help="compute NICs per node (e.g. 8); with --nic-gbps")


EXIT_CODES = exit_codes.epilog("""0 PASS
1 WARN (clearly below the model, or not judged: gloo/CPU)
2 bad arguments
3 FAIL = no-go (wrong data, far below the model, a hang: the ranks that did not arrive are named)
5 the run itself failed (a rank crashed or raised, torchrun could not start the ranks, no verdict recorded)""")


def tester_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gpulib.nccl",
                                description="nccl-tests-style bus bandwidth under torchrun, with a verdict.",
                                epilog=EXIT_CODES, formatter_class=exit_codes.HelpFormatter)
    add_tester_arguments(p)
    return p


def forward_argv(args: argparse.Namespace) -> list[str]:
    """The worker command line that reproduces ``args`` (for `gpulib nccl-test` starting torchrun)."""
    out: list[str] = []
    for dest, flag in _FLAGS:
        value = getattr(args, dest, None)
        if value is not None:
            out += [flag, str(value)]
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m gpulib.nccl`` (one torchrun worker)."""
    args = tester_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="gpulib: %(levelname)s: %(message)s")
    from gpulib.nccl.runner import run

    code = _run_rank(args, run)
    # torchrun turns any non-zero worker exit into its own 1 and a ChildFailedError. Under `gpulib
    # nccl-test` a judged run exits 0 and the launcher exits by the recorded verdict; under a bare
    # torchrun a WARN exits 0 (not judged is no failed worker), a FAIL 3 and a crash 5.
    if code == run_status.WARN or (run_status.under_launcher() and code in run_status.VERDICT_EXIT.values()):
        return exit_codes.OK
    return code


def _run_rank(args, run) -> int:
    """One rank's run as a table code: its verdict, 2 for bad arguments, 5 when it crashed."""
    try:
        return run(args)
    except GpulibError as exc:
        print(f"gpulib nccl: error: {exc}", file=sys.stderr)
        return run_status.USAGE
    except RuntimeError as exc:  # torch.distributed's errors (DistBackendError, gloo enforce, NCCL errors)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"gpulib nccl: rank {os.environ.get('RANK', '?')}: the collective failed: {first}", file=sys.stderr)
        return run_status.RUN_FAILED


def _nccl_test(args) -> int:
    validate_args(args)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # already one rank of the user's torchrun
        from gpulib.nccl.runner import run

        return _run_rank(args, run)
    nproc = args.nproc_per_node
    if nproc is None:
        import torch

        nproc = torch.cuda.device_count() if torch.cuda.is_available() and args.backend != "gloo" else 2
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               "-m", "gpulib.nccl", *forward_argv(args)]
    logging.getLogger(__name__).info("starting %s", " ".join(command))
    with tempfile.TemporaryDirectory(prefix="gpulib-nccl-") as scratch:
        status_file = Path(scratch) / "status.json"
        env = {**os.environ, run_status.STATUS_ENV: str(status_file)}
        try:
            rc = subprocess.run(command, check=False, env=env).returncode
        except OSError as exc:
            print(f"gpulib nccl-test: could not start torchrun: {exc}", file=sys.stderr)
            return run_status.RUN_FAILED
        recorded = run_status.read(status_file)
    code = run_status.launcher_exit(rc, recorded)
    if code == run_status.RUN_FAILED:
        print(f"gpulib nccl-test: the run itself failed (torchrun exit {rc}, "
              f"{'verdict ' + recorded['status'] if recorded else 'no verdict recorded'}): see the ranks' errors above",
              file=sys.stderr)
    return code


PARSE_EXIT_CODES = exit_codes.epilog("""0 every run PASS
1 a WARN (clearly below the model, not judged, or no result: a header and then nothing)
2 bad arguments, a missing or unreadable file, or a file with no nccl-tests output
3 a FAIL (wrong data, far below the model, a crash, a hang, ranks that never formed one communicator)""")
_PARSE_EXIT = {"PASS": exit_codes.OK, "WARN": exit_codes.SOFT, "FAIL": exit_codes.HARD}


def _nccl_parse(args) -> int:
    from gpulib.nccl import thresholds
    from gpulib.nccl.model import load as load_model
    from gpulib.nccl.parsed import summarize_file
    from gpulib.readable import require_readable

    require_readable(args.file, "file", what="nccl-tests output")
    require_readable([p for p in (args.thresholds, args.ibstat) if p])
    table = thresholds.load(args.thresholds)  # once for all files
    if args.gpu and load_model().gpu(args.gpu) is None:
        known = ", ".join(m for g in load_model().gpus for m in g.match)
        raise InputError(f"--gpu {args.gpu!r} is not in the bandwidth model (gpulib/nccl/expectations.yaml)",
                         hint=f"name it as nccl-tests prints it, containing one of: {known}")
    known = nics.from_flags(args.nic_gbps, args.nics) or (nics.from_ibstat(args.ibstat) if args.ibstat else None)
    worst = 0
    out = []
    for path in args.file:
        summary = summarize_file(path, expect_busbw=args.expect_busbw, table=table, nics=known,
                                 collective=args.collective, gpu=args.gpu)
        out.append(summary)
        status = summary.get("verdict", {}).get("status")
        unreadable = 2 if summary.get("problems") and not summary.get("runs") else 0
        worst = max(worst, _PARSE_EXIT.get(status, 0), unreadable)
    if args.format == "json":
        print(json.dumps(out, indent=2))
    else:
        from gpulib.nccl.parsed import summary_text

        print("\n\n".join(summary_text(s) for s in out))
    return worst


def register(subparsers) -> None:
    p = subparsers.add_parser("nccl-test", help="NCCL/gloo bus bandwidth like nccl-tests, with a PASS/WARN/FAIL verdict",
                              description="Starts torchrun (or runs inside an existing torchrun worker).",
                              epilog=EXIT_CODES)
    add_tester_arguments(p)
    p.add_argument("--nproc-per-node", type=positive(int), help="processes to start (default: CUDA device count, 2 on CPU)")
    p.set_defaults(func=_nccl_test)
    q = subparsers.add_parser("nccl-parse", help="read nccl-tests output (any historical layout) and judge it",
                              description="Judges each run against the bandwidth model (gpulib/nccl/expectations.yaml) "
                              "or a fleet-proven minimum (thresholds.yaml), and names the likely cause.",
                              epilog=PARSE_EXIT_CODES)
    q.add_argument("file", nargs="+", help="nccl-tests or gpulib nccl-test output")
    q.add_argument("--format", choices=("text", "json"), default="text")
    q.add_argument("--thresholds", metavar="FILE", help="fleet-proven busbw minimums (default: packaged table)")
    q.add_argument("--expect-busbw", type=float, metavar="GBPS")
    q.add_argument("--collective", type=_collective, help="the collective the output measured (default: from the "
                   "banner, a program name, the command line, the columns or the table's arithmetic)")
    q.add_argument("--gpu", metavar="MODEL", help="the GPU the run used, as nccl-tests names it (e.g. 'H100 80GB HBM3'): "
                   "judge with its bandwidth model (default: the '# Using devices' lines; without them the "
                   "interconnect's bounds judge)")
    add_nic_arguments(q)
    q.add_argument("--ibstat", metavar="PATH", help="ibstat output, or an evidence bundle holding infiniband/ibstat.txt: "
                   "its fastest active ports are the compute NICs")
    q.set_defaults(func=_nccl_parse)
