"""``gpulib run`` and ``gpulib archive list|show|diff``."""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path

from gpulib.runbooks import textfile
from gpulib.runbooks.archive import REPORT, default_archive_root, list_runs, resolve_run
from gpulib.runbooks.compare import diff_runs
from gpulib.runbooks.execute import skip_slow_imports
from gpulib.runbooks.run import EXIT_MEANINGS, run_runbook, severity_counts
from gpulib.runbooks.spec import (
    RUNNER_PARAMETERS,
    RunbookError,
    find_runbook,
    inspect_parameters,
    load_runbook,
    parse_assignments,
    unparsable_parameters,
)

RUN_FAILED = 3


def _progress(result, done: int, total: int) -> None:
    error = f"  {result.error['type']}: {result.error['message'][:120]}" if result.error else ""
    print(f"[{done}/{total}] {result.id:<28} {result.status:<6} {result.duration_s:6.1f} s{error}",
          file=sys.stderr, flush=True)


def _describe(name: str) -> int:
    """``gpulib run NAME --parameters``: what each step accepts, from its parameters cell."""
    spec = load_runbook(find_runbook(name))
    print(f"runbook {spec.name} ({spec.path})\n{spec.description}")
    for n, stage in enumerate(spec.stages, 1):
        for step in stage:
            print(f"\nstage {n}{' (parallel)' if len(stage) > 1 else ''}: {step.id}  [{step.notebook}]")
            for param in inspect_parameters(step.notebook).values():
                if param.name not in RUNNER_PARAMETERS:
                    default = step.parameters.get(param.name, spec.parameters.get(param.name, param.default))
                    print(f"  -p {param.name}=  ({param.type_name or 'untyped'}, default {default})  {param.help}")
            for name, line in unparsable_parameters(step.notebook).items():
                print(f"  {name}: NOT SETTABLE, papermill cannot parse {line!r} (more than one '=')")
    return 0


def _terminate(signum, frame):
    raise KeyboardInterrupt


def _run(args) -> int:
    if args.parameters:
        try:
            return _describe(args.runbook)
        except RunbookError as exc:
            print(f"gpulib run: error: {exc}", file=sys.stderr)
            return RUN_FAILED
    values = {}
    if args.evidence is not None:
        evidence = Path(args.evidence)
        if not evidence.exists():
            print(f"gpulib run: error: {evidence}: evidence path does not exist", file=sys.stderr)
            return RUN_FAILED
        values["evidence"] = str(evidence.resolve())
    if args.textfile:
        textfile.check_directory(args.textfile)  # a usage error (exit 2) before a long run, not after
    skip_slow_imports()
    # A scheduler stops a job with SIGTERM (systemd stop, Kubernetes deadline): treat it as Ctrl-C,
    # which stops the kernels and still archives what ran (exit 3).
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        outcome = run_runbook(
            args.runbook, cli=parse_assignments(args.param), values=values, archive_root=Path(args.archive),
            jobs=args.jobs, cell_timeout_s=args.cell_timeout,
            progress=_progress if sys.stderr.isatty() else None,
        )
    except RunbookError as exc:
        print(f"gpulib run: error: {exc}", file=sys.stderr)
        _textfile(args, [], RUN_FAILED, steps_failed=1)
        return RUN_FAILED
    finally:
        signal.signal(signal.SIGTERM, previous)
    _textfile(args, outcome.findings, outcome.exit_code, sum(s.status != "ok" for s in outcome.steps))
    ok = sum(step.status == "ok" for step in outcome.steps)
    print(f"runbook {args.runbook}: {ok}/{len(outcome.steps)} steps completed")
    for step in outcome.steps:
        if step.error:
            print(f"  FAILED {step.id}: {step.error['type']}: {step.error['message']}")
    print("findings: " + ", ".join(f"{n} {s}" for s, n in severity_counts(outcome.findings).items()))
    print(f"archive:  {outcome.path}")
    print(f"report:   {outcome.report}")
    print(f"exit {outcome.exit_code}: {EXIT_MEANINGS[outcome.exit_code]}")
    return outcome.exit_code


def _textfile(args, findings: list[dict], exit_code: int, steps_failed: int) -> None:
    """``--textfile DIR``: the run's verdict for node_exporter (a failure to write is reported,
    never a change of the run's exit code, which schedulers act on)."""
    if not args.textfile:
        return
    name = Path(args.runbook).stem if args.runbook.endswith((".yaml", ".yml")) else args.runbook
    try:
        path = textfile.write(args.textfile, name, socket.gethostname(), findings, exit_code, steps_failed)
        print(f"metrics:  {path}")
    except OSError as exc:
        print(f"gpulib run: error: cannot write {args.textfile}/{textfile.FILE_NAME}: {exc.strerror or exc}",
              file=sys.stderr)


def _list(args) -> int:
    root = Path(args.archive)
    runs = list_runs(root, args.runbook)
    partial = sorted(root.glob(f"{args.runbook or '*'}/.*.partial"))
    for path in partial:
        print(f"incomplete run (still running, or its runner died): {path}")
    if not runs:
        print(f"no archived runs under {root}" + (f" for {args.runbook}" if args.runbook else ""))
        return 0
    for run in runs:
        m = run.manifest
        counts = m.get("findings", {})
        print(f"{run.runbook:<16} {run.path.name:<44} exit {m.get('exit_code')}  "
              + " ".join(f"{k}={v}" for k, v in counts.items() if v))
    return 0


def _show(args) -> int:
    run = resolve_run(args.run, Path(args.archive))
    m = run.manifest
    print(f"run:      {run.path}")
    print(f"runbook:  {run.runbook}  host {m.get('host')}  started {m.get('started_at')}  {m.get('duration_s')} s")
    print(f"exit {m.get('exit_code')}: {m.get('exit_meaning')}")
    for step in m.get("steps", []):
        error = f"  {step['error']['type']}: {step['error']['message']}" if step.get("error") else ""
        print(f"  {step['id']:<28} {step['status']:<6} {step['duration_s']:7.1f} s  {step['findings']} finding(s){error}")
    for f in run.findings:
        if f.get("severity") != "info" or args.all:
            print(f"  [{f.get('severity', '?').upper()}] {f.get('step')}: {f.get('title')}")
    print(f"report:   {run.path / REPORT}")
    report = run.verify()
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _diff(args) -> int:
    root = Path(args.archive)
    a, b = (resolve_run(ref, root) for ref in (args.a, args.b))
    diff = diff_runs(a, b, bandwidth_drop_pct=args.bandwidth_drop_pct)
    print(json.dumps(diff.to_dict(), indent=2) if args.format == "json" else "\n".join(diff.lines()))
    return 1 if diff.regressed else 0


def register(subparsers) -> None:
    archive_help = "archive root (default: $GPULIB_ARCHIVE or ./archive)"
    p = subparsers.add_parser(
        "run", help="run a runbook's notebooks headless and archive them (exit 0 ok, 1 warn, 2 no-go, 3 failed)",
        description="Execute the notebooks of runbooks/NAME.yaml with papermill (interactive=False) and write "
        "an immutable archive: executed notebooks, one offline HTML report, findings.json, manifest.json. "
        "Exit codes: " + "; ".join(f"{k} {v}" for k, v in EXIT_MEANINGS.items()),
    )
    p.add_argument("runbook", help="runbook name (incident, preflight, health-report) or a path to a .yaml file")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="notebook parameter, converted to the type the notebook declares (repeatable)")
    p.add_argument("--evidence", help="evidence bundle, incident folder or file to analyse (sets 'evidence')")
    p.add_argument("--archive", default=str(default_archive_root()), help=archive_help)
    p.add_argument("--jobs", type=int, default=None, help="notebooks run in parallel (default: CPU cores)")
    p.add_argument("--cell-timeout", type=float, default=None, metavar="SECONDS",
                   help="per-cell execution timeout (default: the runbook's timeouts.cell_s)")
    p.add_argument("--textfile", metavar="DIR",
                   help="also write DIR/gpulib.prom for node_exporter's textfile collector (findings by severity and "
                        "category, per-GPU health, time of the last run; atomic rename)")
    p.add_argument("--parameters", action="store_true",
                   help="list the runbook's steps and the parameters each accepts, then exit (runs nothing)")
    p.set_defaults(func=_run)

    a = subparsers.add_parser("archive", help="list, show (and re-verify) or diff archived runbook runs")
    sub = a.add_subparsers(dest="archive_command", metavar="ACTION", required=True)
    ls = sub.add_parser("list", help="list archived runs, oldest first")
    ls.add_argument("runbook", nargs="?", help="only this runbook")
    show = sub.add_parser("show", help="summary of one run, and a re-hash of its files against the manifest")
    show.add_argument("run", help="run directory, run name or id, or RUNBOOK~N (0 = latest)")
    show.add_argument("--all", action="store_true", help="also list info findings")
    diff = sub.add_parser("diff", help="what got worse from run A to run B (exit 1 when anything did)")
    diff.add_argument("a", help="older run (directory, name, id or RUNBOOK~N)")
    diff.add_argument("b", help="newer run")
    diff.add_argument("--format", choices=("text", "json"), default="text")
    diff.add_argument("--bandwidth-drop-pct", type=float, default=10.0,
                      help="report a bandwidth as fallen when it dropped by more than this (default 10)")
    for parser, handler in ((ls, _list), (show, _show), (diff, _diff)):
        parser.add_argument("--archive", default=str(default_archive_root()), help=archive_help)
        parser.set_defaults(func=handler)  # a missing or damaged run: gpulib.cli prints the RunbookError, exit 2
