"""One verdict -> exit-code map (:mod:`gpulib.exit_codes`), and no command that writes its own.

A scheduler acts on the number alone; a command that wrote ``"hard": 3`` itself could drift from
the table the next time the table changes, and a wrapper would drain (or relaunch) on the wrong one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpulib import exit_codes

GPULIB = Path(exit_codes.__file__).resolve().parent


@pytest.mark.parametrize(("interruption", "code"), [("hard", 3), ("soft", 1), ("none", 0), ("unknown", 4),
                                                    (None, 4), ("gibberish", 4)])
def test_a_diagnosis_interruption_maps_to_the_table(interruption, code):
    assert exit_codes.for_interruption(interruption) == code


@pytest.mark.parametrize(("severities", "code"), [([], 0), (["info"], 0), (["info", "warning"], 1),
                                                  (["warning", "error"], 3), (["critical"], 3), ([None, "info"], 0)])
def test_the_worst_severity_decides(severities, code):
    assert exit_codes.for_severities(severities) == code


def _sources():
    return [p for p in GPULIB.rglob("*.py") if p.name != "exit_codes.py"]


def test_no_module_maps_a_verdict_word_to_a_bare_exit_code():
    """An interruption mapped to a number anywhere, or a PASS/WARN/FAIL verdict on an exit map's
    line (nccl-tests' verdicts are also ranked among themselves: that order is no exit code)."""
    interruption = re.compile(r"""["'](hard|soft|none|unknown)["']\s*:\s*\d\b""")
    verdict = re.compile(r"""["'](PASS|WARN|FAIL)["']\s*:\s*\d\b""")
    found = [f"{p.relative_to(GPULIB)}: {line.strip()}" for p in _sources() for line in p.read_text().splitlines()
             if interruption.search(line) or ("EXIT" in line.upper() and verdict.search(line))]
    assert not found, "use gpulib.exit_codes (FOR_INTERRUPTION / constants): " + "; ".join(found)


def test_no_command_returns_a_bare_exit_code():
    bare = re.compile(r"^\s+return (\d)(?: if .* else (\d))?\s*$", re.M)
    commands = [p for p in _sources() if p.name in ("cli.py", "smoke.py", "build.py")]
    assert len(commands) >= 10
    found = [f"{p.relative_to(GPULIB)}: {m.group(0).strip()}" for p in commands for m in bare.finditer(p.read_text())]
    assert not found, "return an exit_codes constant: " + "; ".join(found)
