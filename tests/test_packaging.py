"""environment.yml stays in step with pyproject.toml; the README keeps its two commands."""

import re

import tomllib
import yaml

from tests.conftest import REPO


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    deps = env["dependencies"]
    conda = {_name(d.split("=")[0]) for d in deps if isinstance(d, str)}
    pip_sections = [d["pip"] for d in deps if isinstance(d, dict) and "pip" in d]
    assert "pip" in conda, "environment.yml must list pip itself"
    make_extras = re.search(r'-e "\.(\[[\w,]+\])"', (REPO / "Makefile").read_text())[1]
    assert pip_sections == [[f"-e .{make_extras}"]], \
        "pip section must install the package from pyproject with the extras `make test` installs"
    runtime = {_name(r) for r in project["dependencies"]}
    conda_pkgs = conda - {"python", "pip"}
    assert conda_pkgs == runtime, (
        f"only in environment.yml: {sorted(conda_pkgs - runtime)}; only in pyproject: {sorted(runtime - conda_pkgs)}"
    )


def test_nvml_binding_is_the_official_one():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in project["dependencies"]}
    assert "nvidia-ml-py" in names and "pynvml" not in names


def test_readme_quick_start_is_two_commands():
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci
