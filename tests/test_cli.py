"""The command table of gpulib/cli.py matches what each module registers, and stays lazy."""

import argparse
import importlib
import subprocess
import sys

from gpulib.cli import COMMANDS, build_parser, main


def test_every_command_is_registered_by_its_module_with_the_tables_summary():
    for command, (module, summary) in COMMANDS.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        importlib.import_module(module).register(sub)
        assert command in sub.choices, f"{module} does not register {command!r}"
        registered = next(a.help for a in sub._choices_actions if a.dest == command)
        assert registered == summary, f"gpulib/cli.py's summary of {command!r} differs from {module}'s help"


def test_top_level_help_imports_no_command_module():
    code = ("import sys; from gpulib.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('gpulib.') and m not in ('gpulib.cli', "
            "'gpulib.errors', 'gpulib.exit_codes', 'gpulib.terminal')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]"
    assert "storage-probe" in done.stdout


def test_help_lists_every_command():
    choices = next(a for a in build_parser([])._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(choices) == set(COMMANDS)


def test_checkpoint_command_imports_no_heavy_stack():
    code = (
        "import sys; from gpulib.cli import build_parser; build_parser(['ckpt', '--help']);"
        "heavy = {'pandas', 'plotly', 'papermill', 'torch', 'ipywidgets'} & set(sys.modules); print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "diagnose" in capsys.readouterr().out
