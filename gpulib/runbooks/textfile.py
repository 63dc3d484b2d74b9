"""A runbook's verdict as Prometheus metrics for node_exporter's textfile collector.

Why: a nightly health report or a preflight that says "no-go" reaches nobody unless someone
opens the archive. node_exporter (``--collector.textfile.directory=DIR``) exposes every
``DIR/*.prom`` file with the node's other metrics, so the cluster's Prometheus alerts on it with
its usual routing (``monitoring/prometheus/alerts.yml``, group ``gpulib-textfile``).

``gpulib run preflight|health-report --textfile DIR`` writes ``DIR/gpulib.prom``:

* ``gpulib_runbook_last_run_timestamp_seconds{runbook,host}`` - when the run ended (a nightly
  report that stopped running is an alert too);
* ``gpulib_runbook_exit_code`` and ``gpulib_runbook_steps_failed`` - the run's exit code, and how
  many notebooks did not complete (their findings are missing);
* ``gpulib_runbook_findings{runbook,host,severity,category}`` - findings by severity and category,
  every pair of the vocabulary present (0 when none: absent and healthy are not the same);
* ``gpulib_gpu_health{runbook,host,gpu,uuid}`` - per GPU (its index, else its PCI id), the worst
  finding on it: 0 ok, 1 warning, 2 error, 3 critical.

One file holds every runbook: a run replaces its own series (label ``runbook``) and keeps the
others'. The file is written to a temporary name and renamed (node_exporter never reads half a
file), under a lock so two runs finishing together do not drop each other's series.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from gpulib.errors import InputError
from gpulib.vocabulary import CATEGORIES, SEVERITIES

FILE_NAME = "gpulib.prom"
#: gpulib_gpu_health values.
HEALTH = {"ok": 0, "info": 0, "warning": 1, "error": 2, "critical": 3}

_HELP = {
    "gpulib_runbook_last_run_timestamp_seconds": ("gauge", "Unix time when this runbook's last run ended."),
    "gpulib_runbook_exit_code": ("gauge", "Exit code of the runbook's last run (see gpulib run --help)."),
    "gpulib_runbook_steps_failed": ("gauge", "Notebooks of the last run that did not complete (findings missing)."),
    "gpulib_runbook_findings": ("gauge", "Findings of the last run, by severity and category."),
    "gpulib_gpu_health": ("gauge", "Worst finding on this GPU in the last run: 0 ok, 1 warning, 2 error, 3 critical."),
}


def check_directory(directory: str | Path) -> Path:
    """The textfile directory, or an InputError before a long run starts."""
    path = Path(directory)
    if not path.is_dir():
        raise InputError("not a folder", path=str(path),
                         hint="give node_exporter's --collector.textfile.directory (it must exist)")
    return path


def gpu_health(findings: Iterable[dict]) -> dict[tuple[str, str, str], int]:
    """(host, gpu, uuid) -> worst finding on it; ``gpu`` is the inventory's index, else the PCI id
    (a kernel Xid names the bus; an index it prints is the driver's own numbering). GPUs of a health report's
    inventory (``gpus`` of the
    ``gpu-inventory`` finding) start at 0, and a lost one counts as critical."""
    health: dict[tuple[str, str, str], int] = {}
    known: dict[tuple[str, str], tuple[str, str, str]] = {}  # (host, index or pci) -> inventory key
    findings = list(findings)
    for f in findings:
        for gpu in f.get("gpus") or []:
            host = str(gpu.get("host") or "")
            label = str(gpu["index"]) if gpu.get("index") is not None else str(gpu.get("pci_bus_id") or "")
            key = (host, label, str(gpu.get("uuid") or ""))
            known[(host, label)] = key
            if gpu.get("pci_bus_id"):
                known[(host, str(gpu["pci_bus_id"]))] = key
            health[key] = max(health.get(key, 0), HEALTH["critical"] if gpu.get("lost") else 0)
    for f in findings:
        host = str(f.get("host") or "")
        index, pci = f.get("gpu_index"), f.get("gpu_pci") or f.get("pci_bus_id")
        if index is None and not pci:
            continue
        key = known.get((host, str(index))) if index is not None else None
        # a GPU outside the inventory is named by what survives renumbering: its PCI id, else its index
        key = key or (known.get((host, str(pci))) if pci else None) or (host, str(pci) if pci else str(index), "")
        health[key] = max(health.get(key, 0), HEALTH.get(f.get("severity"), 0))
    return health


def _run_metrics(runbook: str, host: str, findings: list[dict], exit_code: int, steps_failed: int,
                 finished_unix_s: float) -> dict[str, list[tuple[dict, float]]]:
    base = {"runbook": runbook, "host": host}
    counts = {(s, c): 0 for s in SEVERITIES for c in CATEGORIES}
    for f in findings:
        key = (f.get("severity"), f.get("category"))
        if key in counts:
            counts[key] += 1
    return {
        "gpulib_runbook_last_run_timestamp_seconds": [(base, finished_unix_s)],
        "gpulib_runbook_exit_code": [(base, exit_code)],
        "gpulib_runbook_steps_failed": [(base, steps_failed)],
        "gpulib_runbook_findings": [({**base, "severity": s, "category": c}, n) for (s, c), n in counts.items()],
        "gpulib_gpu_health": [({**base, "host": h or host, "gpu": g, "uuid": u}, v)
                              for (h, g, u), v in sorted(gpu_health(findings).items())],
    }


def _kept(path: Path, runbook: str) -> dict[str, list[tuple[dict, float]]]:
    """The other runbooks' series of an existing file (an unreadable file is started afresh)."""
    kept: dict[str, list[tuple[dict, float]]] = {}
    try:
        families = list(text_string_to_metric_families(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return kept
    for family in families:
        for sample in family.samples:
            if sample.name in _HELP and sample.labels.get("runbook") != runbook:
                kept.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return kept


class _Families(Collector):
    def __init__(self, series: dict[str, list[tuple[dict, float]]]) -> None:
        self.series = series

    def collect(self):
        for name, (kind, help_text) in _HELP.items():
            metric = Metric(name, help_text, kind)
            for labels, value in self.series.get(name, []):
                metric.add_sample(name, labels, float(value))
            yield metric


def write(directory: str | Path, runbook: str, host: str, findings: list[dict], exit_code: int,
          steps_failed: int = 0, finished_unix_s: float | None = None) -> Path:
    """Replace ``runbook``'s series in ``DIR/gpulib.prom`` (atomic rename); returns the file."""
    folder = check_directory(directory)
    target = folder / FILE_NAME
    new = _run_metrics(runbook, host, findings, exit_code, steps_failed,
                       time.time() if finished_unix_s is None else finished_unix_s)
    with open(folder / f".{FILE_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        series = _kept(target, runbook)
        for name, rows in new.items():
            series.setdefault(name, []).extend(rows)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(series))
        write_to_textfile(str(target), registry)  # writes a temporary file beside it, then os.replace
    target.chmod(0o644)  # node_exporter usually runs as its own user
    return target
