"""How a diagnosis is judged against what a public thread concluded (``expected.json``).

The category must match, except that a healthy run (category or interruption ``none``) must be
answered ``none`` and a pure timeout cascade (category ``unknown``) must be answered ``unknown``.
Culprit fields are judged only where the thread states them. The worst answer is a silent
``none`` on a failure: a scheduler would relaunch onto the broken node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.diagnose import diagnose

CULPRIT_FIELDS = ("host", "rank", "gpu_index", "gpu_pci")
SHARED_THREADS_NAME = ("corpus", "public-threads")
OWN_CASES = Path(__file__).resolve().parent / "cases"


@dataclass
class Verdict:
    case: str
    expected: dict
    got: dict
    right: bool
    silent_none: bool
    culprit: dict[str, bool] = field(default_factory=dict)

    @property
    def must_be_right(self) -> bool:
        return self.expected.get("confidence") in ("high", "medium")


def cases(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "expected.json").is_file() and (p / "input").is_dir())


def judge(case: Path, doc: dict | None = None) -> Verdict:
    expected = json.loads((case / "expected.json").read_text())
    doc = doc if doc is not None else diagnose([case / "input"]).to_dict()
    verdict, root = doc.get("verdict") or {}, doc.get("root_cause") or {}
    category = root.get("category") or verdict.get("category")
    healthy = expected["category"] == "none" or expected["interruption"] == "none"
    if healthy:
        right = verdict.get("interruption") == "none"
    elif expected["category"] == "unknown":
        right = verdict.get("interruption") == "unknown"
    else:
        right = category == expected["category"]
    culprit = {k: root.get(k) == expected[k] for k in CULPRIT_FIELDS if expected.get(k) is not None}
    return Verdict(case.name, expected, doc, right, (not healthy) and verdict.get("interruption") == "none",
                   culprit)


def table(verdicts: list[Verdict]) -> str:
    """Accuracy per field, as the acceptance asks: category, silent nones, each culprit field."""
    lines = [f"category right {sum(v.right for v in verdicts)}/{len(verdicts)}; "
             f"failures answered 'none': {sum(v.silent_none for v in verdicts)}"]
    for name in CULPRIT_FIELDS:
        judged = [v.culprit[name] for v in verdicts if name in v.culprit]
        if judged:
            lines.append(f"{name}: {sum(judged)}/{len(judged)}")
    lines += [f"  wrong: {v.case} expected {v.expected['category']}/{v.expected['interruption']}, got "
              f"{(v.got.get('root_cause') or {}).get('category') or v.got['verdict']['category']}/"
              f"{v.got['verdict']['interruption']} [{v.expected.get('confidence')}]" for v in verdicts if not v.right]
    return "\n".join(lines)
