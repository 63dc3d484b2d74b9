"""Drill mode (training): the trainee commits to an answer before the diagnosis is revealed.

The flow, and why each part exists:

1. **Ask** every facet (category, hard or soft, culprit host, GPU, rank) with pickers that offer
   everything the evidence mentions (:mod:`~gpulib.notebook.drill_grading`), so picking is reading.
2. **Commit** scores each facet on its own (partial credit). A wrong facet gets a hint about
   *where to look*, not the answer, and the trainee may **try again** (up to ``max_attempts``):
   finding the mistake yourself is what the drill is for.
3. **Reveal** (everything right, the last attempt used, or "Show the answer"): every facet with
   its answer and why, the quoted lines, the score of each attempt; then whatever waited for it
   runs (:meth:`Drill.on_reveal`): the step's findings file is written and "What next" appears.
   Until then nothing that holds the answer is on screen or on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

import ipywidgets as widgets

from gpulib.notebook.drill_files import NEXT_STEPS_DIR, SCORE_FILE
from gpulib.notebook.drill_grading import (
    INTERRUPTIONS,
    NOBODY,
    UNANSWERED,
    AnswerKey,
    Choices,
    Mark,
    asked_facets,
    category_label,
    grade,
    score,
)
from gpulib.terminal import safe

__all__ = ["Drill"]


_STYLE = {"description_width": "initial"}
#: Wide enough for the longest label of each picker (a GPU is "host dddd:bb:dd.f (GPU i)").
_WIDTHS = {"category": "520px", "interruption": "440px", "host": "300px", "gpu": "420px", "rank": "220px"}
_TEXT_WIDTH = 100  # the output area's width in characters: longer lines wrap mid-word in JupyterLab


def _wrapped(label: str, text: str) -> list[str]:
    """``      why: ...`` wrapped to the output width, continuation lines aligned under the text."""
    return textwrap.wrap(text, _TEXT_WIDTH, initial_indent=f"      {label}: ",
                         subsequent_indent=" " * (8 + len(label)), break_on_hyphens=False) if text else []


class Drill:
    """Pickers, Commit / Try again / Show the answer buttons, and the graded result.

    ``diagnosis`` is the ``gpulib.diagnosis/1`` dict (the answer), ``categories`` the vocabulary,
    ``choices`` what the evidence offers. The state is kept in plain attributes (``attempts``,
    ``revealed``, ``result_text``) so tests and the notebook read it without a browser.
    """

    def __init__(self, diagnosis: dict, categories: Sequence[str], choices: Choices, *, max_attempts: int = 3,
                 folder: str | os.PathLike | None = None):
        self.key = AnswerKey.from_diagnosis(diagnosis, choices)
        self.choices = choices
        self.facets = [facet for facet, _ in asked_facets(choices)]
        #: the drill folder (the notebook's, the kernel's working directory): where the score file is
        #: written and the held-back next steps are released; None: neither (a drill in a test)
        self.folder = Path(folder) if folder is not None else None
        self.started = _now()
        self.max_attempts = max_attempts
        self.attempts: list[list[Mark]] = []
        self.revealed = False
        self.result_text = ""
        self._waiting: list[Callable[[], None]] = []
        prompt = [("(pick one)", UNANSWERED)]
        self.pickers: dict[str, widgets.Dropdown] = {
            "category": widgets.Dropdown(options=prompt + [(category_label(c), c) for c in categories], value=UNANSWERED,
                                         description="category", style=_STYLE),
            "interruption": widgets.Dropdown(options=prompt + list(INTERRUPTIONS), value=UNANSWERED,
                                             description="hard or soft", style=_STYLE),
            "host": widgets.Dropdown(options=prompt + [("no single host", NOBODY)] + [(h, h) for h in choices.hosts],
                                     value=UNANSWERED, description="host", style=_STYLE),
            "gpu": widgets.Dropdown(options=prompt + [("no single GPU", NOBODY)] + [(g.label(), g) for g in choices.gpus],
                                    value=UNANSWERED, description="GPU", style=_STYLE),
            "rank": widgets.Dropdown(options=prompt + [("no single rank", NOBODY)] + [(f"rank {r}", r) for r in choices.ranks],
                                     value=UNANSWERED, description="rank", style=_STYLE),
        }
        for facet, picker in self.pickers.items():
            picker.layout = widgets.Layout(width=_WIDTHS[facet])
        self.commit = widgets.Button(description="Commit my answer", button_style="primary")
        self.retry = widgets.Button(description="Try again", disabled=True)
        self.show_answer = widgets.Button(description="Show the answer", disabled=True)
        self.out = widgets.Output()
        self.next_out = widgets.Output()  # "What next", filled at the reveal (face.next_step shows it)
        self.commit.on_click(lambda _b: self.submit())
        self.retry.on_click(lambda _b: self.try_again())
        self.show_answer.on_click(lambda _b: self.reveal())

    # ---------------------------------------------------------------- the flow
    def picked(self) -> dict:
        return {facet: picker.value for facet, picker in self.pickers.items() if facet in self.facets}

    def submit(self) -> list[Mark]:
        """Grade the current picks as one attempt; reveal when all right or out of attempts."""
        if self.revealed or self.commit.disabled:
            return self.attempts[-1] if self.attempts else []
        marks = grade(self.picked(), self.key, self.choices)
        self.attempts.append(marks)
        self._lock(True)
        self._record_score()
        points, total = score(marks)
        if points == total or len(self.attempts) >= self.max_attempts:
            self.reveal()
        else:
            left = self.max_attempts - len(self.attempts)
            lines = [f"Attempt {len(self.attempts)}: {points} / {total}. Wrong facets get a hint; "
                     f"{left} attempt(s) left (Try again), or Show the answer."]
            for m in marks:
                lines.append(f"  {m.question}: {m.picked} -> " + ("right" if m.right else "WRONG"))
                lines += [] if m.right else _wrapped("hint", m.hint)
            self._print("\n".join(lines))
            self.retry.disabled = False
            self.show_answer.disabled = False
        return marks

    def try_again(self) -> None:
        """Unlock the pickers (the right facets stay picked) for another attempt."""
        if self.revealed or len(self.attempts) >= self.max_attempts:
            return
        self._lock(False)
        self.retry.disabled = True

    def reveal(self) -> str:
        """Show every facet's answer and why, the quoted lines and the scores; run what waited."""
        if self.revealed:
            return self.result_text
        if not self.attempts:  # "Show the answer" before any commit counts as an empty attempt
            self.attempts.append(grade({}, self.key, self.choices))
        self.revealed = True
        self._lock(True)
        self.retry.disabled = self.show_answer.disabled = True
        self.result_text = self.report()
        self._record_score()
        moved = self._release_next_steps()
        if moved:
            self.result_text += ("\nThe next steps' notebooks are now beside this one (same evidence): "
                                 + ", ".join(moved))
        self._print(self.result_text)
        for callback in self._waiting:
            callback()
        self._waiting.clear()
        return self.result_text

    def on_reveal(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` at the reveal (now, if it has happened): writing the findings file,
        showing the next step."""
        if self.revealed:
            callback()
        else:
            self._waiting.append(callback)

    # ---------------------------------------------------------------- what is shown
    def report(self) -> str:
        marks = self.attempts[-1]
        scores = [score(a) for a in self.attempts]
        first, total = scores[0]
        lines = [f"Drill result: {first} / {total} on the first attempt"
                 + (f", {scores[-1][0]} / {total} on attempt {len(scores)}" if len(scores) > 1 else "")]
        for m in marks:
            verdict = "right" if m.right else f"WRONG (answer: {m.answer})"
            lines.append(f"  {m.question}: {m.picked} -> {verdict} [{m.points}/1]")
            lines += _wrapped("why", m.why)
        if self.key.quotes:
            lines.append("Lines you should have used (file:line: text):")
            for e in self.key.quotes[:6]:
                lines += textwrap.wrap(f"{e.get('file')}:{e.get('line')}: {e.get('text')}", _TEXT_WIDTH,
                                       initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False)
        if self.key.summary:
            lines += textwrap.wrap(f"Summary: {self.key.summary}", _TEXT_WIDTH, subsequent_indent="  ",
                                   break_on_hyphens=False)
        return "\n".join(lines)

    def score_summary(self) -> dict:
        """What a trainer collects: each attempt's picks, right or wrong per question, and points;
        the answer key only once it has been revealed."""
        attempts = [{"attempt": n, "points": score(marks)[0], "out_of": score(marks)[1],
                     "answers": {m.facet: {"picked": m.picked, "right": m.right} for m in marks}}
                    for n, marks in enumerate(self.attempts, 1)]
        out = {"format": "gpulib.drill-score/1", "started_at": self.started, "updated_at": _now(),
               "questions": [q for f, q in asked_facets(self.choices)], "max_attempts": self.max_attempts,
               "attempts": attempts, "revealed": self.revealed}
        if self.revealed:
            out["answer"] = {m.facet: m.answer for m in self.attempts[-1]}
        return out

    def _record_score(self) -> None:
        if self.folder is None:
            return
        try:
            (self.folder / SCORE_FILE).write_text(json.dumps(self.score_summary(), indent=2) + "\n", encoding="utf-8")
        except OSError:
            pass  # a read-only folder: the score is still on screen

    def _release_next_steps(self) -> list[str]:
        """Move the next steps' notebooks that ``gpulib drill`` held back next to this one."""
        held = self.folder / NEXT_STEPS_DIR if self.folder is not None else None
        if held is None or not held.is_dir():
            return []
        moved = []
        for notebook in sorted(held.glob("*.ipynb")):
            target = self.folder / notebook.name
            if not target.exists():
                shutil.move(str(notebook), target)
                moved.append(notebook.name)
        shutil.rmtree(held, ignore_errors=True)
        return moved

    def widget(self) -> widgets.Widget:
        p = {facet: picker for facet, picker in self.pickers.items() if facet in self.facets}
        left_out = [q for f, q in (("host", "culprit host"), ("gpu", "culprit GPU"), ("rank", "culprit rank"))
                    if f not in self.facets]
        intro = widgets.HTML(f"<b>Drill:</b> name the root cause from the evidence below, then commit. "
                             f"Each of the {len(self.facets)} answers is scored on its own."
                             + (f" Not asked (the evidence has only one candidate): {', '.join(left_out)}."
                                if left_out else ""))
        first = [p[f] for f in ("category", "interruption") if f in p]
        culprit = [p[f] for f in ("host", "gpu", "rank") if f in p]
        return widgets.VBox([intro, widgets.HBox(first), widgets.HBox(culprit),
                             widgets.HBox([self.commit, self.retry, self.show_answer]), self.out])

    def _lock(self, locked: bool) -> None:
        for picker in self.pickers.values():
            picker.disabled = locked
        self.commit.disabled = locked

    def _print(self, text: str) -> None:
        show_in(self.out, {"text/plain": safe(text)}, replace=True)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def show_in(out: widgets.Output, bundle: dict, *, replace: bool = False, metadata: dict | None = None) -> None:
    """Put a MIME bundle into an Output widget's ``outputs`` directly.

    Why not ``with out: print(...)``: the context manager captures only while a kernel is
    executing a request; writing the trait works from button callbacks, outside a kernel (tests)
    and in the archived widget state alike.
    """
    if "text/plain" in bundle and len(bundle) == 1:
        item = {"output_type": "stream", "name": "stdout", "text": bundle["text/plain"] + "\n"}
    else:
        item = {"output_type": "display_data", "data": bundle, "metadata": metadata or {}}
    out.outputs = ((item,) if replace else (*out.outputs, item))
