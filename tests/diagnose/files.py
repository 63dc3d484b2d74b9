"""Writing a folder of evidence files for a test: what an engineer hands `gpulib diagnose`."""

from __future__ import annotations

from pathlib import Path


def write_tree(folder: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: text}`` under ``folder`` (sub-folders made as needed); returns ``folder``."""
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def answer(got: dict) -> tuple:
    """(interruption, category, culprit host) of a ``gpulib.diagnosis/1`` dict: what a test of one
    mechanism checks first."""
    root = got.get("root_cause") or {}
    return got["verdict"]["interruption"], root.get("category") or got["verdict"]["category"], root.get("host")
