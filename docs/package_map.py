"""Print the package map of docs/ARCHITECTURE.md: modules and lines per package, the imports
between packages, and the files each recipe of docs/EXTENDING.md touches.

usage: python docs/package_map.py [PACKAGE_DIR]   (default: the gpulib/ beside docs/)

Why a script and not a hand-kept table: the numbers drift with every change, and a map that is
wrong sends a newcomer to the wrong package. Re-run it and paste its output when packages move.
It reads the source with :mod:`ast` only (no import of gpulib, no third-party package), so it runs
on any checkout, also an old one (``git archive <commit> gpulib | tar -x -C DIR``) for a
before/after comparison. Every ``import`` counts, also one inside a function (a lazy import is
still a dependency).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

TOP = "gpulib (top-level modules)"

#: What each package holds, in words (the one column the source cannot say).
HOLDS = {
    TOP: "cli, findings, vocabulary, identity, exit codes, resources",
    "gpulib.parsers": "one module per format, the registry, line scanning",
    "gpulib.diagnose": "the pipeline, verdict, joins, node digests and facts, drift, `Evidence` and its cache",
    "gpulib.diagnose.rules": "the rules, one module per topic; `RULES` (phases, order) in `__init__.py`",
    "gpulib.notebook": "the notebook face: tables, step views, figures, widgets, drill",
    "gpulib.checkpoints": "checkpoint formats, `find_latest`, resume commands, picker rows",
    "gpulib.nccl": "the fabric tester and the nccl-tests verdicts",
    "gpulib.runbooks": "papermill runs, the archive, the offline report",
    "gpulib.collect": "`gpulib collect`: commands and NVML into a bundle",
    "gpulib.watch": "`gpulib watch`: live log follow and alerts",
    "gpulib.fleet": "the GPU ledger across incidents, config diff",
    "gpulib.storage": "`gpulib storage-probe`",
    "gpulib.preflight": "job-environment checks (as findings) and the go / no-go gate",
    "gpulib.slurm": "Epilog capture, HealthCheckProgram",
    "gpulib.catalog": "the Xid and signature catalogues (data) and their build",
    "gpulib.evidence": "bundle format, kinds, gather and its worker fan-out, clock offsets, digests, record summaries, thresholds",
}

#: The files each recipe of docs/EXTENDING.md touches (``<...>``: the name you choose); the
#: optional ones only when the recipe's condition holds.
RECIPES = {
    "a parser": ["gpulib/parsers/<tool>.py", "gpulib/parsers/registry.py", "gpulib/evidence/kinds.py",
                 "tests/parsers/test_<tool>.py"],
    "an Xid's meaning": ["gpulib/catalog/xid_overrides.tsv", "gpulib/catalog/xid.tsv (regenerated)"],
    "a signature": ["gpulib/catalog/signatures.tsv", "tests/diagnose/test_<topic>.py"],
    "a kernel event": ["gpulib/diagnose/rules/kernel.py", "tests/diagnose/test_<topic>.py"],
    "a rule": ["gpulib/diagnose/rules/<topic>.py", "gpulib/diagnose/rules/__init__.py (a new module only)",
               "tests/diagnose/test_rules_<topic>.py"],
    "a notebook step": ["notebooks/NN_<name>.ipynb", "runbooks/<runbook>.yaml",
                        "gpulib/notebook/steps.py (NEXT_NOTEBOOK, optional)",
                        "tests/notebooks/test_one_finding.py (optional)"],
}


def package_of(module: str, packages: set[str]) -> str:
    """The deepest package that holds ``module`` (``gpulib.diagnose.rules.kernel`` ->
    ``gpulib.diagnose.rules``); a module right under ``gpulib`` is in :data:`TOP`."""
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        if ".".join(parts[:n]) in packages and ".".join(parts[:n]) != "gpulib":
            return ".".join(parts[:n])
    return TOP


def read(root: Path) -> tuple[dict[str, int], set[str], dict[str, set[str]]]:
    """(lines per module, the package names, the gpulib modules each module imports)."""
    lines, imports = {}, defaultdict(set)
    packages = {".".join(p.relative_to(root.parent).parts[:-1]) for p in root.rglob("__init__.py")}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        text = path.read_text(encoding="utf-8")
        lines[module] = text.count("\n")
        here = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                imports[module] |= {a.name for a in node.names if a.name.startswith("gpulib")}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[:len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.startswith("gpulib"):
                    imports[module] |= {f"{base}.{a.name}" for a in node.names}
    modules = set(lines)
    resolved = {m: {t if t in modules else t.rpartition(".")[0] for t in targets} & modules
                for m, targets in imports.items()}
    return lines, packages, resolved


def main(root: Path) -> None:
    lines, packages, imports = read(root)
    per = defaultdict(list)
    for module in lines:
        per[package_of(module, packages)].append(module)
    print("| package | modules | lines | holds |\n|---|---:|---:|---|")
    for pkg in sorted(per, key=lambda p: -sum(lines[m] for m in per[p])):
        print(f"| `{pkg}` | {len(per[pkg])} | {sum(lines[m] for m in per[pkg]):,} | {HOLDS.get(pkg, '')} |")
    print(f"| **all** | {len(lines)} | {sum(lines.values()):,} | |")

    def top(module: str) -> str:  # a nested package counts as its parent here: gpulib.diagnose.rules -> diagnose
        pkg = package_of(module, packages)
        return pkg if pkg == TOP else ".".join(pkg.split(".")[:2])

    edges: dict[str, Counter] = defaultdict(Counter)
    for module, targets in imports.items():
        for target in targets:
            if top(target) != top(module):
                edges[top(module)][top(target)] += 1
    print("\n| package | imports from (module-to-module imports) |\n|---|---|")
    for pkg in sorted({top(m) for m in lines}):
        used = ", ".join(f"{t.removeprefix('gpulib.')} {n}" for t, n in sorted(edges[pkg].items(), key=lambda kv: -kv[1]))
        print(f"| `{pkg}` | {used or '-'} |")

    print("\n| recipe (docs/EXTENDING.md) | files | touches |\n|---|---:|---|")
    repo = root.parent
    for recipe, files in RECIPES.items():
        for f in files:  # a fixed path that does not exist is a recipe that went stale
            path = f.split(" ")[0]
            if "<" not in path and "NN_" not in path and not (repo / path).exists():
                raise SystemExit(f"recipe {recipe!r}: {path} does not exist: update RECIPES and docs/EXTENDING.md")
        named = (f"`{f.split(' ', 1)[0]}`" + (f" {f.split(' ', 1)[1]}" if " " in f else "") for f in files)
        print(f"| {recipe} | {len(files)} | {', '.join(named)} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "gpulib")
