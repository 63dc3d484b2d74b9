"""Notebook side of gpulib: dual-mode display, pickers, findings and guarded remediation.

This is the only module that imports ``ipywidgets``. Every runbook notebook follows one pattern
(see ``notebooks/``)::

    # [parameters]
    evidence: str = "examples/..."   # what to analyse
    interactive: bool = True         # papermill passes False
    findings_path: str = "findings-01.json"

    from gpulib import notebook as nbk
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from IPython.display import Markdown, display

from gpulib import kernel_env, notebook_checks, notebook_data
from gpulib.errors import GpulibError
from gpulib.notebook_checks import FINDING_MIME, Command, normalize_findings, summarize_findings
from gpulib.notebook_data import Evidence

#: The renderer that survives every consumer: JupyterLab uses the mime part, nbconvert HTML
#: reports the embedded-JS part (plotly >= 6.1 defaults to the mime part only, and nbconvert
#: silently drops it).
PLOTLY_RENDERER = "plotly_mimetype+notebook"


def figures_as_json() -> bool:
    """True under ``gpulib run`` (:data:`gpulib.kernel_env.FIGURES_AS_JSON`)."""
    return os.environ.get(kernel_env.FIGURES_AS_JSON, "") not in ("", "0")


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


def open_evidence(evidence: str) -> Evidence:
    """Open the evidence folder named by the ``evidence`` parameter, or stop with a clear message."""
    try:
        ev = notebook_data.open_evidence(evidence)
    except GpulibError as exc:
        raise NotebookStop(exc.message, path=exc.path, hint=exc.hint) from None
    display(Markdown(ev.describe_markdown()))
    return ev


def freeze_scene(collect_to: str = "") -> str:
    """Capture this host into a new evidence bundle at ``collect_to`` (empty: a new temporary
    folder); returns its path.

    Collection only reads (nvidia-smi, NVML, kernel log, versions); every command has a timeout,
    and a missing tool is recorded as unavailable, so this is safe on a broken node.
    """
    from gpulib.collect import collect  # here: only this step runs commands on the machine

    target = Path(collect_to) if collect_to else Path(tempfile.mkdtemp(prefix="gpulib-scene-")) / socket.gethostname()
    try:
        bundle = collect(target)
    except GpulibError as exc:
        raise NotebookStop(exc.message, path=exc.path, hint=exc.hint) from None
    display(Markdown(f"Captured this host into `{bundle}`"))
    return str(bundle)


def show_diagnosis(diagnosis: dict, *, interactive: bool, drill: bool = False) -> None:
    """The verdict, root cause and its evidence lines; in drill mode a challenge instead."""
    if drill:
        root = diagnosis.get("root_cause") or {}
        hosts = [i.get("host") for i in diagnosis.get("inputs") or []] + [root.get("host")]
        gpus = [(f.get("host"), f.get("gpu_index")) for f in diagnosis.get("findings") or []]
        if interactive:
            display(Drill(diagnosis, notebook_checks.CATEGORIES, culprit_choices(hosts, gpus)).widget())
        else:
            display(Markdown("*Drill mode: the diagnosis is hidden (run interactively to answer the drill).*"))
        return
    display({"text/plain": diagnosis_text(diagnosis)}, raw=True)


def next_step(diagnosis: dict, *, drill: bool = False) -> None:
    """Name the notebook to open next (withheld in drill mode: it would give the answer away)."""
    say("*Drill mode: commit your answer above first; the next step follows from it.*" if drill
        else notebook_checks.next_step(diagnosis))


def diagnosis_text(diagnosis: dict) -> str:
    """Verdict, root cause and evidence of a ``gpulib.diagnosis/1`` dict as plain text."""
    verdict = diagnosis.get("verdict") or {}
    root = diagnosis.get("root_cause") or {}
    lines = [f"Verdict: {verdict.get('interruption', 'unknown').upper()} interruption, category "
             f"{verdict.get('category', 'unknown')}", f"  {verdict.get('summary', '')}"]
    if root.get("host") or root.get("rank") is not None:
        where = [f"host {root['host']}" if root.get("host") else "",
                 f"GPU {root['gpu_index']}" if root.get("gpu_index") is not None else "",
                 f"PCI {root['gpu_pci']}" if root.get("gpu_pci") else "",
                 f"rank {root['rank']}" if root.get("rank") is not None else "",
                 f"at {root['time']}" if root.get("time") else ""]
        lines.append("Root cause: " + ", ".join(w for w in where if w))
    evidence = root.get("evidence") or []
    if evidence:
        lines.append("Evidence:")
        lines += [f"  {e.get('file')}:{e.get('line')}: {e.get('text')}" for e in evidence[:8]]
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
    display({"text/plain": f"fabric test: {summary['verdict']} - {summary.get('summary') or ''}\n{tail[-1500:]}"},
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
    if isinstance(item, go.Figure) and figures_as_json():
        display(figure_bundle(item), raw=True)
    else:
        display(item)


def figure_bundle(figure: go.Figure) -> dict:
    """The figure as plotly's JSON mime part (what JupyterLab and the offline report draw)."""
    return {"application/vnd.plotly.v1+json": json.loads(pio.to_json(figure, validate=False)),
            "text/plain": f"<figure: {figure.layout.title.text or ''}>"}


def table(frame: pd.DataFrame, empty: str = "nothing found") -> None:
    """Show a table, or one line saying it is empty (an empty table reads like a rendering bug).
    A missing value shows as an empty cell: "NaN" or "None" in a host column reads as a name."""
    if frame is None or frame.empty:
        display(Markdown(f"*{empty}*"))
    else:
        display(frame.astype(object).where(frame.notna(), ""))


def say(text: str) -> None:
    """A markdown line (teaching remarks computed from the evidence)."""
    display(Markdown(text))


# --------------------------------------------------------------------------------------------
# Pickers


ALL = "(all)"


@dataclass
class FigurePanel:
    """A figure plus the pickers that filter its data; the figure is rebuilt on every change.

    ``build(frame, **thresholds)`` is a pure function from :mod:`gpulib.plots`. ``pickers`` names
    the columns to filter on: ``host``, ``gpu`` (column ``gpu``), ``rank`` and ``time`` (a window
    over column ``time``). ``thresholds`` maps keyword arguments of ``build`` to their initial
    value, or to ``(value, min, max)`` for a slider. Headless, the figure is simply built with the
    initial values; interactively, :meth:`widget` returns the controls and the figure.
    """

    build: Callable[..., go.Figure]
    frame: pd.DataFrame
    pickers: Sequence[str] = ()
    thresholds: dict[str, Any] = field(default_factory=dict)
    initial: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.controls: dict[str, widgets.Widget] = {}
        for name in self.pickers:
            control = self._picker(name)
            if control is not None:
                self.controls[name] = control
        for name, spec in self.thresholds.items():
            self.controls[name] = _threshold_slider(name, spec)
        self._output: widgets.Output | None = None
        for control in self.controls.values():
            control.observe(self._changed, names="value")
        self.figure = self._build()

    # -- the pure part: current control values -> filtered frame -> figure
    def selection(self) -> pd.DataFrame:
        frame = self.frame
        if frame is None or frame.empty:
            return frame
        for name, control in self.controls.items():
            if name in self.thresholds:
                continue
            if name == "time":
                start, end = control.value
                times = pd.to_datetime(frame["time"], utc=True, errors="coerce")
                frame = frame[(times >= pd.Timestamp(start)) & (times <= pd.Timestamp(end))]
            elif control.value != ALL:
                frame = frame[frame[name].astype(str) == str(control.value)]
        return frame

    def _build(self) -> go.Figure:
        kwargs = {name: self.controls[name].value for name in self.thresholds}
        return self.build(self.selection(), **kwargs)

    def _changed(self, _change: dict) -> None:
        self.figure = self._build()
        if self._output is not None:
            self._output.clear_output(wait=True)
            self._render()

    def _render(self) -> None:
        # Inside a widget only a live frontend shows the figure, so the plotly mime part is enough;
        # the embedded-JS part (~5 MB) would stall nbclient's Output emulation (papermill P1).
        with self._output:
            display(figure_bundle(self.figure), raw=True)

    def widget(self) -> widgets.Widget:
        """Controls above an output area that always shows the current figure."""
        if self._output is None:
            self._output = widgets.Output()
            self._render()
        return widgets.VBox([widgets.HBox(list(self.controls.values())), self._output])

    def _picker(self, name: str) -> widgets.Widget | None:
        frame = self.frame
        if frame is None or frame.empty or name not in frame.columns:
            return None
        if name == "time":
            times = sorted(pd.to_datetime(frame["time"], utc=True, errors="coerce").dropna().unique())
            if len(times) < 2:
                return None
            stamps = [pd.Timestamp(t) for t in times]
            # The readout shows "start-end" in a fixed width: drop the date when it is the same for
            # all events (the figure's axis shows it), or the end of the window is cut off.
            fmt = "%H:%M:%S" if len({s.date() for s in stamps}) == 1 else "%m-%d %H:%M:%S"
            labels = [(s.strftime(fmt), s) for s in stamps]
            start = self.initial.get("time_start")
            end = self.initial.get("time_end")
            lo = _nearest_index(times, start, default=0)
            hi = _nearest_index(times, end, default=len(times) - 1)
            return widgets.SelectionRangeSlider(
                options=labels, index=(lo, max(lo, hi)), description="window", continuous_update=False,
                layout=widgets.Layout(width="520px"),
            )
        values = sorted({str(v) for v in frame[name].dropna()}, key=_natural_key)
        initial = self.initial.get(name)
        value = str(initial) if initial is not None and str(initial) in values else ALL
        return widgets.Dropdown(options=[ALL, *values], value=value, description=name)


def _threshold_slider(name: str, spec: Any) -> widgets.Widget:
    if isinstance(spec, tuple):
        value, lo, hi = spec
    else:
        value, lo, hi = spec, 0, max(1, spec * 2)
    slider = widgets.IntSlider if all(isinstance(v, int) for v in (value, lo, hi)) else widgets.FloatSlider
    return slider(value=value, min=lo, max=hi, description=name, continuous_update=False,
                  style={"description_width": "initial"})


def _nearest_index(times: list, moment: Any, default: int) -> int:
    if moment in (None, ""):
        return default
    target = pd.Timestamp(moment)
    target = target.tz_localize("UTC") if target.tzinfo is None else target.tz_convert("UTC")
    best = min(range(len(times)), key=lambda i: abs(pd.Timestamp(times[i]) - target))
    return best


def _natural_key(text: str) -> tuple:
    return (0, int(text), "") if text.lstrip("-").isdigit() else (1, 0, text)


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
           hide: bool = False) -> list[dict]:
    """Write the step's findings as a JSON list to ``findings_path`` and show them.

    The JSON sidecar is what runbooks, schedulers and tests read; the display carries the same
    list as ``application/vnd.gpulib.finding+json`` (machine-readable inside the archived
    notebook) with a text summary for people. ``hide`` (drill mode) writes the file but keeps the
    answer off the screen.
    """
    items = normalize_findings(findings, step=step)
    if findings_path:
        path = Path(findings_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(items, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
    summary = "drill mode: findings recorded, hidden until you commit an answer" if hide else (
        summarize_findings(items, step=step))
    display({FINDING_MIME: {"step": step, "findings": [] if hide else items}, "text/plain": summary},
            raw=True, metadata={"gpulib": {"step": step, "findings_path": str(findings_path or "")}})
    return RecordedFindings(items)


# --------------------------------------------------------------------------------------------
# Destructive remediation: shown always, run only interactively after explicit confirmation


class Remediation:
    """Commands that change a machine (kill PIDs, ``nvidia-smi -r``, power limits, reboot).

    They are always *shown*. They can only run when ``interactive`` is true, after the engineer
    ticks the confirmation box and presses the button, and only for commands meant for this very
    host (evidence is often analysed on another machine than the one it came from). Headless
    runs (papermill passes ``interactive=False``) never create the button at all.
    """

    def __init__(self, commands: Sequence[Command], interactive: bool, *, timeout_s: float = 60.0):
        self.commands = list(commands)
        self.interactive = bool(interactive)
        self.timeout_s = timeout_s
        self.results: list[tuple[Command, str]] = []
        self.here = socket.gethostname()
        self.confirm: widgets.Checkbox | None = None
        self.button: widgets.Button | None = None
        self.log = widgets.Output() if self.interactive and self.commands else None
        if self.log is not None:
            self.confirm = widgets.Checkbox(
                value=False, description="I have read these commands and want to run them on this host",
                layout=widgets.Layout(width="auto"), indent=False,
            )
            self.button = widgets.Button(description="Run commands", button_style="danger", disabled=True)
            self.confirm.observe(lambda change: setattr(self.button, "disabled", not change["new"]), "value")
            self.button.on_click(self._clicked)

    def text(self) -> str:
        if not self.commands:
            return "No remediation command is suggested by this evidence."
        lines = ["Remediation commands (review them; they change the machine):"]
        lines += [f"  {c.text()}" for c in self.commands]
        if not self.interactive:
            lines.append("Headless run: nothing was executed. Run them by hand, or open the notebook "
                         "interactively and confirm.")
        return "\n".join(lines)

    def display(self) -> None:
        display({"text/plain": self.text()}, raw=True)
        if self.log is not None:
            display(widgets.VBox([self.confirm, self.button, self.log]))

    def run_confirmed(self) -> list[tuple[Command, str]]:
        """Run every command for this host; refuses unless interactive and confirmed."""
        if not self.interactive or self.confirm is None or not self.confirm.value:
            raise GpulibError("remediation refused: it runs only interactively after confirmation")
        done = []
        for command in self.commands:
            if command.host and command.host != self.here:
                done.append((command, f"skipped: meant for {command.host}, this is {self.here}"))
                continue
            try:
                proc = subprocess.run(list(command.argv), capture_output=True, text=True,
                                      timeout=self.timeout_s, check=False)
                done.append((command, f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}".rstrip()))
            except FileNotFoundError:
                done.append((command, f"not run: {command.argv[0]} is not installed here"))
            except subprocess.TimeoutExpired:
                done.append((command, f"timed out after {self.timeout_s:.0f} s"))
        self.results.extend(done)
        return done

    def _clicked(self, _button: widgets.Button) -> None:
        if not self.confirm.value:
            with self.log:
                print("Tick the confirmation box first; nothing was run.")
            return
        self.button.disabled = True
        with self.log:
            for command, outcome in self.run_confirmed():
                print(f"$ {shlex.join(command.argv)}\n{outcome}")
        self.confirm.value = False


# --------------------------------------------------------------------------------------------
# Drill mode (training): hide the answer until the trainee commits to one


class Drill:
    """Ask for a category and a culprit; reveal the diagnosis only after the answer is committed.

    ``answer`` is the diagnosis dict (``gpulib.diagnosis/1``); ``culprits`` the choices offered
    (hosts, GPUs, ranks seen in the evidence).
    """

    def __init__(self, answer: dict, categories: Sequence[str], culprits: Sequence[str]):
        self.answer = answer
        self.category = widgets.Dropdown(options=["(pick one)", *categories], description="category")
        self.culprit = widgets.Dropdown(options=["(pick one)", "none", *culprits], description="culprit")
        self.commit = widgets.Button(description="Commit my answer", button_style="primary")
        self.out = widgets.Output()
        self.verdict: str | None = None
        self.commit.on_click(lambda _b: self.reveal())

    def reveal(self) -> str:
        root = self.answer.get("root_cause") or {}
        verdict = self.answer.get("verdict") or {}
        right_cat = verdict.get("category") or root.get("category") or "none"
        picked = self.culprit.value
        culprit_ok = picked == _culprit_label(root)
        lines = [
            f"Your category: {self.category.value} -> {'right' if self.category.value == right_cat else 'wrong'}"
            f" (answer: {right_cat}, {verdict.get('interruption', 'unknown')} interruption)",
            f"Your culprit: {picked} -> {'right' if culprit_ok else 'wrong'} (answer: {_culprit_label(root)})",
            f"Summary: {verdict.get('summary', '')}",
            "Evidence you should have used:",
        ]
        lines += [f"  {e.get('file')}:{e.get('line')}: {e.get('text')}" for e in root.get("evidence") or []]
        self.verdict = "\n".join(lines)
        self.commit.disabled = True
        with self.out:
            print(self.verdict)
        return self.verdict

    def widget(self) -> widgets.Widget:
        return widgets.VBox([widgets.HBox([self.category, self.culprit, self.commit]), self.out])


def culprit_choices(hosts: Iterable[str], gpus: Iterable[tuple[str, int]]) -> list[str]:
    """Labels such as ``node-b`` and ``node-b gpu 5`` for the drill's culprit picker."""
    labels = sorted({str(h) for h in hosts if h})
    labels += sorted({f"{h} gpu {g}" for h, g in gpus if h and g is not None}, key=_natural_key)
    return labels


def _culprit_label(root: dict) -> str:
    if not root.get("host"):
        return "none"
    return f"{root['host']} gpu {root['gpu_index']}" if root.get("gpu_index") is not None else root["host"]
