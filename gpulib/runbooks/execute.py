"""Execute the notebooks of a runbook with papermill, each step in its own kernel.

Why these settings: papermill has no execution timeout by default (a hung NVML call or a
widget waiting for a click would hang a nightly job forever), runs the kernel in the *caller's*
working directory unless told otherwise, and resolves ``python3`` through whatever kernelspec
comes first on the Jupyter path. The runner therefore passes ``kernel_name``, ``cwd``,
``start_timeout`` and ``execution_timeout`` explicitly, checks that the ``python3`` kernelspec
runs this very environment, always injects ``interactive=False`` and judges a step by what it
*recorded* (its findings file), not only by papermill's status: a cell that stalls inside an
Output widget is recorded as "completed" yet produced nothing.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from gpulib import exit_codes
from gpulib.identity import utc_now_iso
from gpulib.logs import get_logger
from gpulib.runbooks.spec import RunbookError, RunbookSpec, StepSpec
from gpulib.vocabulary import SEVERITIES

log = get_logger(__name__)

KERNEL_NAME = "python3"
INTERRUPTED = {"type": "Interrupted", "message": "stopped by an interrupt (Ctrl-C or SIGTERM)"}
#: Optional modules marked absent in the kernels (and in the ``gpulib run`` process). Every
#: notebook imports plotly, plotly imports nbformat, nbformat imports jsonschema, and jsonschema
#: imports ``rfc3987_syntax`` when it is installed (jupyter's ``format-nongpl`` extra), which
#: compiles 39 lark grammars: ~0.75 s of CPU per kernel, half of a typical step, only to check
#: IRI formats no runbook notebook uses. Absent, jsonschema skips those two formats, as it does
#: when the package is not installed.
SKIPPED_IMPORTS = ("rfc3987_syntax",)
#: Kernel command-line options (``log_level=ERROR``: not ipykernel's TCP-transport warning in
#: every cron mail).
KERNEL_ARGUMENTS = [
    "--IPKernelApp.log_level=ERROR",
    "--IPKernelApp.exec_lines="
    + ";".join(f"__import__('sys').modules.setdefault({name!r}, None)" for name in SKIPPED_IMPORTS),
]


def skip_slow_imports() -> None:
    """Mark :data:`SKIPPED_IMPORTS` absent in this process (the ``gpulib run`` command does)."""
    for name in SKIPPED_IMPORTS:
        sys.modules.setdefault(name, None)


@dataclass
class StepResult:
    """What one notebook execution produced. ``status`` is ``ok`` or ``failed`` (see ``error``)."""

    id: str
    notebook: str
    output: Path
    parameters: dict
    status: str = "pending"
    started_at: str | None = None
    duration_s: float = 0.0
    error: dict | None = None
    findings: list[dict] = field(default_factory=list)

    def to_dict(self, root: Path) -> dict:
        return {
            "id": self.id,
            "notebook": self.notebook,
            "output": self.output.relative_to(root).as_posix() if self.output.is_relative_to(root) else str(self.output),
            "parameters": self.parameters,
            "status": self.status,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
            "findings": len(self.findings),
        }


class KernelError(RunbookError):
    """The Jupyter kernel cannot run this environment's notebooks: the run itself cannot happen."""

    exit_code = exit_codes.RUN_FAILED


def check_kernel(kernel_name: str = KERNEL_NAME) -> list[str]:
    """Return the kernel's argv after checking that it runs *this* interpreter's environment.

    A ``python3`` kernelspec left in ``~/.local/share/jupyter`` by another install wins over the
    one in this environment and would run the notebooks without gpulib (or with an old copy).
    """
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        raise KernelError(
            f"no Jupyter kernel named {kernel_name!r}",
            hint=f"install one for this environment: {sys.executable} -m ipykernel install --prefix {sys.prefix} "
            f"--name {kernel_name}",
        ) from None
    argv = list(spec.argv)
    exe = argv[0] if argv else ""
    if exe in ("python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])):
        return [sys.executable, *argv[1:]]  # jupyter_client substitutes sys.executable for these
    if Path(os.path.abspath(exe)).parent != Path(os.path.abspath(sys.executable)).parent:
        raise KernelError(
            f"kernelspec {kernel_name!r} ({spec.resource_dir}) runs {exe}, not this environment's {sys.executable}",
            hint=f"reinstall it: {sys.executable} -m ipykernel install --prefix {sys.prefix} --name {kernel_name}",
        )
    return argv


def load_findings(path: Path) -> list[dict]:
    """Read a step's findings sidecar; raise ValueError with a readable reason when it is unusable."""
    try:
        findings = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"the notebook finished but recorded no findings ({path.name} was never written)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"findings file {path.name} is not readable JSON: {exc}") from None
    if not isinstance(findings, list) or not all(isinstance(f, dict) for f in findings):
        raise ValueError(f"findings file {path.name} must hold a JSON list of objects")
    bad = sorted({str(f.get("severity")) for f in findings if f.get("severity") not in SEVERITIES})
    if bad:
        raise ValueError(f"findings with severity {bad}; allowed: {', '.join(SEVERITIES)}")
    return findings


class RunKernels:
    """The kernels of one run, so that an interrupt stops them all at once.

    Why: papermill gives no handle on its kernel, and a Ctrl-C (or a scheduler's SIGTERM) in the
    runner would otherwise wait for every running cell to finish, up to the cell timeout, with
    the kernels (and a torchrun they started) still running. Each step's kernel manager is a
    :attr:`manager_class` that registers itself here once started; :meth:`stop_all` kills each
    kernel's process group, the running cells fail at once, and papermill still writes what
    the notebooks showed so far.
    """

    def __init__(self, env: dict[str, str] | None = None) -> None:
        from jupyter_client.manager import AsyncKernelManager

        self.env = dict(env or {})
        self._lock = threading.Lock()
        self._managers: list = []
        self.stopping = False
        run = self

        class TrackedKernelManager(AsyncKernelManager):
            async def start_kernel(self, **kw):
                if run.env:
                    kw["env"] = {**kw.get("env", os.environ), **run.env}
                await super().start_kernel(**kw)
                run._started(self)

        self.manager_class = TrackedKernelManager

    def _started(self, manager) -> None:
        with self._lock:
            self._managers.append(manager)
            stopping = self.stopping
        if stopping:  # started while the run was being stopped
            self._kill(manager)

    def stop_all(self) -> None:
        with self._lock:
            self.stopping = True
            managers = list(self._managers)
        for manager in managers:
            self._kill(manager)

    @staticmethod
    def _kill(manager) -> None:
        provisioner = getattr(manager, "provisioner", None)
        pid, pgid = getattr(provisioner, "pid", None), getattr(provisioner, "pgid", None)
        try:
            if pgid and pgid != os.getpgid(0):
                os.killpg(pgid, signal.SIGKILL)  # the kernel and anything it started (torchrun)
            elif pid:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # already gone


def execute_step(step: StepSpec, parameters: dict, output: Path, findings_path: Path, *, cwd: Path,
                 start_timeout_s: float, cell_timeout_s: float, kernel_name: str = KERNEL_NAME,
                 kernels: RunKernels | None = None) -> StepResult:
    """Run one notebook; never raises: failures are recorded in the result (and in the notebook)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from gpulib.runbooks.engine import ENGINE_NAME  # registers the engine; imports papermill

    extra = {"kernel_manager_class": kernels.manager_class} if kernels else {}

    injected = {**parameters, "interactive": False, "findings_path": str(findings_path)}
    result = StepResult(step.id, str(step.notebook), output, injected, started_at=utc_now_iso())
    started = time.monotonic()
    try:
        papermill.execute_notebook(
            str(step.notebook), str(output), parameters=injected, kernel_name=kernel_name, cwd=str(cwd),
            start_timeout=int(start_timeout_s), execution_timeout=int(cell_timeout_s),
            progress_bar=False, log_output=False,
            # saves on: a step that fails, hangs until the timeout or is killed still leaves what it
            # showed; the engine spaces them out (see gpulib.runbooks.engine)
            request_save_on_cell_execute=True, engine_name=ENGINE_NAME,
            extra_arguments=KERNEL_ARGUMENTS,
            **extra,
        )
        result.findings = [{**f, "step": step.id} for f in load_findings(findings_path)]
        result.status = "ok"
    except PapermillExecutionError as exc:
        result.status = "failed"
        result.error = {"type": exc.ename, "message": exc.evalue, "cell": exc.exec_count,
                        "cell_index": exc.cell_index}
    except ValueError as exc:  # from load_findings: the notebook ran but its record is unusable
        result.status = "failed"
        result.error = {"type": "FindingsError", "message": str(exc), "cell": None, "cell_index": None}
    except Exception as exc:  # noqa: BLE001 - kernel died, cell timeout, no kernel: all are "the step failed"
        result.status = "failed"
        result.error = {"type": type(exc).__name__, "message": str(exc).strip() or repr(exc),
                        "cell": None, "cell_index": None}
    result.duration_s = time.monotonic() - started
    if result.error and kernels and kernels.stopping:
        result.error = {**result.error, **INTERRUPTED}
    if result.error:
        log.warning("step %s failed: %s: %s", step.id, result.error["type"], result.error["message"])
    return result


def execute_runbook(spec: RunbookSpec, plan: dict[str, dict], outputs: Path, scratch: Path, *, cwd: Path,
                    jobs: int, cell_timeout_s: float | None = None, progress=None,
                    after_step=None, env: dict[str, str] | None = None, on_start=None) -> list[StepResult]:
    """Run every stage in order and the steps of a stage ``jobs`` at a time.

    ``outputs`` receives ``<step>.ipynb``; ``scratch`` the findings sidecars; ``env`` is added to
    the kernels' environment (:func:`kernel_environment`). ``after_step`` (if
    given) is called with each :class:`StepResult` in the worker thread that ran it (while other
    kernels still run); ``progress`` with each finished result and its position, in this thread;
    ``on_start`` (if given) with each step's id as its kernel is about to start, in the worker thread.
    """
    done: list[StepResult] = []
    total = len(spec.steps)
    kernels = RunKernels(env)

    def run(step: StepSpec) -> StepResult:
        if on_start:
            on_start(step.id)
        result = execute_step(
            step, plan[step.id], outputs / f"{step.id}.ipynb", scratch / f"{step.id}.findings.json", cwd=cwd,
            start_timeout_s=spec.start_timeout_s,
            cell_timeout_s=cell_timeout_s or step.cell_timeout_s or spec.cell_timeout_s, kernels=kernels,
        )
        if after_step:
            after_step(result)
        return result

    def not_run(step: StepSpec) -> StepResult:
        return StepResult(step.id, str(step.notebook), outputs / f"{step.id}.ipynb", plan[step.id],
                          status="failed", error={**INTERRUPTED, "message": "not started: the run was interrupted"})

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="gpulib-step") as pool:
        for stage in spec.stages:
            if kernels.stopping:
                done += [not_run(step) for step in stage]
                continue
            futures = {pool.submit(run, step): step for step in stage}
            pending = set(futures)
            try:
                for future in as_completed(futures):
                    pending.discard(future)
                    done.append(future.result())
                    if progress:
                        progress(done[-1], len(done), total)
            except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into one by the CLI
                log.warning("interrupted: stopping %d running step(s)", len(pending))
                kernels.stop_all()
                cancelled = {f for f in pending if f.cancel()}  # all of them before waiting on any
                done += [not_run(futures[f]) if f in cancelled else f.result() for f in pending]
    order = {step.id: n for n, step in enumerate(spec.steps)}
    return sorted(done, key=lambda r: order[r.id])
