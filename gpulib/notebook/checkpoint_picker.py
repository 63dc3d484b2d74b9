"""Notebook 07's candidate picker: choose a checkpoint, copy its resume command, see the cost.

Why a picker and not only the recommendation: the newest complete checkpoint is the default,
but an engineer may have reasons to go further back (a loss spike before the crash, a data
bug found since). Each candidate shows what resuming from it costs (steps lost to re-train,
what it lacks) and its resume command in a text field to copy; a rejected one shows why, and
its "command" is a shell comment, so a copied line cannot resume from a broken file.

The candidates come from :func:`gpulib.checkpoints.candidates.checkpoint_candidates`; this module only
shows them. Headless (papermill) the recommended one is shown as plain text, the same text the
picker starts with.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
from IPython.display import display

from gpulib.checkpoints.candidates import steps_lost_text
from gpulib.terminal import safe


def candidate_text(candidate: dict) -> str:
    """What one candidate means for the resume, as plain text (headless output and the picker's
    details): verdict, steps lost, what it lacks, and the command on its own line to copy."""
    verdict = {"recommended": "RESUME FROM THIS (newest complete checkpoint)",
               "complete": "complete, but older than the recommended one",
               "rejected": "REJECTED: " + (candidate.get("why") or "")}[candidate["verdict"]]
    lines = [f"{candidate['name']}: {verdict}", f"  path: {candidate['path']}", f"  {steps_lost_text(candidate)}"]
    lines += [f"  lacks: {lack}" for lack in candidate.get("lacks") or []]
    if candidate.get("resume_command"):
        lines += ["", "Resume command (copy it; fill in the <...> parts):" if candidate["verdict"] != "rejected"
                  else "No resume command:", candidate["resume_command"]]
    return "\n".join(lines)


class CheckpointPicker:
    """A dropdown over the candidates (recommended first), the picked one's resume command in a
    text field, and its details (steps lost, lacks, why rejected)."""

    def __init__(self, candidates: Sequence[dict]):
        self.candidates = list(candidates)
        self.dropdown = widgets.Dropdown(options=[(c["label"], n) for n, c in enumerate(self.candidates)],
                                         value=0 if self.candidates else None, description="checkpoint",
                                         style={"description_width": "initial"},
                                         layout=widgets.Layout(width="100%"))
        self.command = widgets.Textarea(description="resume command", rows=3, style={"description_width": "initial"},
                                        layout=widgets.Layout(width="100%"))
        self.details = widgets.HTML()
        self.dropdown.observe(lambda _change: self._show(), names="value")
        self._show()

    @property
    def selected(self) -> dict | None:
        return self.candidates[self.dropdown.value] if self.candidates and self.dropdown.value is not None else None

    def _show(self) -> None:
        chosen = self.selected
        self.command.value = (chosen or {}).get("resume_command") or ""
        text = candidate_text(chosen) if chosen else "no checkpoint found"
        details = text.split("\n\n")[0]  # the command is in the text field
        self.details.value = ("<pre style='white-space: pre-wrap; word-break: normal; overflow-wrap: anywhere; margin: 0'>"
                              + _escape(details) + "</pre>")

    def widget(self) -> widgets.Widget:
        return widgets.VBox([self.dropdown, self.details, self.command], layout=widgets.Layout(width="100%"))

    def display(self, interactive: bool) -> None:
        """The picker live; headless the recommended (first) candidate as plain text."""
        if not self.candidates:
            display({"text/plain": "no checkpoint found: nothing to resume from (set checkpoint_dirs)"}, raw=True)
        elif interactive:
            display(self.widget())
        else:
            display({"text/plain": safe(candidate_text(self.candidates[0]))}, raw=True)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
