"""``gpulib lab`` and ``gpulib drill --lab``: JupyterLab opens, also as root, and exits as the help says.

The real ``jupyter lab`` is started (as the test's user: root in CI containers, where plain
``jupyter lab`` refuses with "Use --allow-root"), found by the URL it prints, asked for its
status, and stopped with Ctrl-C twice, as an engineer stops it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from gpulib.cli import main
from gpulib.notebook import lab
from tests.conftest import REPO

URL = re.compile(r"(http://127\.0\.0\.1:\d+/)lab\?token=([0-9a-f]+)")


def test_allow_root_only_as_root():
    nb = Path("/tmp/x.ipynb")
    assert lab.lab_argv(nb, euid=0)[-1] == "--allow-root"
    assert "--allow-root" not in lab.lab_argv(nb, euid=1000)
    assert lab.shown(lab.lab_argv(nb, euid=0)) == "jupyter lab /tmp/x.ipynb --allow-root"


def test_a_missing_notebook_is_exit_2(tmp_path, capsys):
    assert main(["lab", str(tmp_path / "nope.ipynb")]) == 2
    assert "no such notebook or folder" in capsys.readouterr().err


def _jupyter_env(tmp_path: Path) -> dict[str, str]:
    dirs = {name: tmp_path / name.lower() for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                                                         "JUPYTER_RUNTIME_DIR", "IPYTHONDIR")}
    for path in dirs.values():
        path.mkdir()
    # no browser to open (BROWSER=true runs /bin/true); loopback only
    (dirs["JUPYTER_CONFIG_DIR"] / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"ip": "127.0.0.1", "open_browser": False}}))
    return {**os.environ, **{k: str(v) for k, v in dirs.items()}, "BROWSER": "true", "PYTHONPATH": str(REPO)}


def _serve_and_stop(argv: list[str], tmp_path: Path, notebook_name: str) -> tuple[int, str]:
    """Run ``argv`` (a gpulib command that starts JupyterLab) until its server answers, check the
    notebook is served, then Ctrl-C twice; returns (exit status, output)."""
    log = tmp_path / "lab.log"
    # stdin a terminal, as an engineer's: only then does JupyterLab take the first Ctrl-C as a question
    # (shut down?) and the second as the answer; without one the first stops it, and the second could
    # land in its clean-up or in gpulib's own exit (a flaky -2)
    terminal, tty = os.openpty()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=_jupyter_env(tmp_path), stdout=out, stderr=subprocess.STDOUT,
                                stdin=tty, start_new_session=True)
    os.close(tty)
    try:
        deadline, found = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None and not found:
            found = URL.search(log.read_text(errors="replace"))
            time.sleep(0.5)
        assert found, f"jupyter lab printed no URL (exit {proc.poll()}):\n{log.read_text()[-3000:]}"
        base, token = found.groups()
        with urllib.request.urlopen(f"{base}api/contents/{notebook_name}?content=0&token={token}", timeout=10) as r:
            assert json.load(r)["type"] == "notebook"
        for _ in range(2):  # the terminal's Ctrl-C reaches the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(1)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(terminal)
    return code, log.read_text(errors="replace")


@pytest.mark.timeout(240)
def test_gpulib_lab_serves_the_notebook_and_ends_with_exit_0(tmp_path):
    code, output = _serve_and_stop([sys.executable, "-m", "gpulib", "lab", str(REPO / "notebooks" / "00_triage.ipynb")],
                                   tmp_path, "00_triage.ipynb")
    assert "Use --allow-root" not in output
    assert code == 0, output[-3000:]
    if os.geteuid() == 0:
        assert "--allow-root" in output.splitlines()[0]


@pytest.mark.timeout(240)
def test_drill_lab_opens_the_drill_notebook(tmp_path):
    out = tmp_path / "drill"
    code, output = _serve_and_stop([sys.executable, "-m", "gpulib", "drill", str(REPO / "examples" / "incident-cuda-oom"),
                                    "--out", str(out), "--lab"], tmp_path, "00_triage-drill.ipynb")
    assert code == 0, output[-3000:]
    assert "Use --allow-root" not in output
