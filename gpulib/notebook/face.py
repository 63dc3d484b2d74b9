"""Notebook side of gpulib: dual-mode display, pickers, findings and guarded remediation.

This is the only module that imports ``ipywidgets``. Every runbook notebook follows one pattern
(see ``notebooks/``)::

    # [parameters]
    evidence: str = "examples/..."   # what to analyse
    interactive: bool = True         # papermill passes False
    findings_path: str = "findings-01.json"

    from gpulib.notebook import face as nbk
    nbk.setup()
    ev = nbk.open_evidence(evidence)                 # clear message (no traceback) when unusable
    panel = nbk.FigurePanel(plots.xid_events, ev.kernel_events(), pickers=("host", "gpu"))
    nbk.show(panel, interactive)                     # widgets live, or a plain figure headless
    nbk.record(findings, findings_path, step="01_kernel_xid")

Why two modes: content displayed inside widgets lives in the widget state, which archived
notebooks, HTML reports and nbval never show. Headless runs therefore display plain figures, and
the widgets take their *initial values* from the parameters, so a headless run shows exactly
what an engineer sees before touching a control.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from IPython.display import Markdown, display

from gpulib.collect import collect
from gpulib.errors import GpulibError
from gpulib.findings import Finding
from gpulib.notebook import display as display_mod
from gpulib.notebook import steps, tables
from gpulib.notebook.checkpoint_picker import CheckpointPicker
from gpulib.notebook.display import PLOTLY_RENDERER, empty_figure_line, figure_bundle, figures_as_json, say, table
from gpulib.notebook.drill import Drill, show_in
from gpulib.notebook.drill_grading import drill_choices
from gpulib.notebook.remediation import Remediation, remediation_commands
from gpulib.notebook.steps import FINDING_MIME, normalize_findings, summarize_findings
from gpulib.notebook.tables import EvidenceTables
from gpulib.notebook.widgets import FigurePanel
from gpulib.terminal import safe
from gpulib.vocabulary import CATEGORIES

#: What a runbook notebook calls (``from gpulib.notebook import face as nbk``).
__all__ = [
    "CheckpointPicker", "EvidenceTables", "FigurePanel", "NotebookStop", "Remediation", "diagnosis_text", "fabric_test",
    "figure_bundle", "freeze_scene", "next_step", "open_evidence", "record", "remediation_commands",
    "say", "setup", "show", "show_diagnosis", "table",
]


def setup() -> None:
    """Prepare a runbook notebook: the plotly renderer that survives HTML export, readable tables."""
    if not figures_as_json():
        pio.renderers.default = PLOTLY_RENDERER
    pd.set_option("display.max_rows", 200)
    pd.set_option("display.max_colwidth", 160)
    pd.set_option("display.width", 200)


# --------------------------------------------------------------------------------------------
# Errors that read well in a notebook


class NotebookStop(GpulibError):
    """Stops a notebook run with a short, clear message instead of a library traceback.

    IPython renders an exception that has ``_render_traceback_`` with those lines only, so the
    engineer sees *what* is wrong and *what to do*, and the kernel stays alive. papermill still
    records the run as failed (a runbook with unusable evidence must not look healthy).
    """

    def _render_traceback_(self) -> list[str]:
        lines = [f"gpulib: {self.message}"]
        if self.path:
            lines.append(f"  path: {self.path}")
        if self.hint:
            lines.append(f"  what to do: {self.hint}")
        return lines


def open_evidence(evidence: str, tz: str | None = None, *, mark_culprit: bool = True) -> EvidenceTables:
    """Open the evidence folder named by the ``evidence`` parameter, or stop with a clear message
    (``tz``: :func:`gpulib.notebook.tables.open_evidence`).

    The diagnosis's culprit is then highlighted in every table of the notebook; a drill passes
    ``mark_culprit=False`` (the highlight would be the answer)."""
    try:
        ev = tables.open_evidence(evidence, tz)
    except GpulibError as exc:
        raise NotebookStop(exc.message, path=exc.path, hint=exc.hint) from None
    display_mod.mark_culprit(ev.diagnosis.get("root_cause") if mark_culprit else None)
    display(Markdown(ev.describe_markdown()))
    return ev


def freeze_scene(collect_to: str = "") -> str:
    """Capture this host into a new evidence bundle at ``collect_to`` (empty: a new temporary
    folder); returns its path.

    Collection only reads (nvidia-smi, NVML, kernel log, versions); every command has a timeout,
    and a missing tool is recorded as unavailable, so this is safe on a broken node.
    """
    target = Path(collect_to) if collect_to else Path(tempfile.mkdtemp(prefix="gpulib-scene-")) / socket.gethostname()
    try:
        bundle = collect(target)
    except GpulibError as exc:
        raise NotebookStop(exc.message, path=exc.path, hint=exc.hint) from None
    display(Markdown(f"Captured this host into `{bundle}`"))
    return str(bundle)


def show_diagnosis(diagnosis: dict, *, interactive: bool, drill: bool = False,
                   evidence: EvidenceTables | None = None) -> Drill | bool:
    """The verdict, root cause and its quoted lines; in drill mode a challenge instead.

    Returns what :func:`record` and :func:`next_step` take as ``drill``: ``False`` (no drill),
    ``True`` (a headless drill: nobody can answer, the answer is only hidden from the screen) or
    the live :class:`Drill`, whose reveal writes the findings and shows the next step. With
    ``evidence`` the pickers offer every host, GPU and rank of its rank map and GPU snapshots too.
    """
    if not drill:
        display({"text/plain": safe(diagnosis_text(diagnosis))}, raw=True)
        return False
    if not interactive:
        display(Markdown("*Drill mode: the diagnosis is hidden (run interactively to answer the drill).*"))
        return True
    choices = drill_choices(diagnosis, evidence.ranks() if evidence is not None else None,
                            evidence.gpu_states() if evidence is not None else None,
                            evidence.gpu_palette().short if evidence is not None else None)
    challenge = Drill(diagnosis, CATEGORIES, choices, folder=Path.cwd())  # the drill notebook's folder
    display(challenge.widget())
    return challenge


def next_step(diagnosis: dict, *, drill: Drill | bool = False) -> None:
    """Name the notebook to open next. In a drill it would give the answer away: a live drill
    shows it at the reveal (after the commit), a headless one withholds it."""
    if isinstance(drill, Drill):
        show_in(drill.next_out, _markdown(WITHHELD), replace=True)
        drill.on_reveal(lambda: show_in(drill.next_out, _markdown(steps.next_step(diagnosis)), replace=True))
        display(drill.next_out)
        return
    say(WITHHELD if drill else steps.next_step(diagnosis))


#: What a drill shows in place of the next step until the trainee commits.
WITHHELD = "*Drill mode: commit your answer above first; the next step follows from it.*"


def _markdown(text: str) -> dict:
    return {"text/markdown": safe(text), "text/plain": safe(text)}


def diagnosis_text(diagnosis: dict) -> str:
    """Verdict, root cause and its quoted lines of a ``gpulib.diagnosis/1`` dict as plain text."""
    verdict = diagnosis.get("verdict") or {}
    root = diagnosis.get("root_cause") or {}
    lines = [f"Verdict: {verdict.get('interruption', 'unknown').upper()} interruption, category "
             f"{verdict.get('category', 'unknown')}", f"  {verdict.get('summary', '')}"]
    if root.get("host") or root.get("rank") is not None:
        lines.append("Root cause: " + Finding.from_dict({"id": "root", **root}).where())
    quotes = root.get("evidence") or []
    if quotes:
        lines.append("Quoted lines (file:line: text):")
        lines += [f"  {e.get('file')}:{e.get('line')}: {e.get('text')}" for e in quotes[:8]]
    cascade = [f for f in diagnosis.get("findings") or [] if f.get("caused_by")]
    if cascade:
        lines.append(f"Cascade (symptoms of the root cause, not causes): {len(cascade)} finding(s), e.g. "
                     f"{cascade[0].get('title')}")
    return "\n".join(lines)


def fabric_test(*, nproc: int = 2, timeout_s: float = 240, backend: str | None = None,
                max_bytes: str = "1M") -> dict:
    """Run the collective bandwidth test under torchrun on this host and summarise its verdict.

    Uses NCCL on GPUs and gloo on a machine without CUDA (which exercises the launcher and the
    rendezvous, not the GPU fabric). Never raises: a failed start or a timeout is a FAIL.
    """
    workdir = Path(tempfile.mkdtemp(prefix="gpulib-fabric-"))
    results = workdir / "nccl-test.json"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(int(nproc)),
            "-m", "gpulib.nccl", "--json", str(results), "-b", "1K", "-e", max_bytes, "-f", "4",
            "-n", "5", "-w", "2", "--pairwise", "off", "-T", str(max(30, int(timeout_s) - 30))]
    if backend:
        argv += ["--backend", backend]
    display({"text/plain": "$ " + shlex.join(argv)}, raw=True)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=workdir)
        tail = (proc.stdout + proc.stderr)[-3000:]
        code = proc.returncode
    except subprocess.TimeoutExpired:
        tail, code = f"timed out after {timeout_s:g} s", None
    except OSError as exc:
        tail, code = f"could not start torchrun: {exc}", None
    summary = {"returncode": code, "results_path": str(results), "log_tail": tail}
    data, problem = None, f"no result written (exit {code})"
    if results.is_file():
        try:
            data = json.loads(results.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problem = f"{results} is unreadable ({exc}): was the run killed while writing it?"
    if isinstance(data, dict):
        verdict = data.get("verdict") or {}
        summary.update(verdict=verdict.get("status", "FAIL"), summary=verdict.get("reason"),
                       avg_busbw_gbps=data.get("avg_busbw_gbps"), backend=(data.get("config") or {}).get("backend"),
                       result=data)
    else:
        summary.update(verdict="FAIL", summary=problem)
    display({"text/plain": safe(f"fabric test: {summary['verdict']} - {summary.get('summary') or ''}\n{tail[-1500:]}")},
            raw=True)
    return summary


# --------------------------------------------------------------------------------------------
# Display helpers


def show(item: Any, interactive: bool) -> None:
    """Display a :class:`FigurePanel` (widgets when interactive, plain figure headless) or anything."""
    if isinstance(item, FigurePanel) and interactive:
        display(item.widget())
        return
    item = item.figure if isinstance(item, FigurePanel) else item
    line = empty_figure_line(item) if isinstance(item, go.Figure) else None
    if line is not None:  # an empty figure is one line, not a blank box (the report does the same)
        display(Markdown(f"*{line}*"))
    elif isinstance(item, go.Figure) and figures_as_json():
        display(figure_bundle(item), raw=True)
    else:
        display(item)


# --------------------------------------------------------------------------------------------
# Findings


class RecordedFindings(list):
    """The findings :func:`record` returns: a plain list that IPython does not echo as ``Out[n]``.

    ``nbk.record(...)`` is the last line of every notebook's result cell; without this, JupyterLab
    shows the whole list of finding dicts under the summary that ``record`` already displayed,
    and in drill mode that dump reveals the hidden answer.
    """

    def _ipython_display_(self) -> None:
        """Nothing to show: :func:`record` displayed the summary and the MIME bundle already."""


def record(findings: Iterable[Any], findings_path: str | os.PathLike | None, *, step: str,
           hide: bool = False, drill: Drill | bool = False) -> list[dict]:
    """Write the step's findings as a JSON list to ``findings_path`` and show them.

    The JSON sidecar is what runbooks, schedulers and tests read; the display carries the same
    list as ``application/vnd.gpulib.finding+json`` (machine-readable inside the archived
    notebook) with a text summary for people.

    Drill mode (``drill`` from :func:`show_diagnosis`, or ``hide``) keeps the answer off the
    screen. A live :class:`Drill` also keeps it off the disk until the trainee commits: the
    sidecar is written at the reveal, and a sidecar left by an earlier run at ``findings_path``
    (which would hold the answer, one click away in JupyterLab's file browser) is removed first.
    A headless drill (``drill=True``: papermill, ``gpulib run``) has nobody to commit, and its
    archive must stay complete (``findings.json``, the report, ``archive diff``), so it writes
    the sidecar at once and hides only the display.
    """
    items = normalize_findings(findings, step=step)
    if isinstance(drill, Drill):
        removed = _remove_sidecar(findings_path)

        def write_at_reveal() -> None:
            _write_findings(items, findings_path)
            # into the drill's own output: a button callback's display() would land in the log console
            show_in(drill.out, _findings_bundle(items, step), metadata=_findings_metadata(step, findings_path))

        drill.on_reveal(write_at_reveal)
        note = f"drill mode: the findings are written to {findings_path} when you commit an answer" + (
            " (the file an earlier run left there was removed: it held the answer)" if removed else "")
        display({FINDING_MIME: {"step": step, "findings": []}, "text/plain": note}, raw=True,
                metadata=_findings_metadata(step, findings_path))
        return RecordedFindings(items)
    _write_findings(items, findings_path)
    if hide or drill:
        summary = "drill mode: findings recorded, hidden until you commit an answer"
        display({FINDING_MIME: {"step": step, "findings": []}, "text/plain": summary}, raw=True,
                metadata=_findings_metadata(step, findings_path))
    else:
        _show_findings(items, findings_path, step)
    return RecordedFindings(items)


def _write_findings(items: list[dict], findings_path: str | os.PathLike | None) -> None:
    if not findings_path:
        return
    path = Path(findings_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(items, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def _findings_bundle(items: list[dict], step: str) -> dict:
    return {FINDING_MIME: {"step": step, "findings": items}, "text/plain": safe(summarize_findings(items, step=step))}


def _findings_metadata(step: str, findings_path: str | os.PathLike | None) -> dict:
    return {"gpulib": {"step": step, "findings_path": str(findings_path or "")}}


def _show_findings(items: list[dict], findings_path: str | os.PathLike | None, step: str) -> None:
    display(_findings_bundle(items, step), raw=True, metadata=_findings_metadata(step, findings_path))


def _remove_sidecar(findings_path: str | os.PathLike | None) -> bool:
    """Remove a findings sidecar an earlier run left (a JSON list of findings; anything else at
    that path is left alone). True when one was removed."""
    if not findings_path:
        return False
    path = Path(findings_path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not (isinstance(data, list) and all(isinstance(f, dict) and "id" in f and "category" in f for f in data)):
        return False
    path.unlink()
    return True
