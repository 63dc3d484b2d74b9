"""Rules for jobs that run under Ray (Ray Train, verl / OpenRLHF / EasyR1, vLLM with Ray workers).

Ray puts a supervisor between the job and the kernel. Its **memory monitor** (in the raylet, one
per node) watches the node's *host* RAM and kills the most recently scheduled worker once usage
passes ``RAY_memory_usage_threshold`` (0.95 by default), before the kernel's OOM killer would.
The driver then reports the death as::

    ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
    Memory on the node (IP: 10.44.0.5, ID: ...) where the task ... was running was 481.92GB / 503.71GB ...

and the raylet as ``N Workers (tasks / actors) killed due to memory pressure (OOM) ... at node
(ID: ..., IP: 10.31.8.22)``. Two things follow, and this module applies them after the other
rules have read the lines:

* it is **host memory, never GPU memory** (the job parser leaves Ray's ``OutOfMemoryError`` to the
  ``ray-oom-kill`` signature): lowering the batch size does not help a node out of RAM (colocated
  actors, CPU offload, a checkpoint loaded whole per worker);
* the line names the node by its IP: that is the culprit host when nothing else named one.
"""

from __future__ import annotations

import re

from gpulib.diagnose.context import Context
from gpulib.findings import Finding

#: The node a Ray memory message names: ``Memory on the node (IP: a.b.c.d`` / ``at node (ID: x, IP: a.b.c.d)``.
_NODE_IP = re.compile(r"(?:Memory on the node|at node) \((?:ID: \w+, )?IP: (?P<ip>\d{1,3}(?:\.\d{1,3}){3})")
#: The signature finding that reads Ray's memory monitor (``signatures.tsv`` row ``ray-oom-kill``).
RAY_OOM_ID = "sig-ray-oom-kill-"


def run(ctx: Context) -> None:
    ray_kills = [f for f in ctx.findings if f.id.startswith(RAY_OOM_ID)]
    if not ray_kills:
        return
    for f in ray_kills:
        _name_node(f)


def _name_node(f: Finding) -> None:
    """The node Ray names by IP is where host memory ran out: the culprit host, if none is known."""
    if f.host:
        return
    for e in f.quotes:
        m = _NODE_IP.search(e.text or "")
        if m:
            f.host = m["ip"]
            return


__all__ = ["run"]
