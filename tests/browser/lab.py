"""A throw-away JupyterLab server and the notebook actions an engineer performs in it.

The server is this venv's ``jupyter lab`` on 127.0.0.1 (random free port, random token), with
every Jupyter/IPython directory in a temporary folder so nothing leaks into the user's home and
no user setting changes what the test sees. The ``python3`` kernelspec is installed into that
folder from this interpreter, so the kernel runs the gpulib under test, not whatever
``python3`` a machine has registered. Settings that would make the page differ from run to
run or talk to the internet (news and update checks, virtualised notebook rendering that
leaves off-screen cells out of the DOM) are switched off in the temporary user settings.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ipykernel.kernelspec import write_kernel_spec

from tests.prometheus_server import free_port

#: Settings written to the temporary JupyterLab user-settings folder.
LAB_SETTINGS = {
    # No news feed / update check: no request to jupyter.org, no toast over the notebook.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
    # Every cell stays in the DOM, so prompts and outputs of long notebooks can be checked.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
START_TIMEOUT_S = 120


@dataclass
class JupyterLab:
    """``jupyter lab`` serving ``root`` until :meth:`stop`; ``url(path)`` gives tokened URLs."""

    root: Path
    state: Path
    port: int = 0
    token: str = ""
    proc: subprocess.Popen | None = None

    def start(self) -> JupyterLab:
        self.port, self.token = free_port(), secrets.token_hex(16)
        env = {**os.environ, **self._dirs()}
        env.pop("PLOTLY_RENDERER", None)  # the notebooks choose their renderer (gpulib.notebook.setup)
        log = (self.state / "server.log").open("wb")
        argv = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--expose-app-in-browser",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                f"--LabApp.workspaces_dir={self.state / 'workspaces'}",
                "--LabApp.extension_manager=readonly"]  # no PyPI queries from the extension manager
        if os.geteuid() == 0:
            argv.append("--allow-root")  # CI containers run as root
        self.proc = subprocess.Popen(argv, env=env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.api("status")
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
                continue
            argv = self.api("kernelspecs")["kernelspecs"]["python3"]["spec"]["argv"]
            if argv[0] != sys.executable:
                self.stop()
                raise RuntimeError(f"the python3 kernelspec runs {argv[0]}, not this venv's {sys.executable}")
            return self
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer /api/status within {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def _dirs(self) -> dict[str, str]:
        dirs = {"JUPYTER_CONFIG_DIR": self.state / "config", "JUPYTER_DATA_DIR": self.state / "data",
                "JUPYTER_RUNTIME_DIR": self.state / "runtime", "IPYTHONDIR": self.state / "ipython",
                "JUPYTERLAB_SETTINGS_DIR": self.state / "settings",
                "JUPYTERLAB_WORKSPACES_DIR": self.state / "workspaces"}
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        # kernel.json naming this interpreter by its absolute path, first on JUPYTER_PATH (in a venv
        # jupyter_core searches the venv's own kernelspecs before JUPYTER_DATA_DIR).
        write_kernel_spec(path=str(self.state / "path" / "kernels" / "python3"))
        for name, values in LAB_SETTINGS.items():
            target = dirs["JUPYTERLAB_SETTINGS_DIR"] / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(values))
        return {**{k: str(v) for k, v in dirs.items()}, "JUPYTER_PATH": str(self.state / "path")}

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(self.url(f"api/{path}"), method=method)
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, chars: int = 4000) -> str:
        path = self.state / "server.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else "(no server log)"

    def shutdown_kernels(self) -> None:
        """End every kernel the server started (each opened notebook holds one, ~150 MB)."""
        try:
            for kernel in self.api("kernels"):
                self.api(f"kernels/{kernel['id']}", method="DELETE")
        except (OSError, urllib.error.URLError, ValueError):
            pass  # best effort: kernels also exit when the server does

    def stop(self) -> None:
        """Shut the kernels down through the API, then end the server's process group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.shutdown_kernels()
        for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue


#: JavaScript reading the current notebook through ``window.jupyterapp`` (--expose-app-in-browser).
_CURRENT = "window.jupyterapp && window.jupyterapp.shell.currentWidget"
_KERNEL_IDLE = f"""() => {{
  const w = {_CURRENT}; const s = w && w.sessionContext;
  const k = s && s.session && s.session.kernel;
  return !!(k && k.status === 'idle' && k.connectionStatus === 'connected');
}}"""
_PROMPTS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]
  .map(e => e.textContent.trim())"""
_CELLS = f"""() => {{
  const w = {_CURRENT}; const cells = w.content.model.cells; const out = [];
  for (let i = 0; i < cells.length; i++) {{
    const c = cells.get(i);
    out.push({{type: c.type, source: c.sharedModel.getSource(),
               outputs: c.type === 'code' ? c.outputs.toJSON() : []}});
  }}
  return out;
}}"""


class NotebookPage:
    """One notebook opened in JupyterLab, driven the way a person does it (menus, widgets)."""

    def __init__(self, page, lab: JupyterLab, path: str):
        self.page, self.lab, self.path = page, lab, path

    def open(self, timeout_s: float = 90) -> NotebookPage:
        """Open in a fresh workspace and wait until its kernel is connected and idle.

        Execute requests sent while the kernel is still starting are silently dropped
        (jupyterlab#15420), so nothing is run before the kernel reports idle.
        """
        workspace = secrets.token_hex(4)
        self.page.goto(self.lab.url(f"lab/workspaces/t{workspace}/tree/{self.path}?reset"),
                       timeout=timeout_s * 1000)
        self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").wait_for(timeout=timeout_s * 1000)
        self.page.wait_for_function(_KERNEL_IDLE, timeout=timeout_s * 1000, polling=250)
        return self

    def run_all(self, timeout_s: float = 150) -> list[str]:
        """Run > Run All Cells from the menu bar; wait for idle with no ``[*]``; returns the prompts."""
        self.page.locator("#jp-MainMenu").get_by_role("menuitem", name="Run", exact=True).click()
        self.page.locator(".lm-Menu").get_by_role("menuitem", name="Run All Cells", exact=True).click()
        self.page.wait_for_function(
            f"""() => {{
              const prompts = ({_PROMPTS})();
              return ({_KERNEL_IDLE})() && prompts.length > 0 && !prompts.some(p => p.includes('*'))
                     && prompts.some(p => /\\d/.test(p));
            }}""", timeout=timeout_s * 1000, polling=500)
        return self.page.evaluate(_PROMPTS)

    def cells(self) -> list[dict]:
        """Every cell's type, source and outputs (nbformat JSON) as the page's model holds them."""
        return self.page.evaluate(_CELLS)

    def errors(self) -> list[str]:
        """Error outputs (exceptions, tracebacks on stderr) in the model and on screen."""
        found = []
        for n, cell in enumerate(self.cells()):
            for out in cell["outputs"]:
                if out.get("output_type") == "error":
                    found.append(f"cell {n}: {out.get('ename')}: {out.get('evalue')}")
                elif out.get("name") == "stderr" and ("Traceback" in _text(out) or "Error" in _text(out)):
                    found.append(f"cell {n} stderr: {_text(out)[:500]}")
        shown = self.page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) '
                                  '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
        for text in shown.all_inner_texts():
            if "Traceback" in text or "Error" in text:  # also inside widget Output areas (not in the model)
                found.append(f"on screen: ...{text[-700:]}")
        # A widget whose model or view failed shows one of these lines instead of the controls.
        for marker in ("Error displaying widget", "Failed to load model class"):
            for text in self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output",
                                          has_text=marker).all_inner_texts():
                found.append(f"widget not rendered: {text[:300]}")
        return found


def _text(output: dict) -> str:
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else str(text)
