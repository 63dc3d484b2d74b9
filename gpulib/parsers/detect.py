"""Which parser reads a file, and which host it came from - decided from its content.

Engineers hand over folders as they have them (``slurm-88231.out``, ``node-b/kern.log``,
``nvsmi.xml``, ``gpu_stats.csv``): names lie or say nothing, contents do not. Every parser of
:data:`gpulib.parsers.registry.SPECS` has a cheap ``looks_like(head)``; this module asks them in
the registry's order, where specific formats win over broad ones (an nccl-tests output also
holds ``NCCL INFO`` lines, so it must be tried before the generic training log). Only when no
parser recognises the content does the file name decide.

The host comes from the content where the file names it (NCCL ``host:pid:tid`` prefixes, the
journal host field, a ChildFailedError ``host :`` line, a pdsh prefix); the caller falls back to
the nearest folder name.
"""

from __future__ import annotations

import re
from collections import Counter

from gpulib.logs import get_logger
from gpulib.parsers import registry

log = get_logger(__name__)


_NAME_HINTS = (
    (re.compile(r"dmesg|kern|journal|syslog|messages", re.I), "kernel_log"),
    (re.compile(r"slurm-\d+|train|rank|torchrun|console", re.I), "training_log"),
)
_NCCL_HOST = re.compile(r"(?m)^(?:\S+: |\[[^\]]*\] )?(?P<host>[A-Za-z][\w.-]*):\d+:\d+ \[\d+\] (?:\S+ )?NCCL ")
_JOURNAL_HOST = re.compile(
    r"(?m)^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) (?P<host>[A-Za-z][\w.-]*) "
    r"(?:kernel|systemd|nhc|slurmd|CRON|sshd|nvidia|rsyslogd|chronyd)[\w-]*(?:\[\d+\])?:")
#: torchrun's ChildFailedError report (``  host      : node7``), also when pasted as a markdown quote.
_CFE_HOST = re.compile(r"(?m)^(?:[ ]{0,3}>[ ]?)*\s+host\s+: (?P<host>[A-Za-z][\w.-]*)\s*$")
#: ``kubectl describe pod``: ``Node:         gke-pool-3c1f-v7kd/10.128.0.41`` (the node the pod ran on).
_K8S_NODE = re.compile(r"(?m)^(?:[ ]{0,3}>[ ]?)*Node:\s+(?P<host>[A-Za-z][\w.-]*)/\d{1,3}(?:\.\d{1,3}){3}\s*$")
_NVSMI_HOST = re.compile(r"(?m)^(?:Hostname|Host Name)\s*:\s*(?P<host>[A-Za-z][\w.-]*)\s*$")


def detect_kind(name: str, head: str = "", head_bytes: bytes = b"") -> str | None:
    """The kind of a file from the head of its content (the caller reads the first 8 KiB) (``head``; ``head_bytes`` for binary
    formats such as flight-recorder pickles), else from its ``name``; None when unknown."""
    if head_bytes and registry.looks_like_bytes(head_bytes):
        return "flight_recorder"
    if head.strip():
        for spec in registry.SPECS:
            try:
                if spec.looks_like(head):
                    return spec.kind
            except Exception:  # noqa: BLE001 - a looks_like bug is a miss, not a crash
                log.debug("%s.looks_like failed on %s", spec.kind, name, exc_info=True)
                continue
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    for pattern, kind in _NAME_HINTS:
        if pattern.search(base) and head.strip():
            return kind
    return None


#: A literal every match of each host pattern holds: a pattern whose literals are all absent is not
#: run (each multi-line search costs ~50 us on an 8 KiB head, and every file's head is read).
_HOST_WORDS = ((_JOURNAL_HOST, (" kernel", " systemd", " nhc", " slurmd", " CRON", " sshd", " nvidia", " rsyslogd",
                                 " chronyd")),
               (_NVSMI_HOST, ("Hostname", "Host Name")), (_K8S_NODE, ("Node:",)), (_NCCL_HOST, ("NCCL ",)),
               (_CFE_HOST, ("host",)))


def host_from_content(head: str) -> str | None:
    """The host a file names, when it names exactly one (NCCL prefixes, journal, torchrun report)."""
    for pattern, words in _HOST_WORDS:
        if not any(word in head for word in words):
            continue
        hosts = Counter(m["host"] for m in pattern.finditer(head))
        if len(hosts) == 1:
            return next(iter(hosts))
        if hosts:
            return None  # a multi-node file: its lines carry their own hosts
    return None
