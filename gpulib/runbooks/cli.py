"""``gpulib run`` and ``gpulib archive list|show|diff``."""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path

from gpulib import exit_codes
from gpulib.cli_args import non_negative, positive
from gpulib.evidence.bundle import MANIFEST, sha256_file
from gpulib.progress import StepProgress
from gpulib.readable import require_readable
from gpulib.runbooks import textfile
from gpulib.runbooks.archive import REPORT, default_archive_root, list_runs, require_archive_root, resolve_run
from gpulib.runbooks.compare import diff_runs
from gpulib.runbooks.execute import skip_slow_imports
from gpulib.runbooks.report_view import fact_lines, merge_facts
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

RUN_EXIT = "\n".join(f"{code} {meaning}" for code, meaning in sorted({
    **EXIT_MEANINGS, exit_codes.USAGE: "an unknown runbook, a bad -p parameter, a missing or unreadable --evidence"
}.items()))


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
    return exit_codes.OK


def _terminate(signum, frame):
    raise KeyboardInterrupt


def _run(args) -> int:
    if args.parameters:
        return _describe(args.runbook)  # a RunbookError: gpulib.cli prints it, exit 2
    values = {}
    if args.evidence is not None:
        require_readable([args.evidence], what="evidence", special=False)
        values["evidence"] = str(Path(args.evidence).resolve())
    if args.textfile:
        textfile.check_directory(args.textfile)  # a usage error (exit 2) before a long run, not after
    skip_slow_imports()
    total = len(load_runbook(find_runbook(args.runbook)).steps)  # an unknown runbook: exit 2 before the header
    print(f"gpulib run {args.runbook}: {total} step(s)"
          + (f" on {values['evidence']}" if values else "") + "; progress below, a summary at the end",
          file=sys.stderr, flush=True)
    # A scheduler stops a job with SIGTERM (systemd stop, Kubernetes deadline): treat it as Ctrl-C,
    # which stops the kernels and still archives what ran (exit 5, the run itself failed).
    previous = signal.signal(signal.SIGTERM, _terminate)
    progress = StepProgress(total, label=f"gpulib run {args.runbook}")

    def finished(result, done: int, total: int) -> None:
        error = f"{result.error['type']}: {result.error['message'][:120]}" if result.error else ""
        progress.finished(result.id, result.status, result.duration_s, error)

    try:
        outcome = run_runbook(
            args.runbook, cli=parse_assignments(args.param), values=values, archive_root=Path(args.archive),
            jobs=args.jobs, cell_timeout_s=args.cell_timeout, progress=finished, on_start=progress.started,
            tz=args.tz,
        )
    except RunbookError as exc:  # before anything ran (a parameter, the kernel): gpulib.cli prints it
        _textfile(args, [], exc.exit_code, steps_failed=1)
        raise
    finally:
        progress.close()
        signal.signal(signal.SIGTERM, previous)
    _textfile(args, outcome.findings, outcome.exit_code, sum(s.status != "ok" for s in outcome.steps))
    ok = sum(step.status == "ok" for step in outcome.steps)
    print("\n".join(outcome.headline))  # the report's headline, for a terminal without a browser
    print(f"runbook {args.runbook}: {ok}/{len(outcome.steps)} steps completed")
    for step in outcome.steps:
        if step.error:
            print(f"  FAILED {step.id}: {step.error['type']}: {step.error['message']}")
    facts = [{"severity": f.severity} for f in merge_facts(outcome.findings)]  # one per event, as the report counts
    print("facts:    " + ", ".join(f"{n} {s}" for s, n in severity_counts(facts).items())
          + f" (one per event; {len(outcome.findings)} finding(s) recorded by the steps)")
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


def _evidence_label(run) -> str:
    return ", ".join(run.evidence) or "(live capture)"


def _list(args) -> int:
    root = require_archive_root(Path(args.archive))
    runs = list_runs(root, args.runbook)
    partial = sorted(root.glob(f"{args.runbook or '*'}/.*.partial"))
    for path in partial:
        print(f"incomplete run (still running, or its runner died): {path}")
    if not runs:
        print(f"no archived runs under {root}" + (f" for {args.runbook}" if args.runbook else ""))
        return exit_codes.OK
    rows = [("RUNBOOK", "RUN", "EXIT", "FINDINGS", "EVIDENCE")]
    for run in runs:
        m = run.manifest
        counts = " ".join(f"{k}={v}" for k, v in m.get("findings", {}).items() if v) or "-"
        rows.append((run.runbook, run.path.name, str(m.get("exit_code")), counts, _evidence_label(run)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)) + "  " + row[4])
    print(f"{len(runs)} run(s) under {root}; `gpulib archive show RUN` for one, `gpulib archive diff A B` to compare")
    return exit_codes.OK


def _show(args) -> int:
    run = resolve_run(args.run, Path(args.archive))
    m = run.manifest
    print("\n".join(m.get("headline") or ["(no headline recorded: a run of an older gpulib; its report has one)"]))
    print(f"run:      {run.path}")
    tampered = run.tampered()
    if tampered:  # forged findings are not repeated as if they were the run's
        print("REFUSED: this run was changed after it was archived; its findings are not shown:")
        print("\n".join(f"  {line}" for line in tampered))
        return exit_codes.SOFT
    print(f"runbook:  {run.runbook}  host {m.get('host')}  started {m.get('started_at')}  {m.get('duration_s')} s")
    print(f"evidence: {_evidence_label(run)}")
    print(f"exit {m.get('exit_code')}: {m.get('exit_meaning')}")
    for step in m.get("steps", []):
        error = f"  {step['error']['type']}: {step['error']['message']}" if step.get("error") else ""
        print(f"  {step['id']:<28} {step['status']:<6} {step['duration_s']:7.1f} s  {step['findings']} finding(s){error}")
    facts = merge_facts(run.findings, m.get("root_finding"))
    lines = fact_lines(facts, with_info=args.all)
    hidden = "" if len(lines) == len(facts) else f"; {len(facts) - len(lines)} info fact(s) shown with --all"
    print(f"facts: {len(facts)}, one line per event with the steps that recorded it{hidden}")
    print("\n".join(lines))
    print(f"report:   {run.path / REPORT}")
    print("\n".join(run.verify().lines()))
    print("\n".join(run.chain().lines))
    print(f"manifest sha256: {sha256_file(run.path / MANIFEST)}")
    return exit_codes.OK


def _diff(args) -> int:
    from gpulib.runbooks.provenance import compare_evidence

    root = Path(args.archive)
    a, b = (resolve_run(ref, root) for ref in (args.a, args.b))
    for run in (a, b):
        if tampered := run.tampered():
            raise RunbookError(f"not compared: run {run.path.name} was changed after it was archived: "
                               + "; ".join(tampered), path=str(run.path),
                               hint="compare runs whose files and chain check (gpulib archive show RUN)")
    check = compare_evidence(a, b)
    if check.level == "refuse" and not args.force:
        raise RunbookError(f"not compared: {check.message}",
                           hint="--force compares them anyway, with this warning on top")
    if check.level in ("warning", "refuse"):
        print(f"gpulib archive diff: WARNING: {check.message}", file=sys.stderr)
    diff = diff_runs(a, b, bandwidth_drop_pct=args.bandwidth_drop_pct, evidence=check)
    print(json.dumps(diff.to_dict(), indent=2) if args.format == "json" else "\n".join(diff.lines()))
    return exit_codes.SOFT if diff.regressed else exit_codes.OK


def register(subparsers) -> None:
    archive_help = "archive root (default: $GPULIB_ARCHIVE or ./archive)"
    p = subparsers.add_parser(
        "run", help="run a runbook's notebooks headless and archive them (exit 0 ok, 1 warn, 3 no-go, 5 failed)",
        description="Execute the notebooks of runbooks/NAME.yaml with papermill (interactive=False) and write "
        "an immutable archive: executed notebooks, one offline HTML report, findings.json, manifest.json. "
        "Progress goes to stderr (a bar on a terminal), the summary to stdout.",
        epilog=exit_codes.epilog(RUN_EXIT),
    )
    p.add_argument("runbook", help="runbook name (incident, preflight, health-report) or a path to a .yaml file")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="notebook parameter, converted to the type the notebook declares (repeatable)")
    p.add_argument("--evidence", help="evidence bundle, incident folder or file to analyse (sets 'evidence')")
    p.add_argument("--tz", default=None,
                   help="zone of timestamps printed without one (dmesg -T, nvidia-smi), e.g. Europe/Berlin, for every "
                        "step and the report, as gpulib diagnose --tz; default: the bundle's zone, else UTC")
    p.add_argument("--archive", default=str(default_archive_root()), help=archive_help)
    p.add_argument("--jobs", type=positive(int), default=None, help="notebooks run in parallel (default: CPU cores)")
    p.add_argument("--cell-timeout", type=positive(float), default=None, metavar="SECONDS",
                   help="per-cell execution timeout (default: the runbook's timeouts.cell_s)")
    p.add_argument("--textfile", metavar="DIR",
                   help="also write DIR/gpulib.prom for node_exporter's textfile collector (findings by severity and "
                        "category, per-GPU health, time of the last run; atomic rename)")
    p.add_argument("--parameters", action="store_true",
                   help="list the runbook's steps and the parameters each accepts, then exit (runs nothing)")
    p.set_defaults(func=_run)

    a = subparsers.add_parser("archive", help="list, show (and re-verify) or diff archived runbook runs")
    sub = a.add_subparsers(dest="archive_command", metavar="ACTION", required=True)
    ls = sub.add_parser("list", help="list archived runs, oldest first, with the evidence each read",
                        epilog=exit_codes.epilog("0 listed (also: none yet)\n2 the archive root does not exist "
                                                 "or cannot be read"))
    ls.add_argument("runbook", nargs="?", help="only this runbook")
    show = sub.add_parser("show", help="summary of one run, and a re-hash of its files against the manifest",
                          epilog=exit_codes.epilog("0 every file matches its hash and the chain checks\n1 a file "
                                                   "changed, is missing or unexpected, or a later run recorded "
                                                   "another manifest (changed and re-hashed)\n2 no such run, or an "
                                                   "unreadable archive"))
    show.add_argument("run", help="run directory, run name or id, or RUNBOOK~N (0 = latest)")
    show.add_argument("--all", action="store_true", help="also list info findings")
    diff = sub.add_parser("diff", help="what got worse from run A to run B (exit 1 when anything did)",
                          description="Compare the findings of two archived runs. Runs that read different "
                          "evidence are compared with a WARNING on top; runs of different runbooks, or of "
                          "evidence of different hosts (two incidents), only with --force.",
                          epilog=exit_codes.epilog("0 nothing got worse\n1 something got worse (new Xid, grown "
                                                   "counter, fallen bandwidth, vanished GPU, new finding)\n2 no such "
                                                   "run, a run changed after it was archived, or runs that read "
                                                   "unrelated evidence (without --force)"))
    diff.add_argument("a", help="older run (directory, name, id or RUNBOOK~N)")
    diff.add_argument("b", help="newer run")
    diff.add_argument("--format", choices=("text", "json"), default="text")
    diff.add_argument("--bandwidth-drop-pct", type=non_negative(float), default=10.0,
                      help="report a bandwidth as fallen when it dropped by more than this (default 10)")
    diff.add_argument("--force", action="store_true",
                      help="compare runs of different runbooks or of different hosts' evidence (with a warning)")
    for parser, handler in ((ls, _list), (show, _show), (diff, _diff)):
        parser.add_argument("--archive", default=str(default_archive_root()), help=archive_help)
        parser.set_defaults(func=handler)  # a missing or damaged run: gpulib.cli prints the RunbookError, exit 2
