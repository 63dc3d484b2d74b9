"""Execute runbook notebooks in tests: papermill on one warm kernel, namespace reset in between.

Starting a kernel and importing pandas/plotly/gpulib costs seconds on a busy machine; the
matrix of notebooks x incidents reuses one kernel (papermill passes ``km`` through to nbclient,
which then neither starts nor shuts it down) and clears the user namespace before each run, so
no notebook can lean on another's variables. Fresh-kernel execution is covered separately by
the nbval smoke test and the interactive runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import papermill as pm
from jupyter_client.manager import KernelManager

from tests.conftest import REPO

NOTEBOOKS = REPO / "notebooks"


class WarmKernel:
    def __init__(self, cwd: Path):
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(cwd))
        client = self.km.client()
        client.start_channels()
        client.wait_for_ready(timeout=120)
        client.stop_channels()

    def reset(self) -> None:
        client = self.km.client()
        client.start_channels()
        try:
            client.execute_interactive("%reset -f", timeout=60)
        finally:
            client.stop_channels()

    def run(self, name: str, out_dir: Path, **parameters) -> tuple[nbformat.NotebookNode, list[dict] | None]:
        """Run notebook ``name`` headless; returns the executed notebook and its findings (None if
        none were written). Raises papermill's execution error like ``gpulib run`` would see it."""
        self.reset()
        out_dir.mkdir(parents=True, exist_ok=True)
        findings_path = out_dir / f"findings-{name[:2]}.json"
        params = {"interactive": False, "findings_path": str(findings_path), **parameters}
        output = out_dir / name
        try:
            pm.execute_notebook(str(NOTEBOOKS / name), str(output), parameters=params, kernel_name="python3",
                                km=self.km, progress_bar=False, execution_timeout=240, start_timeout=120,
                                # one write at the end: per-cell saves of ~5 MB (plotly.js) triple the time
                                request_save_on_cell_execute=False)
        finally:
            executed = nbformat.read(output, as_version=4) if output.exists() else None
        findings = json.loads(findings_path.read_text()) if findings_path.exists() else None
        return executed, findings

    def shutdown(self) -> None:
        self.km.shutdown_kernel(now=True)


def outputs_text(nb: nbformat.NotebookNode) -> str:
    """All text a reader of the executed notebook sees (stream, text/plain, error lines)."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output.get("text", ""))
            elif output.get("output_type") == "error":
                parts.append("\n".join([output.get("ename", ""), output.get("evalue", ""), *output.get("traceback", [])]))
            else:
                data = output.get("data", {})
                parts.append(data.get("text/plain", "") + data.get("text/markdown", ""))
    return "\n".join(parts)
