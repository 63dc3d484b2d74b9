"""environment.yml stays in step with pyproject.toml; the README keeps its two commands."""

import re

import tomllib
import yaml

from tests.conftest import REPO


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _minimum(requirement: str) -> str | None:
    found = re.search(r">=\s*([\w.]+)", requirement)
    return found[1] if found else None


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    deps = env["dependencies"]
    conda = {_name(d.split("=")[0]): _minimum(d) for d in deps if isinstance(d, str)}
    pip_sections = [d["pip"] for d in deps if isinstance(d, dict) and "pip" in d]
    assert "pip" in conda, "environment.yml must list pip itself"
    make_extras = re.search(r'-e "\.(\[[\w,]+\])"', (REPO / "Makefile").read_text())[1]
    [pip] = pip_sections
    assert pip[-1] == f"-e .{make_extras}", \
        "pip section must install the package from pyproject with the extras `make test` installs"
    runtime = {_name(r): _minimum(r) for r in project["dependencies"]}
    conda_pkgs = {k: v for k, v in conda.items() if k not in ("python", "pip")}
    assert conda_pkgs.keys() == runtime.keys(), (
        f"only in environment.yml: {sorted(conda_pkgs.keys() - runtime.keys())}; "
        f"only in pyproject: {sorted(runtime.keys() - conda_pkgs.keys())}"
    )
    assert conda_pkgs == runtime, "environment.yml's minimum versions must be pyproject.toml's"


def test_environment_yml_installs_the_cpu_torch():
    """A fresh machine without a GPU: torch from PyTorch's CPU index (a bare `torch` from PyPI pulls
    ~3 GB of CUDA wheels), at pyproject's minimum, before the extras that need it."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    [pip] = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in pip
    [torch] = [line for line in pip if _name(line) == "torch"]
    assert _minimum(torch) == _minimum(project["optional-dependencies"]["torch"][0])
    assert pip.index(torch) < len(pip) - 1


def test_nvml_binding_is_the_official_one():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in project["dependencies"]}
    assert "nvidia-ml-py" in names and "pynvml" not in names


def test_readme_quick_start_is_two_commands():
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci


def _makefile_recipe(target_prefix: str) -> str:
    """The recipe lines of the first Makefile rule whose target starts with ``target_prefix``."""
    text = (REPO / "Makefile").read_text()
    block = re.search(rf"^{re.escape(target_prefix)}[^\n]*:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M)
    assert block, f"no Makefile rule {target_prefix}"
    return block[1]


def _extras(recipe: str) -> set[str]:
    found = set()
    for match in re.finditer(r'pip install [^\n]*-e "?\.(?:\[([\w,]+)\])?', recipe):
        found |= set(filter(None, (match[1] or "").split(",")))
    return found


def test_make_demo_installs_no_torch_and_no_test_tools():
    """`make demo` installs the package with the extras it imports: none (torch pulls 1.6-4.6 GB)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    recipe = _makefile_recipe("$(DEMO_STAMP)")
    assert "TORCH_REQ" not in recipe and "torch" not in recipe.replace("(no torch)", "")
    extras = _extras(recipe)
    pulled = {_name(r) for r in project["dependencies"]}
    for extra in extras:
        pulled |= {_name(r) for r in project["optional-dependencies"][extra]}
    assert not pulled & {"torch", "pytest", "playwright", "deepspeed", "transformers", "lightning", "hypothesis"}, pulled
    demo = re.search(r"^demo: ([^\n]*)$", (REPO / "Makefile").read_text(), re.M)[1]
    assert demo.split() == ["$(DEMO_STAMP)"], "the demo must not depend on the test install"


def test_make_test_adds_pinned_torch_and_the_test_extras():
    recipe = _makefile_recipe("$(TEST_STAMP)")
    assert 'pip install --progress-bar on "$(TORCH_REQ)"' in recipe
    assert _extras(recipe) == {"test", "frameworks"}
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^lint: \$\(TEST_STAMP\)$", makefile, re.M) and re.search(r"^test: lint$", makefile, re.M)
    assert 'TORCH_REQ="torch==2.13.0"' in (REPO / ".ci" / "run").read_text()  # never a bare torch in CI


def test_long_install_steps_show_progress():
    for target in ("$(DEMO_STAMP)", "$(TEST_STAMP)"):
        for line in _makefile_recipe(target).splitlines():
            if "pip install" in line and "-e " in line or "TORCH_REQ" in line and "pip install" in line:
                assert "--quiet" not in line and " -q " not in line, line


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it():
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "Apache-2.0"  # PEP 639; the table form is deprecated in setuptools
    need = [r for r in doc["build-system"]["requires"] if _name(r) == "setuptools"]
    assert need and tuple(int(x) for x in re.search(r">=\s*([\d.]+)", need[0])[1].split(".")) >= (77,)
    assert not [c for c in doc["project"].get("classifiers", []) if c.startswith("License ::")]


def test_readme_first_screen_says_what_to_open_next():
    first_screen = "\n".join((REPO / "README.md").read_text().splitlines()[:40])
    # `gpulib lab`, not `jupyter lab`: the latter refuses to start as root (GPU nodes, containers)
    assert "make demo" in first_screen and ".venv/bin/gpulib lab" in first_screen
    assert "jupyter lab notebooks/00_triage.ipynb" not in first_screen


def test_the_demo_install_resolves_without_torch(tmp_path):
    """The real resolution of `make demo`'s install (pip --dry-run: nothing is installed)."""
    import json
    import subprocess
    import sys

    report = tmp_path / "demo-install.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", str(report), "-e", str(REPO)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert "papermill" in names and "plotly" in names
    assert not {n for n in names if n == "torch" or n.startswith("nvidia-") and n != "nvidia-ml-py"}, sorted(names)
