"""The archiving engine writes the output notebook on a clock, and always at the end."""

from __future__ import annotations

import nbformat

from gpulib.runbooks.engine import ThrottledSaves
from tests.runbooks.conftest import NOTEBOOKS


def test_cell_saves_are_spaced_but_the_final_state_is_written(tmp_path):
    out = tmp_path / "out.ipynb"
    nb = nbformat.read(NOTEBOOKS / "ok.ipynb", as_version=4)
    nb.metadata["papermill"] = {}
    manager = ThrottledSaves(nb, output_path=str(out), progress_bar=False)
    manager.notebook_start()
    first = out.read_text()
    code = [c for c in nb.cells if c.cell_type == "code"]
    manager.cell_start(code[0], 1)
    manager.cell_complete(code[0], 1)
    assert out.read_text() == first  # within SAVE_EVERY_S of the last save: not rewritten
    manager.notebook_complete()
    final = nbformat.read(out, as_version=4)
    assert final.metadata.papermill["end_time"] is not None
    assert final.cells[1].metadata.papermill["status"] == "completed"
