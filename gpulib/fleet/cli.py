"""``gpulib fleet diff PATH...`` and ``gpulib fleet ledger ARCHIVE...``.

Exit codes: ``diff`` 0 = every node agrees, 1 = at least one odd node, 2 = input error;
``ledger`` 0 = nothing to replace, 1 = at least one GPU to replace, 2 = input error.
"""

from __future__ import annotations

import json
import sys

from gpulib import exit_codes
from gpulib.cli_args import non_negative
from gpulib.errors import InputError
from gpulib.parsers.logtime import zone_argument
from gpulib.readable import require_readable


def register(subparsers) -> None:
    p = subparsers.add_parser("fleet", help="many nodes: config diff across a job, GPU ledger across incidents",
                              description="Compare the configuration of the nodes of a job, or build the history "
                                          "of every GPU across archived runs, diagnoses and evidence.")
    sub = p.add_subparsers(dest="fleet_command", metavar="SUBCOMMAND", required=True)
    d = sub.add_parser("diff", help="driver/CUDA/NCCL/kernel/VBIOS/ECC/MIG/IB config diff; names the odd nodes",
                       description="Read evidence bundles or raw folders of the nodes of one job and list every "
                                   "field on which some nodes differ from the majority.",
                       epilog=exit_codes.epilog("0 every node agrees\n1 at least one odd node\n"
                                                "2 a missing or unreadable path, or no node configuration in them"))
    d.add_argument("paths", nargs="+", metavar="PATH", help="bundles, incident folders or raw folders")
    d.add_argument("--format", choices=("text", "json"), default="text")
    d.add_argument("--tz", default=None, type=zone_argument,
                   help="zone of timestamps printed without one (default: bundle's, else UTC)")
    d.set_defaults(func=run_diff)
    g = sub.add_parser("ledger", help="per-GPU history (by UUID/serial) and replace recommendations",
                       description="Read run archives (archive/, archive/<runbook>/ or one run), `gpulib diagnose "
                                   "--format json` outputs and evidence folders; rank GPUs by how often they were "
                                   "root cause and by their ECC/row-remap trend.",
                       epilog=exit_codes.epilog("0 nothing to replace\n1 at least one GPU to replace\n"
                                                "2 a missing or unreadable path, or nothing readable in them"))
    g.add_argument("paths", nargs="+", metavar="ARCHIVE", help="run archives, diagnosis JSON files, evidence")
    g.add_argument("--format", choices=("text", "json"), default="text")
    g.add_argument("--top", type=non_negative(int), default=20, help="GPUs listed in the text report (default 20)")
    g.set_defaults(func=run_ledger)


def run_diff(args) -> int:
    from gpulib.diagnose.drift import config_drift, odd_nodes, text_report
    from gpulib.diagnose.node_facts import configs_from_paths

    require_readable(args.paths, what="evidence", special=False)
    configs = configs_from_paths(args.paths, tz=args.tz)
    if not configs:
        raise InputError(f"no node configuration found in {', '.join(args.paths)}",
                         hint="pass evidence bundles (gpulib collect) or folders with nvidia-smi -q, uname -a, "
                              "/etc/os-release, ibstat outputs")
    drifts = config_drift(configs)
    if args.format == "json":
        json.dump({"schema": "gpulib.config-diff/1", "nodes": len(configs), "drift": [d.to_dict() for d in drifts],
                   "odd_nodes": odd_nodes(drifts), "configs": [c.to_dict() for c in configs.values()]},
                  sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text_report(configs, drifts))
    return exit_codes.SOFT if drifts else exit_codes.OK


def run_ledger(args) -> int:
    from gpulib.fleet.ledger import build_ledger

    require_readable(args.paths, special=False)
    ledger = build_ledger(args.paths)
    if not ledger.sources:
        raise InputError("nothing readable: " + "; ".join(ledger.problems or args.paths),
                         hint="pass archive/ (gpulib run), diagnosis JSON files or evidence folders")
    if args.format == "json":
        json.dump(ledger.to_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(ledger.to_text(top=args.top))
    return exit_codes.SOFT if any(g.recommendation == "replace" for g in ledger.gpus.values()) else exit_codes.OK
