"""A papermill engine that saves the output notebook on a clock instead of around every cell.

Why: papermill's execution manager rewrites the whole output notebook when each cell starts and
when it ends. With plotly's ``notebook`` renderer every executed notebook carries its own
4.8 MB copy of plotly.js, so an eight-notebook runbook re-serialises hundreds of MB of JSON in
the runner, on the same cores the kernels need. This engine keeps the saves that matter: when
execution starts, at the end *whatever happened* (a failed, timed-out or killed step still
leaves everything it showed; papermill saves in a ``finally``), and during a long cell through
papermill's own autosave; between cells it writes at most every :data:`SAVE_EVERY_S` seconds.
"""

from __future__ import annotations

from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines

ENGINE_NAME = "gpulib-archive"
SAVE_EVERY_S = 10.0


class ThrottledSaves(NotebookExecutionManager):
    """papermill's execution manager, with cell-boundary saves at most every SAVE_EVERY_S."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._force_next_save = True  # notebook_start's save

    def save(self, **kwargs):
        due = (self.now() - self.last_save_time).total_seconds() >= SAVE_EVERY_S
        if self._force_next_save or due:
            self._force_next_save = False
            super().save(**kwargs)

    def notebook_complete(self, **kwargs):
        self._force_next_save = True  # the final state is always written
        super().notebook_complete(**kwargs)


class ArchivingEngine(NBClientEngine):
    """nbclient execution (papermill's default engine) with :class:`ThrottledSaves`."""

    @classmethod
    def execute_notebook(cls, nb, kernel_name, output_path=None, progress_bar=True, log_output=False,
                         autosave_cell_every=30, **kwargs):
        # Same sequence as papermill.engines.Engine.execute_notebook, with the throttled manager.
        nb_man = ThrottledSaves(nb, output_path=output_path, progress_bar=progress_bar, log_output=log_output,
                                autosave_cell_every=autosave_cell_every)
        nb_man.notebook_start()
        try:
            cls.execute_managed_notebook(nb_man, kernel_name, log_output=log_output, **kwargs)
        finally:
            nb_man.cleanup_pbar()
            nb_man.notebook_complete()
        return nb_man.nb


papermill_engines.register(ENGINE_NAME, ArchivingEngine)
