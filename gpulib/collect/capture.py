"""``collect()``: freeze the scene of this host into one evidence bundle.

Where the bundle goes (the fan-out rule, so that 128 nodes can write into one shared folder):

* ``--out DIR/%h`` → ``%h`` becomes this host's name: ``DIR/node-a``.
* ``--out DIR`` where DIR is an existing folder that is not itself a bundle → ``DIR/<host>``.
* ``--out DIR`` where DIR does not exist → DIR is the bundle.

A bundle is never overwritten: it is written under a hidden temporary name next to its final
name and renamed in one step when complete. Of two captures racing for the same name, exactly
one rename succeeds; the other stops with an error and keeps its data under the temporary name.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from gpulib.collect import bmc, commands, files, nvml
from gpulib.collect.bugreport import bug_report_collector
from gpulib.collect.core import Collector, run_collectors
from gpulib.collect.filesystems import filesystems_collector
from gpulib.collect.prometheus import PrometheusQuery, prometheus_collector
from gpulib.collect.slurm import slurm_job_collector
from gpulib.errors import BundleError, InputError
from gpulib.evidence.bundle import Bundle, BundleWriter, is_bundle

HOST_PLACEHOLDER = "%h"


def this_host() -> str:
    """The name NCCL prints in its ``host:pid:tid`` prefixes and the journal in its host field."""
    return socket.gethostname()


def bundle_path(out: str | Path, host: str) -> Path:
    """Apply the fan-out rule above to ``--out``."""
    text = str(out)
    if HOST_PLACEHOLDER in text:
        return Path(text.replace(HOST_PLACEHOLDER, host))
    path = Path(text)
    if is_bundle(path):
        raise BundleError("bundle already exists", path=str(path), hint="bundles are never overwritten; pick a new --out")
    if path.is_dir():
        return path / host
    return path


def plan(logs: list[Path], checkpoints: Path | None, sample_seconds: int, prev_boot: bool,
         prometheus: PrometheusQuery | None, log_cap_bytes: int, data: list[Path] = (),
         sel_entries: int = bmc.SEL_ENTRIES, bug_report: bool = False, slurm_job: str | None = None,
         host: str | None = None) -> list[Collector]:
    """The collectors of one capture, in the order the manifest lists them."""
    collectors = [nvml.snapshot_collector()]
    if sample_seconds > 0:
        collectors.append(nvml.sampling_collector(sample_seconds))
    collectors += commands.nvidia_smi_collectors() + commands.host_collectors(prev_boot)
    collectors += bmc.bmc_collectors(sel_entries)
    collectors.append(filesystems_collector([*data, *([checkpoints] if checkpoints is not None else [])]))
    if bug_report:
        collectors.append(bug_report_collector())
    if logs:
        collectors.append(files.logs_collector(logs, log_cap_bytes))
    if checkpoints is not None:
        collectors.append(files.checkpoint_listing_collector(checkpoints))
    if prometheus is not None:
        collectors.append(prometheus_collector(prometheus))
    if slurm_job:
        # Slurm's name for this node (inside a job step or the epilog), else the bundle's host name
        collectors.append(slurm_job_collector(slurm_job, os.environ.get("SLURMD_NODENAME") or host))
    return collectors


def collect(out: str | Path, logs: list[str | Path] = (), checkpoints: str | Path | None = None, sample_seconds: int = 0,
            prev_boot: bool = False, prometheus: PrometheusQuery | None = None, timeout_scale: float = 1.0,
            host: str | None = None, log_cap_bytes: int = files.LOG_CAP_BYTES,
            collector_timeouts: dict[str, float] | None = None, only: list[str] | None = None,
            command_line: list[str] | None = None, data: list[str | Path] = (), sel_entries: int = bmc.SEL_ENTRIES,
            bug_report: bool = False, slurm_job: str | None = None) -> Path:
    """Capture this host into a bundle and return its path.

    ``prometheus`` says which DCGM metrics to pull for which window; ``timeout_scale`` multiplies
    every collector's timeout (raise it on a node known to be slow); ``collector_timeouts``
    sets single ones in seconds (``{"ipmitool-sdr": 120}`` for a BMC that answers slowly);
    ``only`` keeps just the named collectors (``["prometheus"]`` to pull DCGM history from anywhere);
    ``data`` names dataset folders whose file systems are measured beside ``/dev/shm`` and the
    checkpoints; ``sel_entries`` how many newest BMC SEL entries to keep; ``bug_report`` also runs
    ``nvidia-bug-report.sh`` (minutes); ``slurm_job`` adds Slurm's record of that job
    (``scontrol show job -d``, ``sacct``, ``sinfo -R``, this node's ``scontrol show node``).
    """
    host = host or this_host()
    collectors = plan([Path(p) for p in logs], Path(checkpoints) if checkpoints is not None else None,
                      sample_seconds, prev_boot, prometheus, log_cap_bytes, data=[Path(p) for p in data],
                      sel_entries=sel_entries, bug_report=bug_report, slurm_job=slurm_job, host=host)
    by_name = {c.name: c for c in collectors}
    for name in [*(collector_timeouts or {}), *(only or [])]:
        if name not in by_name:
            raise InputError(f"no collector named {name!r} in this capture", hint=f"one of: {', '.join(by_name)}")
    for name, seconds in (collector_timeouts or {}).items():
        by_name[name].timeout_s = seconds
    if only:
        collectors = [c for c in collectors if c.name in only]
    writer = BundleWriter(bundle_path(out, host), host=host,
                          command_line=command_line if command_line is not None else list(sys.argv))
    provenance = run_collectors(writer, collectors, timeout_scale)
    writer.write_json("commands.json", provenance)
    return writer.finish()


def summary_lines(root: str | Path) -> list[str]:
    """What an operator reads after a capture: each collector's status and reason, and, when
    NVML answered, one line per GPU."""
    bundle = Bundle.open(root)
    lines = [f"bundle {bundle.root} (host {bundle.host}, {len(bundle.manifest.get('files', {}))} files)"]
    for c in bundle.collectors:
        lines.append(f"  {c.name:<22} {c.status:<11} {c.seconds:6.1f} s  {c.reason or ''}".rstrip())
    snapshot_path = bundle.root / "nvml" / "snapshot.json"
    if snapshot_path.is_file():
        doc = json.loads(snapshot_path.read_text())
        lines.append(f"  driver {doc.get('driver_version')}, CUDA {doc.get('cuda_driver_version')}, "
                     f"{doc.get('gpu_count')} GPU(s)")
        for gpu in doc.get("gpus", []):
            if gpu.get("lost"):
                lines.append(f"  GPU {gpu['index']}: UNREADABLE ({gpu.get('lost_reason')})")
                continue
            reasons = ",".join(gpu.get("throttle_reasons") or []) or "none"
            lines.append(f"  GPU {gpu['index']} {gpu.get('name')} {gpu.get('pci_bus_id')}: {gpu.get('temp_c')} C, "
                         f"SM {gpu.get('sm_clock_mhz')}/{gpu.get('sm_clock_max_mhz')} MHz, "
                         f"{gpu.get('power_draw_w')}/{gpu.get('power_limit_w')} W, throttle: {reasons}")
    return lines
