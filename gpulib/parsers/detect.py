"""Which parser reads a file, and which host it came from - decided from its content.

Engineers hand over folders as they have them (``slurm-88231.out``, ``node-b/kern.log``,
``nvsmi.xml``, ``gpu_stats.csv``): names lie or say nothing, contents do not. Every parser module
in :mod:`gpulib.parsers` declares ``KIND`` and a cheap ``looks_like(head)``; this module asks
them all, in an order where specific formats win over broad ones (an nccl-tests output also
holds ``NCCL INFO`` lines, so it must be tried before the generic training log). Only when no
parser recognises the content does the file name decide.

The host comes from the content where the file names it (NCCL ``host:pid:tid`` prefixes, the
journal host field, a ChildFailedError ``host :`` line, a pdsh prefix); the caller falls back to
the nearest folder name.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import re
from collections import Counter
from functools import lru_cache
from types import ModuleType

import gpulib.parsers as _package

log = logging.getLogger(__name__)

#: Specific formats first, broad ones last. Kinds not listed are tried after these, before
#: the two catch-all log kinds.
PRIORITY = (
    "nvml_snapshot", "nvml_samples", "nvidia_smi_xml", "flight_recorder", "torchrun_error_file", "nvidia_smi_q", "nvidia_smi_csv",
    "nvidia_smi_dmon", "nvidia_smi_table", "nvidia_smi_topo", "nvidia_smi_nvlink", "dcgmi_diag",
    "slurm_sinfo", "fuser", "ibstat", "ibstatus", "ipmitool_sdr", "dcgm_exporter", "nccl_tests",
)
CATCH_ALL = ("training_log", "kernel_log")

_NAME_HINTS = (
    (re.compile(r"dmesg|kern|journal|syslog|messages", re.I), "kernel_log"),
    (re.compile(r"slurm-\d+|\.out$|train|rank|torchrun|console", re.I), "training_log"),
)
_NCCL_HOST = re.compile(r"(?m)^(?:\S+: |\[[^\]]*\] )?(?P<host>[A-Za-z][\w.-]*):\d+:\d+ \[\d+\] (?:\S+ )?NCCL ")
_JOURNAL_HOST = re.compile(
    r"(?m)^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) (?P<host>[A-Za-z][\w.-]*) "
    r"(?:kernel|systemd|nhc|slurmd|CRON|sshd|nvidia|rsyslogd|chronyd)[\w-]*(?:\[\d+\])?:")
_CFE_HOST = re.compile(r"(?m)^\s+host\s+: (?P<host>[A-Za-z][\w.-]*)\s*$")
_NVSMI_HOST = re.compile(r"(?m)^(?:Hostname|Host Name)\s*:\s*(?P<host>[A-Za-z][\w.-]*)\s*$")


@lru_cache(maxsize=1)
def parser_modules() -> dict[str, ModuleType]:
    """Every module of :mod:`gpulib.parsers` that follows the parser protocol, by KIND."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(_package.__path__):
        if info.name in ("detect", "base"):
            continue
        try:
            module = importlib.import_module(f"{_package.__name__}.{info.name}")
        except Exception:  # noqa: BLE001 - one broken parser must not stop detection of the others
            log.warning("parser module %s cannot be imported; its files go unrecognised", info.name, exc_info=True)
            continue
        kind = getattr(module, "KIND", None)
        if isinstance(kind, str) and callable(getattr(module, "looks_like", None)) and callable(
                getattr(module, "parse", None)):
            found.setdefault(kind, module)
    return found


@lru_cache(maxsize=1)
def _ordered_kinds() -> tuple[str, ...]:
    kinds = parser_modules()
    ordered = [k for k in PRIORITY if k in kinds]
    ordered += sorted(k for k in kinds if k not in PRIORITY and k not in CATCH_ALL)
    ordered += [k for k in CATCH_ALL if k in kinds]
    return tuple(ordered)


def detect_kind(name: str, head: str = "", head_bytes: bytes = b"") -> str | None:
    """The kind of a file from the head of its content (the caller reads the first 8 KiB) (``head``; ``head_bytes`` for binary
    formats such as flight-recorder pickles), else from its ``name``; None when unknown."""
    modules = parser_modules()
    if head_bytes and "flight_recorder" in modules:
        fr = modules["flight_recorder"]
        if fr.looks_like_bytes(head_bytes):
            return "flight_recorder"
    if head.strip():
        for kind in _ordered_kinds():
            try:
                if modules[kind].looks_like(head):
                    return kind
            except Exception:  # noqa: BLE001 - a looks_like bug is a miss, not a crash
                log.debug("%s.looks_like failed on %s", kind, name, exc_info=True)
                continue
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    for pattern, kind in _NAME_HINTS:
        if pattern.search(base) and kind in modules and head.strip():
            return kind
    return None


def host_from_content(head: str) -> str | None:
    """The host a file names, when it names exactly one (NCCL prefixes, journal, torchrun report)."""
    for pattern in (_JOURNAL_HOST, _NVSMI_HOST, _NCCL_HOST, _CFE_HOST):
        hosts = Counter(m["host"] for m in pattern.finditer(head))
        if len(hosts) == 1:
            return next(iter(hosts))
        if hosts:
            return None  # a multi-node file: its lines carry their own hosts
    return None
