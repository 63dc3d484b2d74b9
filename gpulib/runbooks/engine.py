"""A papermill engine that saves the output notebook on a clock instead of around every cell.

Why: papermill's execution manager rewrites the whole output notebook when each cell starts and
when it ends, so the runner re-serialises every growing notebook dozens of times, on the same
cores the kernels need (hundreds of MB per runbook with plotly's ``notebook`` renderer, 4.8 MB of
plotly.js per notebook; ``gpulib run`` now records figures as JSON only,
:data:`gpulib.kernel_env.FIGURES_AS_JSON`). This engine keeps the saves that matter: when
execution starts, at the end *whatever happened* (a failed, timed-out or killed step still
leaves everything it showed; papermill saves in a ``finally``), and during a long cell through
papermill's own autosave; between cells it writes at most every :data:`SAVE_EVERY_S` seconds.

It also ends a kernel whose cells all completed at once (:class:`KillWhenDone`) instead of
papermill's graceful shutdown, which waits while the kernel tears down pandas, plotly and the
rest (about a quarter of a second of CPU per step, on the cores the other steps need).
"""

from __future__ import annotations

from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines
from papermill.log import logger

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


class KillWhenDone(PapermillNotebookClient):
    """papermill's client; once every cell has answered, the kernel is killed (its process
    group: it and anything it left running) rather than asked to shut down.

    Only then: the record is complete and nothing runs. A step that failed or timed out keeps
    the graceful shutdown, whose interrupt records *where* a hung cell was stuck.
    """

    def papermill_execute_cells(self):
        super().papermill_execute_cells()
        self.shutdown_kernel = "immediate"


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

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None, stderr_file=None,
                                 start_timeout=60, execution_timeout=None, **kwargs):
        # NBClientEngine.execute_managed_notebook with the KillWhenDone client
        kwargs = {k: v for k, v in kwargs.items() if k not in ("input_path", "timeout", "startup_timeout")}
        return KillWhenDone(nb_man, timeout=execution_timeout, startup_timeout=start_timeout, kernel_name=kernel_name,
                            log=logger, log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                            **kwargs).execute()


papermill_engines.register(ENGINE_NAME, ArchivingEngine)
