"""What ``srun`` itself prints about the tasks of a step: the node it names is the culprit host.

A Slurm step's console ends with srun's verdict on its tasks, one line per node::

    slurmstepd: error: Detected 1 oom_kill event in StepId=88123.0. Some of the step tasks have been OOM Killed.
    srun: error: gpu-a07: task 3: Out Of Memory

The training processes often print nothing at all (SIGKILL leaves no traceback), so this line is
the only place that says *which node* ran out of host memory. The catalogue reads its meaning
(``srun-task-oom``); this module gives the host-OOM cause the node the line names - whichever line
reported the kill first (a DataLoader worker 'killed by signal: Killed' says no node) - so the
on-call engineer knows where to look (``sacct -j ID --format=JobID,NodeList,MaxRSS``).
"""

from __future__ import annotations

import re

from gpulib.diagnose.context import Context

#: ``srun: error: NODE: task N: Out Of Memory`` / ``tasks 1-3``
_SRUN_NODE = re.compile(r"srun: error: (?P<node>[A-Za-z][\w.-]*): tasks? [\d,-]+: ")
#: The catalogue row that reads srun's out-of-memory verdict.
SRUN_OOM = "srun-task-oom"


def run(ctx: Context) -> None:
    nodes = _oom_nodes(ctx)
    if len(nodes) != 1:  # none, or several nodes out of memory: no one of them is *the* node
        return
    node = nodes.pop()
    for f in ctx.findings:
        if f.category == "host_oom" and f.role == "cause" and not f.host:
            f.host = node  # the same kill, read from another line (a DataLoader worker 'killed by signal')


def _oom_nodes(ctx: Context) -> set[str]:
    """The nodes srun reports tasks killed for memory on, from every file's signature matches."""
    out: set[str] = set()
    for file in ctx.inputs.files:
        for s in file.signals:
            if s.signature == SRUN_OOM:
                m = _SRUN_NODE.search(s.text or "")
                if m:
                    out.add(m["node"])
    return out


__all__ = ["run"]
