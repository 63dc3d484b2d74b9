"""Runbook specifications: which notebooks run, in what order, with which parameters.

A runbook is a small YAML file (``runbooks/<name>.yaml``)::

    description: what a scheduler or on-call gets from this run
    notebook_dir: ../notebooks          # relative to the YAML file
    timeouts: {start_s: 60, cell_s: 600}
    parameters:                         # defaults offered to every step that declares them
      window_minutes: 60
    steps:                              # run one after the other ...
      - 00_triage
      - parallel:                       # ... except a parallel group, whose steps run together
          - 01_kernel_xid
          - notebook: 04_thermal_power
            parameters: {temp_warn_c: 85}
            cell_timeout_s: 900

Why validate before running: papermill only *warns* about an unknown parameter (a typo such as
``-p nodee=...`` silently runs the notebook on its default) and never checks types. A nightly
job that quietly ignored its parameters would archive a healthy-looking report about the wrong
thing, so every name and value is checked against ``papermill.inspect_notebook`` first.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpulib import resources
from gpulib.errors import InputError

#: Parameters the runner owns: it passes ``interactive=False`` and a ``findings_path`` of its own.
RUNNER_PARAMETERS = ("interactive", "findings_path")
DEFAULT_START_TIMEOUT_S = 60.0
DEFAULT_CELL_TIMEOUT_S = 600.0
_TOP_KEYS = {"name", "description", "notebook_dir", "timeouts", "parameters", "steps", "with_evidence"}
_STEP_KEYS = {"notebook", "id", "parameters", "cell_timeout_s"}


class RunbookError(InputError):
    """The runbook, a notebook of it or a parameter is unusable; nothing has been executed."""


@dataclass(frozen=True)
class StepSpec:
    """One notebook execution: ``id`` names its outputs (the notebook stem unless given)."""

    id: str
    notebook: Path
    parameters: dict = field(default_factory=dict)
    cell_timeout_s: float | None = None


@dataclass
class RunbookSpec:
    name: str
    path: Path
    description: str
    stages: list[list[StepSpec]]  # stages run in order; the steps of one stage run in parallel
    parameters: dict
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    #: parameters that also apply when the run is given evidence (``--evidence`` / ``-p evidence=``),
    #: e.g. a preflight that checks this host live unless it is told what to check
    with_evidence: dict = field(default_factory=dict)
    cell_timeout_s: float = DEFAULT_CELL_TIMEOUT_S

    @property
    def steps(self) -> list[StepSpec]:
        return [step for stage in self.stages for step in stage]


def runbook_dirs() -> list[Path]:
    """Where ``gpulib run NAME`` looks: ``$GPULIB_RUNBOOKS``, ``./runbooks``, then the shipped ones
    (:func:`gpulib.resources.runbooks_dir`: the checkout's ``runbooks/`` or the wheel's package data)."""
    dirs = [Path(p) for p in os.environ.get("GPULIB_RUNBOOKS", "").split(os.pathsep) if p]
    dirs += [Path.cwd() / "runbooks", resources.runbooks_dir()]
    return dirs


def runbook_steps(name: str) -> list[str]:
    """The step ids of the shipped runbook ``name`` (:func:`gpulib.resources.runbooks_dir`, never a
    local ``./runbooks`` override), in the order it runs them."""
    return [step.id for step in load_runbook(resources.runbooks_dir() / f"{name}.yaml").steps]


def find_runbook(name: str) -> Path:
    """A path to a YAML file, or a runbook name looked up in :func:`runbook_dirs`."""
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml"):
        if candidate.is_file():
            return candidate
        raise RunbookError("runbook file not found", path=name)
    seen = []
    for folder in runbook_dirs():
        for suffix in (".yaml", ".yml"):
            path = folder / f"{name}{suffix}"
            if path.is_file():
                return path
        seen.append(str(folder))
    available = sorted({p.stem for d in runbook_dirs() if d.is_dir() for p in d.glob("*.y*ml")})
    raise RunbookError(
        f"no runbook named {name!r} in {', '.join(dict.fromkeys(seen))}",
        hint=f"available: {', '.join(available) or 'none'}; or pass a path to a .yaml file",
    )


def load_runbook(path: str | Path) -> RunbookSpec:
    """Parse and check the shape of a runbook file (notebooks must exist; parameters come later)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunbookError(f"cannot read runbook: {exc.strerror}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise RunbookError(f"not a UTF-8 text file ({exc.reason} at byte {exc.start})", path=str(path),
                           hint="a runbook is a YAML file; is this the right path?") from exc
    except yaml.YAMLError as exc:
        raise RunbookError(f"not valid YAML: {exc}", path=str(path)) from exc
    if not isinstance(doc, dict):
        raise RunbookError("a runbook is a YAML mapping with a 'steps' list", path=str(path))
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise RunbookError(f"unknown keys {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}", path=str(path))
    notebook_dir = (path.parent / doc.get("notebook_dir", ".")).resolve()
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        raise RunbookError("'steps' must be a non-empty list", path=str(path))
    stages = []
    for item in steps:
        group = item["parallel"] if isinstance(item, dict) and set(item) == {"parallel"} else [item]
        if not isinstance(group, list) or not group:
            raise RunbookError("'parallel' must be a non-empty list of steps", path=str(path))
        stages.append([_step(entry, notebook_dir, path) for entry in group])
    ids = [step.id for stage in stages for step in stage]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise RunbookError(f"step ids {duplicates} repeat; give repeated notebooks an 'id'", path=str(path))
    timeouts = doc.get("timeouts") or {}
    parameters = doc.get("parameters") or {}
    with_evidence = doc.get("with_evidence") or {}
    if not all(isinstance(d, dict) for d in (parameters, timeouts, with_evidence)):
        raise RunbookError("'parameters', 'with_evidence' and 'timeouts' must be mappings", path=str(path))
    return RunbookSpec(
        name=str(doc.get("name") or path.stem),
        path=path.resolve(),
        description=str(doc.get("description") or "").strip(),
        stages=stages,
        parameters=dict(parameters),
        with_evidence=dict(with_evidence),
        start_timeout_s=_seconds(timeouts.get("start_s", DEFAULT_START_TIMEOUT_S), "timeouts.start_s", path),
        cell_timeout_s=_seconds(timeouts.get("cell_s", DEFAULT_CELL_TIMEOUT_S), "timeouts.cell_s", path),
    )


def _seconds(value, where: str, path: Path) -> float:
    """A positive number of seconds (a timeout of 0 or 'ten' would mean "never" or a crash)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise RunbookError(f"{where} must be a positive number of seconds, got {value!r}", path=str(path))
    return float(value)


def _step(entry, notebook_dir: Path, path: Path) -> StepSpec:
    if isinstance(entry, str):
        entry = {"notebook": entry}
    if not isinstance(entry, dict) or "notebook" not in entry or set(entry) - _STEP_KEYS:
        raise RunbookError(
            f"a step is a notebook name or a mapping with keys {sorted(_STEP_KEYS)}, got {entry!r}", path=str(path)
        )
    name = str(entry["notebook"])
    notebook = notebook_dir / (name if name.endswith(".ipynb") else f"{name}.ipynb")
    if not notebook.is_file():
        raise RunbookError(f"step notebook {notebook} does not exist", path=str(path))
    parameters = entry.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise RunbookError(f"step {name}: 'parameters' must be a mapping", path=str(path))
    timeout = entry.get("cell_timeout_s")
    return StepSpec(
        id=str(entry.get("id") or notebook.stem),
        notebook=notebook,
        parameters=dict(parameters),
        cell_timeout_s=_seconds(timeout, f"step {name}: cell_timeout_s", path) if timeout is not None else None,
    )


# --- parameters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotebookParameter:
    """One entry of ``papermill.inspect_notebook``: the type is only known when annotated."""

    name: str
    type_name: str | None
    default: str
    help: str

    @property
    def accepted(self) -> tuple[str, ...] | None:
        """Checkable base types (``str``, ``int``, ``None``, ...), or None when not checkable."""
        return _alternatives(self.type_name) if self.type_name else None


_ASSIGNMENT = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?::[^=]*)?=")


def unparsable_parameters(notebook: Path) -> dict[str, str]:
    """Parameter lines papermill skips: it ignores any line with more than one ``=``, so
    ``host: str = ""  # (empty = all)`` silently makes ``host`` unknown to inspect_notebook."""
    import nbformat

    lines = {}
    for cell in nbformat.read(str(notebook), as_version=4).cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            for line in cell.source.splitlines():
                match = _ASSIGNMENT.match(line)
                if match and line.count("=") > 1:
                    lines[match["name"]] = line.strip()
            break
    return lines


def inspect_parameters(notebook: Path) -> dict[str, NotebookParameter]:
    import papermill

    try:
        found = papermill.inspect_notebook(str(notebook))
    except Exception as exc:  # nbformat/JSON errors of a damaged notebook: name the file
        raise RunbookError(f"cannot read the notebook's parameters: {exc}", path=str(notebook)) from exc
    return {
        name: NotebookParameter(
            name=name,
            type_name=None if info.get("inferred_type_name") in (None, "None") else info["inferred_type_name"],
            default=str(info.get("default")),
            help=str(info.get("help") or ""),
        )
        for name, info in found.items()
    }


_BASES = {"str": "str", "int": "int", "float": "float", "bool": "bool", "list": "list", "dict": "dict",
          "tuple": "list", "none": "None", "nonetype": "None", "optional": None, "union": None}


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _alternatives(type_name: str) -> tuple[str, ...] | None:
    """``"int | None"`` -> ``("int", "None")``; None when any part is a type we cannot check."""
    text = type_name.replace(" ", "").replace("typing.", "")
    out: list[str] = []
    for part in _split_top(text, "|"):
        head, _, inner = part.partition("[")
        inner = inner[:-1] if inner.endswith("]") else inner
        if head.lower() == "optional":
            sub = _alternatives(inner)
            if sub is None:
                return None
            out += [*sub, "None"]
        elif head.lower() == "union":
            sub = [_alternatives(p) for p in _split_top(inner, ",")]
            if any(s is None for s in sub):
                return None
            out += [a for s in sub for a in s]
        elif _BASES.get(head.lower()):
            out.append(_BASES[head.lower()])
        else:
            return None
    return tuple(dict.fromkeys(out))


_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


def _matches(value, accepted: tuple[str, ...]) -> bool:
    checks = {
        "None": value is None,
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "list": isinstance(value, list),
        "dict": isinstance(value, dict),
    }
    return any(checks[a] for a in accepted)


def _from_text(text: str, accepted: tuple[str, ...] | None):
    """Convert a command-line ``key=value`` string to the declared type (raises ValueError)."""
    lowered = text.strip().lower()
    order = accepted or ("None", "bool", "int", "float", "str")
    for kind in ("None", "bool", "int", "float", "list", "dict", "str"):
        if kind not in order:
            continue
        if kind == "None" and lowered in ("none", "null"):
            return None
        if kind == "bool" and lowered in _TRUE | _FALSE:
            return lowered in _TRUE
        if kind in ("int", "float"):
            try:
                return int(text) if kind == "int" else float(text)
            except ValueError:
                continue
        if kind in ("list", "dict"):
            try:
                value = yaml.safe_load(text)
            except yaml.YAMLError:
                continue
            if _matches(value, (kind,)):
                return value
        if kind == "str":
            return text
    raise ValueError(text)


def resolve_parameters(spec: RunbookSpec, cli: dict[str, str] | None = None,
                       values: dict[str, object] | None = None) -> dict[str, dict]:
    """Return ``{step_id: parameters}`` to inject, or raise :class:`RunbookError` naming the problem.

    Precedence (later wins): notebook defaults < runbook ``parameters`` < step ``parameters`` <
    runbook ``with_evidence`` (only when ``values`` or ``cli`` set ``evidence``) <
    ``values`` (typed, e.g. ``--evidence``) < ``cli`` (``-p key=value`` strings, converted to the
    type each notebook declares). A name no notebook of the runbook declares is an error, as is
    a value of the wrong type, or an attempt to set a parameter the runner owns.
    """
    cli, values = cli or {}, values or {}
    if "evidence" in values or "evidence" in cli:
        values = {**spec.with_evidence, **values}
    declared = {step.id: inspect_parameters(step.notebook) for step in spec.steps}
    for step in spec.steps:
        missing = [p for p in RUNNER_PARAMETERS if p not in declared[step.id]]
        if missing:
            raise RunbookError(
                f"the parameters cell does not declare {missing}",
                path=str(step.notebook),
                hint="every runbook notebook takes 'interactive: bool = True' and 'findings_path: str'",
            )
    known = sorted({name for params in declared.values() for name in params} - set(RUNNER_PARAMETERS))
    for source, names in (("runbook parameters", spec.parameters), ("runbook with_evidence", spec.with_evidence),
                          ("value", values), ("-p", cli)):
        for name in names:
            if name in RUNNER_PARAMETERS:
                raise RunbookError(f"{source}: '{name}' is set by the runner, not by you", path=str(spec.path))
            if name not in known:
                for step in spec.steps:
                    line = unparsable_parameters(step.notebook).get(name)
                    if line:
                        raise RunbookError(
                            f"parameter '{name}' is declared, but papermill cannot parse its line: {line!r}",
                            path=str(step.notebook),
                            hint="papermill skips parameter lines with more than one '='; "
                            "remove the '=' from the comment",
                        )
                close = difflib.get_close_matches(name, known, n=1)
                raise RunbookError(
                    f"unknown parameter '{name}' ({source}): no notebook of runbook {spec.name} declares it",
                    path=str(spec.path),
                    hint=(f"did you mean '{close[0]}'? " if close else "") + f"known: {', '.join(known)}",
                )
    plan = {}
    for step in spec.steps:
        params = declared[step.id]
        for name in step.parameters:
            if name not in params or name in RUNNER_PARAMETERS:
                raise RunbookError(
                    f"step {step.id}: '{name}' is not a parameter of {step.notebook.name} (or is the runner's)",
                    path=str(spec.path),
                )
        chosen = {k: v for k, v in {**spec.parameters, **step.parameters, **values}.items() if k in params}
        for name, value in chosen.items():
            accepted = params[name].accepted
            if accepted and not _matches(value, accepted):
                raise RunbookError(
                    f"parameter {name}={value!r} is {type(value).__name__}, but {step.notebook.name} "
                    f"declares {params[name].type_name}",
                    path=str(spec.path),
                )
        for name, text in cli.items():
            if name not in params:
                continue
            try:
                chosen[name] = _from_text(text, params[name].accepted)
            except ValueError:
                raise RunbookError(
                    f"-p {name}={text}: not a valid {params[name].type_name} (declared in {step.notebook.name}: "
                    f"{params[name].help or 'no help'})",
                ) from None
        plan[step.id] = chosen
    return plan


def parse_assignments(items: list[str]) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; a missing ``=`` is an error."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise RunbookError(f"-p {item!r}: expected key=value")
        out[name.strip()] = value
    return out
