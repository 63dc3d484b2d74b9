"""``gpulib drill [EVIDENCE]``: set up a triage drill on any incident folder; ``gpulib notebooks DIR``:
copy the runbook's notebooks out for JupyterLab.

``gpulib notebooks DIR`` exists because an installed gpulib keeps its notebooks inside the
package (:mod:`gpulib.resources`): opening them there edits the installation. The copies run
as they are: their default evidence (``examples/...``) resolves to the shipped examples.

A drill is notebook 00 in drill mode (``drill=True``): the trainee reads the evidence, commits to
a category, hard or soft, and a culprit host / GPU / rank, and only then sees the diagnosis.
This command prepares one so that nothing around the notebook gives the answer away:

- a **new folder** (never an existing one), so no ``findings-00.json`` of an earlier run sits in
  JupyterLab's file browser;
- the evidence **copied under a neutral name** (``evidence/``): an incident folder is often
  named after its answer (``incident-cuda-oom``). Files that hold an answer (``expected.json``,
  ``*.answer.json``, an ``answers/`` folder, findings sidecars, the incident's README) are left
  out, and a folder holding the answer keys of several incidents (``examples/``) is refused:
  its sub-folders are named after their answers. Evidence larger than ``--copy-limit-mib`` is
  read in place, and the command says that its path is visible;
- EVIDENCE read as given, relative to the current folder, as ``gpulib run`` and ``gpulib
  diagnose`` read it (never silently another folder of the same name elsewhere);
- without EVIDENCE, a bundled example picked at random and not named;
- every notebook's ``evidence`` parameter set to the drill's evidence in its parameters cell
  (no default pointing at another incident);
- the next steps' notebooks (01-07) held back in a hidden folder that JupyterLab does not serve,
  and moved beside notebook 00 at the reveal: run before it, they would print the findings.

It prints the ``jupyter lab`` command to open the drill (``--lab`` runs it, with ``--allow-root``
as root: :mod:`gpulib.notebook.lab`). ``gpulib lab [NOTEBOOK]`` opens any runbook notebook the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import stat
from datetime import datetime, timezone
from pathlib import Path

from gpulib import exit_codes, resources
from gpulib.cli_args import non_negative
from gpulib.errors import InputError
from gpulib.notebook import lab
from gpulib.notebook.drill_files import NEXT_STEPS_DIR, SCORE_FILE
from gpulib.readable import require_readable
from gpulib.runbooks.spec import runbook_steps

#: File and folder names that hold an incident's answer rather than its evidence: answer keys,
#: findings of earlier runs, and the incident's write-up (a README tells the story: the bundled
#: examples' READMEs name the culprit GPU and rank).
ANSWER_NAMES = ("expected.json", "answers", "answer.json", "findings.json")
ANSWER_PREFIXES = ("findings-", "README", "readme")
#: The step a drill is set on; its notebook's copy is named :data:`DRILL_NOTEBOOK`.
TRIAGE = "00_triage"
ANSWER_SUFFIXES = (".answer.json",)
DRILL_NOTEBOOK = f"{TRIAGE}-drill.ipynb"


def next_steps() -> list[str]:
    """The steps a trainee opens after the reveal: the incident runbook's after the triage
    (preflight and the health report need live nodes; they have runbooks of their own)."""
    return [step for step in runbook_steps("incident") if step != TRIAGE]


def is_answer(name: str) -> bool:
    return name in ANSWER_NAMES or name.startswith(ANSWER_PREFIXES) or name.endswith(ANSWER_SUFFIXES)


def _answer_keys_of_incidents(path: Path) -> list[str]:
    """``<incident>.answer.json`` files beside the incident folders they answer: a folder of
    several incidents (``examples/``), not one incident."""
    if not path.is_dir():
        return []
    return sorted(p.name for p in path.iterdir() if p.name.endswith(ANSWER_SUFFIXES)
                  and (path / p.name[:-len(ANSWER_SUFFIXES[0])]).is_dir())


def bundled_examples() -> list[Path]:
    """The example incidents shipped in ``examples/`` (each folder but ``answers/``)."""
    root = resources.examples_dir()
    return sorted(p for p in root.iterdir() if p.is_dir() and not is_answer(p.name)) if root.is_dir() else []


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _answers_inside(path: Path) -> list[str]:
    if path.is_file():
        return []
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if is_answer(p.name))


def _special(path: str) -> bool:
    """A FIFO, socket or device: never copied (opening a FIFO blocks until a writer comes)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False  # gone or unreadable: copytree names it
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))


def copy_evidence(source: Path, target: Path) -> list[str]:
    """Copy the evidence to ``target`` without answer files (nor FIFOs, sockets or devices); returns
    what was left out. A file or folder that cannot be read is an :class:`InputError` naming it."""
    try:
        if source.is_file():
            target.mkdir(parents=True)
            shutil.copy2(source, target / source.name)
            return []
        left_out = _answers_inside(source)
        special: list[str] = []

        def ignore(folder: str, names: list[str]) -> list[str]:
            skipped = [n for n in names if _special(os.path.join(folder, n))]
            special.extend(os.path.relpath(os.path.join(folder, n), source) + " (not a regular file)" for n in skipped)
            return [n for n in names if is_answer(n)] + skipped

        shutil.copytree(source, target, symlinks=True, ignore=ignore)
    except shutil.Error as exc:  # copytree collects (source, target, why) of every file it could not copy
        failed = "; ".join(f"{src}: {why}" for src, _dst, why in exc.args[0][:5])
        raise InputError(f"cannot copy the evidence: {failed}", path=str(source),
                         hint="make it readable, or drill on a copy without those files") from None
    except OSError as exc:
        raise InputError(f"cannot copy the evidence: {exc.strerror or exc}", path=str(exc.filename or source),
                         hint="make it readable, or drill on a copy without that file") from None
    return left_out + special


def prepare(evidence: Path, out: Path, *, copy_limit_mib: float = 512) -> dict:
    """Make the drill folder ``out``; returns what was done (paths, copied or in place, left out)."""
    notebooks = resources.notebooks_dir()
    if not (notebooks / f"{TRIAGE}.ipynb").is_file():
        raise InputError("the runbook notebooks are not installed here", path=str(notebooks),
                         hint="reinstall gpulib: its wheel carries them as package data")
    if out.exists():
        raise InputError("the drill folder exists already (a drill starts in a new folder, so no earlier "
                         "answer lies in it)", path=str(out), hint="give a new --out, or leave it out")
    keys = _answer_keys_of_incidents(evidence)
    if keys:
        incidents = [k[:-len(ANSWER_SUFFIXES[0])] for k in keys]
        raise InputError(f"this folder holds {len(keys)} incidents with their answer keys ({', '.join(keys[:3])}"
                         f"{', ...' if len(keys) > 3 else ''}): their folder names and keys would give the answer away",
                         path=str(evidence), hint=f"drill one incident: gpulib drill {evidence / incidents[0]}, or "
                                                  "leave EVIDENCE out for a bundled example at random")
    out.mkdir(parents=True)
    try:
        return _fill(evidence, out, notebooks, copy_limit_mib)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # ours, just made: no half-made drill is left behind
        raise


def _fill(evidence: Path, out: Path, notebooks: Path, copy_limit_mib: float) -> dict:
    import nbformat  # here: `gpulib --help` and the other commands start without them

    copied = _size(evidence) <= copy_limit_mib * (1 << 20)
    left_out: list[str] = []
    if copied:
        target = out / "evidence"
        left_out = copy_evidence(evidence, target)
        path = target / evidence.name if evidence.is_file() else target
    else:
        path = evidence
    written = []
    held = out / NEXT_STEPS_DIR  # released beside notebook 00 at the reveal (gpulib.notebook.drill)
    for name, drill in [(TRIAGE, True), *((n, False) for n in next_steps())]:
        source = notebooks / f"{name}.ipynb"
        if not source.is_file():
            continue
        params = {"evidence": str(path.resolve()), "interactive": True, **({"drill": True} if drill else {})}
        nb = nbformat.read(source, as_version=4)
        _set_defaults(nb, params)
        dest = out / DRILL_NOTEBOOK if drill else held / source.name
        dest.parent.mkdir(exist_ok=True)
        nbformat.write(nb, dest)
        written.append(dest)
    return {"folder": out, "notebook": out / DRILL_NOTEBOOK, "evidence": path, "copied": copied,
            "left_out": left_out, "answers_in_place": [] if copied else _answers_inside(evidence),
            "notebooks": written}


def copy_notebooks(out: Path) -> list[Path]:
    """Copy every shipped notebook into ``out`` (made if missing); never overwrites one."""
    sources = sorted(resources.notebooks_dir().glob("*.ipynb"))
    if not sources:
        raise InputError("the runbook notebooks are not installed here", path=str(resources.notebooks_dir()),
                         hint="reinstall gpulib: its wheel carries them as package data")
    taken = [str(out / s.name) for s in sources if (out / s.name).exists()]
    if taken:
        raise InputError(f"{len(taken)} notebook(s) exist already in the folder (yours may hold edits)",
                         path=taken[0], hint="give a new folder, or move the old copies away")
    out.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(source, out / source.name)) for source in sources]


def run_notebooks(args: argparse.Namespace) -> int:
    out = Path(args.dir).expanduser().resolve()
    copied = copy_notebooks(out)
    print(f"Copied {len(copied)} notebooks to {out}; each opens the bundled example until you set its `evidence`.")
    print("Open them with:")
    print(f"  jupyter lab {out}")
    return exit_codes.OK


def _set_defaults(nb, params: dict) -> None:
    """Write ``params`` as the defaults of the notebook's ``parameters`` cell (``name: type = value``
    lines), so the cell a trainee reads names the drill's evidence, not the example the source
    notebook defaults to; papermill still overrides them as usual."""
    cell = next((c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise InputError("a runbook notebook has no parameters cell", hint="reinstall gpulib: its notebooks are damaged")
    lines = cell.source.splitlines()
    for name, value in params.items():
        pattern = re.compile(rf"^({re.escape(name)}\s*(?::[^=]*)?=\s*)([^#]*?)(\s*#.*)?$")
        for n, line in enumerate(lines):
            match = pattern.match(line)
            if match:
                comment = match.group(3) or ""
                literal = json.dumps(value) if isinstance(value, str) else repr(value)
                lines[n] = f"{match.group(1)}{literal}{comment}"
                break
        else:
            raise InputError(f"the parameters cell has no {name!r} line", hint="reinstall gpulib")
    cell.source = "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.evidence:  # as given, relative to here, as `gpulib run` and `gpulib diagnose` read it
        require_readable([args.evidence], what="evidence", special=False)
        evidence = Path(args.evidence).expanduser().resolve()
        try:
            str(evidence).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("the path is not valid UTF-8, and the drill notebook must hold it as text",
                             path=str(evidence), hint="rename it (or copy the evidence under a plain name)") from None
        named = True
    else:
        examples = bundled_examples()
        if not examples:
            raise InputError("no bundled example to drill on", path=str(resources.examples_dir()),
                             hint="give an incident folder: gpulib drill EVIDENCE")
        evidence, named = random.choice(examples), False
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else Path.cwd() / f"gpulib-drill-{stamp}"
    done = prepare(evidence, out.resolve(), copy_limit_mib=args.copy_limit_mib)
    source = str(evidence) if named else "a bundled example (not named: its folder name would give it away)"
    print(f"Drill ready on {source}")
    if done["copied"]:
        print(f"  evidence copied to {done['evidence']} (a neutral name)")
        if done["left_out"]:
            print(f"  left out, they hold the answer: {', '.join(done['left_out'])}")
    else:
        print(f"  evidence read in place (over {args.copy_limit_mib:g} MiB): {done['evidence']} - the trainee sees "
              "this path")
        if done["answers_in_place"]:
            print(f"  WARNING: answer files inside it, visible to the trainee: {', '.join(done['answers_in_place'])}")
    print(f"  the answer (findings-00.json) is written into {done['folder']} only when the trainee commits;")
    print(f"  the score of each attempt goes to {done['folder'] / SCORE_FILE} (for the trainer)")
    print(f"  the next steps' notebooks ({len(done['notebooks']) - 1}, same evidence) appear beside it at the reveal")
    argv = lab.lab_argv(done["notebook"])
    print("Open it with:")
    print(f"  {lab.shown(argv)}")
    if args.lab:
        return lab.start(argv)  # JupyterLab takes over this terminal until it is shut down
    return exit_codes.OK


def run_lab(args: argparse.Namespace) -> int:
    target = lab.require_target(args.notebook) if args.notebook else resources.notebooks_dir() / f"{TRIAGE}.ipynb"
    if not target.exists():
        raise InputError("the runbook notebooks are not installed here", path=str(target),
                         hint="give a notebook: gpulib lab path/to/notebook.ipynb")
    argv = lab.lab_argv(target)
    print(f"gpulib lab: {lab.shown(argv)}")
    return lab.start(argv)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "drill", help="set up a triage drill on an incident folder (the answer hidden until the trainee commits)",
        description="Copy notebook 00 in drill mode (and the next steps' notebooks) into a new folder with the "
        "evidence under a neutral name, answer files left out, and print the `jupyter lab` command that opens it. "
        "The trainee commits to a category, hard or soft, and a culprit host / GPU / rank; each is scored with "
        "why, with hints and up to three attempts; the findings file and the next step appear only after that.",
        epilog=exit_codes.epilog("0 drill ready (with --lab: JupyterLab was then shut down normally)\n"
                                 "2 evidence not found, or the folder exists already\n"
                                 "5 with --lab: JupyterLab failed to start or crashed (its message above)"))
    p.add_argument("evidence", nargs="?", default="",
                   help="incident folder, evidence bundle or log file (default: a bundled example, at random)")
    p.add_argument("--out", default="", help="the new drill folder (default: ./gpulib-drill-<UTC time>)")
    p.add_argument("--copy-limit-mib", type=non_negative(float), default=512,
                   help="copy the evidence up to this size (MiB), else read it in place (default 512)")
    p.add_argument("--lab", action="store_true",
                   help="start `jupyter lab` on the drill notebook (with --allow-root when run as root)")
    p.set_defaults(func=run)
    n = subparsers.add_parser(
        "notebooks", help="copy the runbook's notebooks into a folder to open them in JupyterLab",
        description="Copy the runbook's notebooks (00 triage ... 09 health report) out of the installed package "
        "into DIR, for JupyterLab. Each runs as copied: its default evidence is a bundled example; set its "
        "`evidence` parameter to your incident. Existing notebooks in DIR are never overwritten.",
        epilog=exit_codes.epilog("0 copied\n2 a notebook of that name exists in DIR already"))
    n.add_argument("dir", help="the folder to copy the notebooks into (made if missing)")
    n.set_defaults(func=run_notebooks)

    p = subparsers.add_parser(
        "lab", help="open a runbook notebook in JupyterLab (also as root, as on GPU nodes and in containers)",
        description="Start `jupyter lab` on NOTEBOOK (default: notebooks/00_triage.ipynb of this gpulib), "
        "serving its folder. As root (GPU nodes, containers) it adds --allow-root, which jupyter lab otherwise "
        "demands before it starts. Ctrl-C twice (or File > Shut Down) ends it.",
        epilog=exit_codes.epilog(lab.LAB_EXIT))
    p.add_argument("notebook", nargs="?", default="", help="a notebook (.ipynb) or a folder of notebooks")
    p.set_defaults(func=run_lab)
