"""Drill mode (training): ask for the answer, reveal the diagnosis only after it is committed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import ipywidgets as widgets

from gpulib.notebook.widgets import natural_key


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
    labels += sorted({f"{h} gpu {g}" for h, g in gpus if h and g is not None}, key=natural_key)
    return labels


def _culprit_label(root: dict) -> str:
    if not root.get("host"):
        return "none"
    return f"{root['host']} gpu {root['gpu_index']}" if root.get("gpu_index") is not None else root["host"]
