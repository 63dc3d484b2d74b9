"""``gpulib collect`` and ``gpulib verify``."""

from __future__ import annotations

import argparse
import subprocess
import sys

from gpulib import exit_codes
from gpulib.cli_args import non_negative
from gpulib.collect.bmc import SEL_ENTRIES
from gpulib.collect.capture import collect, summary_lines
from gpulib.collect.files import LOG_CAP_BYTES
from gpulib.collect.prometheus import PrometheusQuery, parse_time
from gpulib.evidence.bundle import verify
from gpulib.readable import require_readable


def _verify(args) -> int:
    require_readable(args.bundle, "dir", what="bundle")
    worst = 0
    for root in args.bundle:
        report = verify(root)
        print("\n".join(report.lines()))
        worst = worst or (0 if report.ok else 1)
    return worst


def _name_seconds(text: str) -> tuple[str, float]:
    name, sep, seconds = text.partition("=")
    try:
        value = float(seconds)
    except ValueError:
        value = -1.0
    if not sep or not name or value <= 0:
        raise argparse.ArgumentTypeError(f"expected NAME=SECONDS, e.g. ipmitool-sdr=120, got {text!r}")
    return name, value


def _collect(args) -> int:
    prometheus = None
    if args.prometheus:
        prometheus = PrometheusQuery(args.prometheus, parse_time(args.since), parse_time(args.until),
                                     step_s=args.prometheus_step, match=args.prometheus_match)
    root = collect(
        args.out, logs=args.logs, checkpoints=args.checkpoints, sample_seconds=args.sample_seconds,
        prev_boot=args.prev_boot, prometheus=prometheus, timeout_scale=args.timeout_scale, host=args.host,
        log_cap_bytes=args.log_cap_mib << 20, collector_timeouts=dict(args.collector_timeout), only=args.only,
        command_line=["gpulib", *sys.argv[1:]],
        data=args.data, sel_entries=args.sel_entries, bug_report=args.bug_report, slurm_job=args.slurm_job,
    )
    print("\n".join(summary_lines(root)))
    if args.digest:
        return _digest(root)
    return exit_codes.OK


#: The map step of a many-node diagnosis takes seconds on a node; minutes mean something is stuck.
DIGEST_TIMEOUT_S = 600


def _digest(root) -> int:
    """``--digest``: this node's own diagnosis input, written into the bundle by running
    ``gpulib diagnose BUNDLE --write-digest`` - a command like any collector's (collect interprets
    nothing itself), so the central ``gpulib diagnose`` over all bundles only joins them."""
    cmd = [sys.executable, "-m", "gpulib", "diagnose", str(root), "--write-digest"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=DIGEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"digest: not written (no answer in {DIGEST_TIMEOUT_S} s); the raw files will be read", file=sys.stderr)
        return exit_codes.SOFT
    if done.returncode != 0:
        print(f"digest: not written ({done.stderr.strip()[-300:]}); the raw files will be read", file=sys.stderr)
        return exit_codes.SOFT
    print(done.stdout.strip())
    return exit_codes.OK


def register(subparsers) -> None:
    p = subparsers.add_parser("verify", help="re-hash an evidence bundle and report changed or missing files")
    p.add_argument("bundle", nargs="+", help="bundle directory (contains manifest.json)")
    p.set_defaults(func=_verify)

    c = subparsers.add_parser(
        "collect", help="capture an evidence bundle of this host (freeze the scene before any restart)",
        description="Capture NVML, nvidia-smi, kernel log, versions, GPU device users, InfiniBand, network links, "
                    "IPMI (sensors, event log, chassis power), file-system usage, logs and a checkpoint listing into one "
                    "evidence bundle. Each source has its own timeout; "
                    "a missing tool or GPU is recorded as unavailable, never a crash.",
        epilog="Fan-out: --out DIR/%h writes DIR/<hostname>; an existing folder DIR (not a bundle) also means "
               "DIR/<hostname>. Example: srun --ntasks-per-node=1 gpulib collect --out /shared/inc-42/%h",
    )
    c.add_argument("--out", required=True, help="bundle directory, or a shared parent folder (see the fan-out rule)")
    c.add_argument("--logs", nargs="+", action="extend", default=[], metavar="PATH",
                   help="training logs (files or folders) to copy; each file keeps its last --log-cap-mib MiB")
    c.add_argument("--log-cap-mib", type=non_negative(int), default=LOG_CAP_BYTES >> 20, help="per-file cap (default 64)")
    c.add_argument("--checkpoints", metavar="DIR", help="checkpoint folder to list (names, sizes, mtimes; nothing is loaded)")
    c.add_argument("--data", nargs="+", action="extend", default=[], metavar="DIR",
                   help="dataset folder(s): their file systems are measured (df -h, stat -f) beside /dev/shm "
                        "and --checkpoints")
    c.add_argument("--sel-entries", type=non_negative(int), default=SEL_ENTRIES, metavar="N",
                   help="keep the newest N BMC event-log entries (ipmitool sel elist last N; default 500)")
    c.add_argument("--bug-report", action="store_true",
                   help="also run nvidia-bug-report.sh into the bundle (takes minutes; its own 600 s timeout)")
    c.add_argument("--sample-seconds", type=non_negative(int), default=0, metavar="N",
                   help="also sample every GPU at 1 Hz for N seconds (catches throttling a snapshot misses)")
    c.add_argument("--prev-boot", action="store_true",
                   help="also save the previous boot's kernel journal (after a crash and reboot the Xid is there)")
    c.add_argument("--prometheus", metavar="URL", help="Prometheus base URL to pull DCGM metrics from, e.g. http://prom:9090")
    c.add_argument("--since", default="1h",
                   help="window start for --prometheus: ISO-8601, unix seconds, or an age such as 2h (default 1h)")
    c.add_argument("--until", default="now", help="window end for --prometheus (default now)")
    c.add_argument("--prometheus-step", type=float, default=15.0, metavar="S",
                   help="resolution of the pulled series in seconds (default 15, dcgm-exporter's usual scrape interval)")
    c.add_argument("--prometheus-match", metavar="MATCHER",
                   help='label matcher for every metric, e.g. \'{Hostname=~"node-a|node-b"}\' (default: all hosts)')
    c.add_argument("--timeout-scale", type=non_negative(float), default=1.0, metavar="F",
                   help="multiply every collector's timeout by F (e.g. 3 on a slow node)")
    c.add_argument("--collector-timeout", type=_name_seconds, action="append", default=[], metavar="NAME=S",
                   help="set one collector's timeout in seconds (names as in the summary), e.g. ipmitool-sdr=120")
    c.add_argument("--only", nargs="+", action="extend", metavar="NAME",
                   help="run only these collectors, e.g. --only prometheus (names as in the summary)")
    c.add_argument("--slurm-job", metavar="ID",
                   help="add Slurm's record of job ID: scontrol show job -d, sacct steps, sinfo -R, this node's "
                        "scontrol show node (slurm/ in the bundle); e.g. --slurm-job \"$SLURM_JOB_ID\"")
    c.add_argument("--host", help="host name for the bundle and %%h (default: this machine's hostname; "
                                  "in Kubernetes pass the node name)")
    c.add_argument("--digest", action="store_true",
                   help="also write digest.json: this node's parsed evidence, so that `gpulib diagnose` over "
                        "thousands of bundles only joins them (run on every node by the fan-out)")
    c.set_defaults(func=_collect)
