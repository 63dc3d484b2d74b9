"""``gpulib slurm epilog`` and ``gpulib slurm healthcheck``: hooks for slurm.conf."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpulib import exit_codes
from gpulib.cli_args import non_negative
from gpulib.logs import get_logger

log = get_logger(__name__)

EPILOG_HELP = """For slurm.conf: Epilog=/etc/slurm/epilog.d/gpulib (a script that runs
  gpulib slurm epilog --dir /shared/gpulib-evidence --log /var/log/gpulib-epilog.jsonl).
When the job ended badly (FAILED, NODE_FAIL, TIMEOUT, OUT_OF_MEMORY or a non-zero exit; a plain
scancel is not), this node is captured into DIR/<jobid>/<node> within --timeout seconds, with
scontrol show job -d, sacct and sinfo -R in the bundle's slurm/ folder.
Exit code: always 0 - Slurm drains a node whose Epilog fails, and a gpulib problem must never
drain a node. --strict: 0 done (captured or skipped), 2 misconfigured, 5 the capture failed."""

HEALTH_HELP = """For slurm.conf: HealthCheckProgram=/etc/slurm/gpulib-healthcheck (a script that runs
  gpulib slurm healthcheck), HealthCheckInterval=300, HealthCheckNodeState=ANY.
Runs preflight's single-node checks on a fresh capture (or --evidence PATH); no-go drains the
node with reason "gpulib: <cause>"; go resumes it only when gpulib drained it.
Exit codes: 0 go, 1 go with warnings, 2 usage or input error, 3 no-go (drained),
5 the check itself failed (the node is left as it was)."""


def _epilog(args) -> int:
    from gpulib.slurm.epilog import record as record_outcome
    from gpulib.slurm.epilog import run_epilog

    try:
        outcome = run_epilog(Path(args.dir), dict(os.environ), job_id=args.job_id, node=args.node,
                             budget_s=args.timeout, always=args.always, copy_job_logs=not args.no_job_logs)
    except Exception as exc:  # noqa: BLE001 - an epilog that fails drains the node: never
        print(f"gpulib slurm epilog: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return exit_codes.RUN_FAILED if args.strict else exit_codes.OK
    record_outcome(outcome, Path(args.log) if args.log else None)
    return outcome.exit_code if args.strict else exit_codes.OK


def _healthcheck(args) -> int:
    from gpulib.errors import GpulibError
    from gpulib.slurm.healthcheck import EXIT_FAILED, run_healthcheck

    try:
        outcome = run_healthcheck(dict(os.environ), node=args.node,
                                  evidence=Path(args.evidence) if args.evidence else None,
                                  expected_gpus=args.gpus, budget_s=args.timeout, dry_run=args.dry_run)
    except GpulibError:
        raise  # usage / input error: exit 2 from gpulib.cli
    except Exception as exc:  # noqa: BLE001 - a bug in the check must not change the node
        log.debug("healthcheck crashed", exc_info=True)
        print(f"gpulib slurm healthcheck: the check itself failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"gpulib slurm healthcheck: {outcome.node}: {outcome.message}")
    if outcome.check is not None:
        for f in outcome.check.findings:
            print(f"  {f.severity:>8}  {f.title}")
    return outcome.exit_code


def register(subparsers) -> None:
    p = subparsers.add_parser("slurm", help="Slurm hooks: Epilog capture and HealthCheckProgram drain/resume")
    sub = p.add_subparsers(dest="slurm_command", metavar="HOOK", required=True)

    e = sub.add_parser("epilog", help="capture this node when the job ended badly (for slurm.conf Epilog=)",
                       description=EPILOG_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("--dir", required=True, help="shared evidence folder; bundles go to DIR/<jobid>/<node>")
    e.add_argument("--timeout", type=non_negative(float), default=120.0, metavar="S",
                   help="seconds the whole epilog may take (default 120; the node stays COMPLETING meanwhile)")
    e.add_argument("--log", metavar="FILE", help="append what happened as one JSON line (slurmd drops output)")
    e.add_argument("--job-id", help="job id (default: $SLURM_JOB_ID)")
    e.add_argument("--node", help="this node's Slurm name (default: $SLURMD_NODENAME, else the short host name)")
    e.add_argument("--always", action="store_true", help="capture every job, also those that ended well")
    e.add_argument("--no-job-logs", action="store_true", help="do not copy the job's StdOut/StdErr files")
    e.add_argument("--strict", action="store_true", help="exit non-zero on problems (testing by hand only)")
    e.set_defaults(func=_epilog)

    h = sub.add_parser("healthcheck", help="preflight self-check; drain on no-go, resume gpulib's own drains on go",
                       description=HEALTH_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    h.add_argument("--node", help="this node's Slurm name (default: $SLURMD_NODENAME, else the short host name)")
    h.add_argument("--evidence", metavar="PATH",
                   help="check this bundle or folder of recorded outputs instead of capturing the node now")
    h.add_argument("--gpus", type=non_negative(int), metavar="N",
                   help="GPUs this node must show (default: its Gres=gpu count in Slurm, else at least one; "
                        "0 for a node without GPUs)")
    h.add_argument("--timeout", type=non_negative(float), default=45.0, metavar="S",
                   help="seconds for the whole check (default 45; slurmd kills it at 60)")
    h.add_argument("--dry-run", action="store_true", help="say what would be drained/resumed; change nothing")
    h.set_defaults(func=_healthcheck)
