"""Where Kubernetes ran each pod: ``kubectl get pods -o wide`` and ``kubectl describe pod``.

Why it matters: in a pod the hostname is the *pod's* name, so every line the job prints (NCCL's
``gpt-ft-worker-1:181:491 [5] NCCL INFO ...`` prefix, torchrun's error table) names the pod, while
the kernel, ``nvidia-smi`` and the BMC of the machine name the *node*. The operator drains a node;
the GPU fault the kernel logged on that node is the same fault the pod's rank reported. Only the
scheduler's listing ties the two names together::

    NAME              READY   STATUS   RESTARTS   AGE   IP            NODE          NOMINATED NODE   READINESS GATES
    trainer-worker-1  0/1     Error    0          97m   10.244.11.6   gpu-node-17   <none>           <none>

``kubectl describe pod`` says the same in its header (``Name: trainer-worker-1`` ... ``Node:
gpu-node-17/10.42.19.203``) and in its Scheduled event (``Successfully assigned ns/trainer-worker-1
to gpu-node-17``). A pod not yet placed shows ``<none>``: it ran nowhere, so it names no node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem

KIND = "kubectl_pods"

#: ``get pods -o wide``'s header: NAME ... IP NODE (the columns between vary with the kubectl version).
_HEADER = re.compile(r"^(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\b")
_NAME = r"[a-z0-9][a-z0-9.-]*"
_DESCRIBE_NAME = re.compile(rf"^Name:\s+(?P<pod>{_NAME})\s*$")
_DESCRIBE_NODE = re.compile(rf"^Node:\s+(?P<node>{_NAME})(?:/(?P<ip>[\d.]+))?\s*$")
_DESCRIBE_NAMESPACE = re.compile(r"^Namespace:\s+\S+\s*$", re.M)
_ASSIGNED = re.compile(rf"\bSuccessfully assigned (?:(?P<ns>{_NAME})/)?(?P<pod>{_NAME}) to (?P<node>{_NAME})\s*$")
#: How many lines of a file's head are searched for the listing's header (a prompt line and a blank line before it).
HEAD_LINES = 10


@dataclass
class PodPlacement:
    """One pod and the node it ran on (``node`` None when it was never placed)."""

    pod: str
    node: str | None
    namespace: str | None = None
    pod_ip: str | None = None
    status: str | None = None
    line: int | None = None


def looks_like(head: str) -> bool:
    lines = head.splitlines()[:HEAD_LINES]
    if any(_HEADER.match(line) for line in lines):
        return True
    return any(_DESCRIBE_NAME.match(line) for line in lines) and bool(_DESCRIBE_NAMESPACE.search(head))


def _node(cell: str) -> str | None:
    return None if cell in ("<none>", "<unknown>") else cell


def parse(text: str, source: str = "<text>") -> ParseResult[PodPlacement]:
    result: ParseResult[PodPlacement] = ParseResult(KIND)
    columns: list[str] | None = None
    described: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if _HEADER.match(line):
            # the columns up to NODE are one word each (NOMINATED NODE, READINESS GATES come after it)
            columns = line.split()[:line.split().index("NODE") + 1]
            continue
        if columns is not None:
            cells = line.split()
            if len(cells) >= len(columns) and re.fullmatch(_NAME, cells[columns.index("NAME")]):
                row = dict(zip(columns, cells[:len(columns)], strict=True))
                result.records.append(PodPlacement(row["NAME"], _node(row["NODE"]), row.get("NAMESPACE"),
                                                   _node(row["IP"]), row["STATUS"], number))
                continue
            columns = None  # the table ended (a prompt, a blank line, another command's output)
        if (m := _DESCRIBE_NAME.match(line)) is not None:
            described = m["pod"]
        elif (m := _DESCRIBE_NODE.match(line)) is not None and described:
            result.records.append(PodPlacement(described, m["node"], line=number))
            described = None
        elif (m := _ASSIGNED.search(line)) is not None:
            result.records.append(PodPlacement(m["pod"], m["node"], m["ns"], line=number))
    if not result.records:
        result.problems.append(Problem(source, "no pod placement read (expected `kubectl get pods -o wide` or "
                                               "`kubectl describe pod` output)"))
    return result
