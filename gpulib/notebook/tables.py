"""Evidence as tables for the runbook notebooks.

:func:`open_evidence` resolves the notebooks' ``evidence`` parameter (absolute, or relative to
the current directory, the repository or ``notebooks/``, so a notebook runs the same from
JupyterLab, papermill's ``cwd`` or a scheduler) and returns an :class:`EvidenceTables`: the diagnosis
plus every parsed record as a :class:`pandas.DataFrame` in the column layout the figure builders
of :mod:`gpulib.notebook.figures` and the checks of :mod:`gpulib.notebook.steps` expect:

- ``time`` (UTC ``Timestamp`` or NaT), ``host``, ``gpu`` (index as text, else the PCI id),
  ``gpu_index``, ``pci_bus_id``, and ``file``/``line``/``text`` pointing at the line it was read from.

Nothing here runs a command on the machine; analysis reads files only. Under ``gpulib run``
the evidence is read once for all steps (:mod:`gpulib.diagnose.cache`); a notebook opened by
hand reads it itself.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import fields
from functools import cached_property, lru_cache
from itertools import islice
from pathlib import Path

import pandas as pd

from gpulib import kernel_env
from gpulib.catalog import xid_info
from gpulib.checkpoints.latest import find_latest
from gpulib.diagnose.cache import SNAPSHOT_KINDS, Evidence, EvidenceFiles, checked_evidence
from gpulib.diagnose.cache import resolve_evidence as resolve_evidence  # the notebooks' and tests' name for it
from gpulib.diagnose.rules.sel import place_on_utc, power_losses
from gpulib.evidence import kinds
from gpulib.evidence.bundle import Bundle, is_bundle
from gpulib.evidence.thresholds import Thresholds
from gpulib.findings import gpu_name
from gpulib.identity import normalize_pci
from gpulib.nccl import thresholds
from gpulib.nccl.parsed import summarize_run
from gpulib.notebook.palette import GpuPalette
from gpulib.parsers import nccl_tests
from gpulib.parsers.base import read_text
from gpulib.parsers.fold import Members
from gpulib.parsers.gpu_records import SLOWDOWN_REASONS
from gpulib.parsers.ipmi_sel import SelEvent
from gpulib.parsers.training_log import JobEvent, members_of
from gpulib.preflight.gate import gpu_label

#: The bundled example incident the notebooks analyse by default.
DEFAULT_EVIDENCE = "examples/incident-gpu-fell-off-bus"


def open_evidence(evidence: str | Path, tz: str | None = None) -> EvidenceTables:
    """Resolve and sanity-check the evidence path (never a traceback for a typo or an empty folder).
    ``tz``: the zone of timestamps printed without one, as ``gpulib diagnose --tz`` takes it; default
    ``gpulib run --tz`` (:data:`gpulib.kernel_env.TZ`), else the bundle's zone or UTC."""
    return EvidenceTables(checked_evidence(evidence), tz if tz is not None else os.environ.get(kernel_env.TZ) or None)


def _utc(series: pd.Series) -> pd.Series:
    return pd.to_datetime(series, utc=True, errors="coerce", format="ISO8601")


def _gpu_label(frame: pd.DataFrame, index_col: str = "index") -> pd.Series:
    index = frame[index_col] if index_col in frame.columns else pd.Series(None, index=frame.index, dtype=object)
    pci = frame["pci_bus_id"] if "pci_bus_id" in frame.columns else pd.Series(None, index=frame.index, dtype=object)
    return pd.Series([gpu_label(i if pd.notna(i) else None, p) for i, p in zip(index, pci, strict=True)],
                     index=frame.index, dtype=object)


class EvidenceTables:
    """One evidence path (bundle, incident folder of bundles and raw logs, or a single file)."""

    def __init__(self, path: Path, tz: str | None = None):
        self.path = path
        self.tz = tz
        self.evidence = Evidence(path, tz)  # read once per kernel; a slider re-judges it

    # ---------------------------------------------------------------- what is in it
    @property
    def diagnosis(self) -> dict:
        """The ``gpulib.diagnosis/1`` dict for the whole evidence path."""
        return self.evidence.diagnosis

    def diagnosis_at(self, **thresholds: float) -> dict:
        """The diagnosis judged with other thresholds (a notebook's slider: ``temp_limit_c=80``).

        The same rules run again with those numbers (:class:`gpulib.evidence.thresholds.Thresholds`)
        over the evidence already read (:meth:`gpulib.diagnose.cache.Evidence.judge`: no file is
        opened again), so a step shows what the diagnosis would say, never a second opinion of its
        own. With the default thresholds this is :attr:`diagnosis` (read once per runbook run)."""
        return self.evidence.judge(Thresholds.of(**thresholds))

    @property
    def gathered(self) -> EvidenceFiles:
        """Every file walked, detected, parsed (records as dicts) and assigned a host."""
        return self.evidence.files

    def inputs(self) -> pd.DataFrame:
        """Each file read, as what kind, for which host (and how that was decided), and its problems."""
        rows = [{"file": f.display, "kind": f.kind, "host": f.host, "host_from": f.host_basis,
                 "records": len(f.records), "problems": "; ".join(f.problems[:3]) or None}
                for f in self.gathered.files]
        return pd.DataFrame(rows, columns=["file", "kind", "host", "host_from", "records", "problems"])

    def describe_markdown(self) -> str:
        kind = "evidence bundle" if is_bundle(self.path) else ("folder" if self.path.is_dir() else "file")
        files = self.gathered.files
        known = sum(1 for f in files if f.records)
        return f"Evidence: `{self.path}` ({kind}, {len(files)} files, {known} with readable records)"

    def _rows(self, kind: str) -> list[dict]:
        """Records (as new dicts) of every file of ``kind``; ``host`` falls back to the file's host,
        ``file`` is the path relative to the evidence."""
        return [{**record, "host": record.get("host") or f.host, "file": self._rel(f.path)}
                for f in self.gathered.of_kind(kind) for record in f.records]

    def _rel(self, path: Path) -> str:
        base = self.path if self.path.is_dir() else self.path.parent
        try:
            return str(path.relative_to(base))
        except ValueError:
            return str(path)

    # ---------------------------------------------------------------- tables
    def kernel_events(self) -> pd.DataFrame:
        """Kernel events with the Xid catalog's meaning, interruption class and action."""
        return self._named(self._kernel_events())

    def _named(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with a ``gpu_name`` column: the GPU's one name in every table, figure and picker
        (:meth:`gpu_palette`: PCI id and the index as seen at capture, the job's index where it differs)."""
        frame["gpu_name"] = self._palette.gpu_names(frame) if len(frame) else pd.Series(dtype=object)
        return frame

    def _kernel_events(self) -> pd.DataFrame:
        rows = self._rows(kinds.KERNEL_LOG)
        for row in rows:
            info = xid_info(row["xid"]) if row.get("xid") is not None else None
            row.update({"name": info.name if info else None, "interruption": info.interruption if info else None,
                        "category": info.category if info else None, "action": info.action if info else None})
        columns = ["time", "host", "gpu", "gpu_index", "pci_bus_id", "kind", "xid", "name", "interruption",
                   "category", "action", "pid", "process", "text", "file", "line"]
        if not rows:
            return pd.DataFrame(columns=columns)
        frame = pd.DataFrame(rows)
        frame["time"] = _utc(frame["time_utc"])
        frame["gpu_index"] = self._gpu_index_for(frame)
        frame["gpu"] = [str(int(i)) if pd.notna(i) else p for i, p in zip(frame["gpu_index"], frame["pci_bus_id"],
                                                                              strict=True)]
        return frame.reindex(columns=columns)

    def _gpu_index_for(self, frame: pd.DataFrame) -> pd.Series:
        """Kernel lines name GPUs by PCI id; snapshots map (host, PCI) to the nvidia-smi index."""
        states = self._states
        mapping = {}
        if not states.empty:
            for _, s in states.dropna(subset=["pci_bus_id", "gpu_index"]).iterrows():
                mapping[(s["host"], s["pci_bus_id"])] = int(s["gpu_index"])
                mapping.setdefault((None, s["pci_bus_id"]), int(s["gpu_index"]))
        return pd.Series([mapping.get((h, p), mapping.get((None, p))) for h, p in
                          zip(frame["host"], frame["pci_bus_id"], strict=True)], index=frame.index, dtype=object)

    @cached_property
    def _states(self) -> pd.DataFrame:
        # CSV time series rows are samples, not snapshots: only records with "lost" are states
        rows = [row for kind in SNAPSHOT_KINDS for row in self._rows(kind) if "lost" in row]
        if not rows:
            return pd.DataFrame(columns=["time", "host", "gpu", "gpu_index", "pci_bus_id", "mem_used_mib",
                                         "mem_total_mib", "processes", "throttle_reasons", "file", "line", "text"])
        frame = pd.DataFrame(rows)
        frame["time"] = _utc(frame["captured_at"])
        frame["gpu_index"] = frame["index"]
        frame["gpu"] = _gpu_label(frame)
        frame["text"] = [_state_text(r) for _, r in frame.iterrows()]
        return frame

    def gpu_states(self) -> pd.DataFrame:
        """One row per GPU per snapshot (nvidia-smi -q / -q -x / table / CSV snapshot)."""
        return self._named(self._states.copy())

    def gpu_samples(self) -> pd.DataFrame:
        """GPU time series (CSV sampling, dmon, NVML sampling), one row per GPU per sample."""
        return self._named(self._gpu_samples())

    def _gpu_samples(self) -> pd.DataFrame:
        rows = [row for kind in (kinds.NVIDIA_SMI_CSV, kinds.NVIDIA_SMI_DMON) for row in self._rows(kind) if "lost" not in row]
        if not rows:
            return pd.DataFrame(columns=["time", "host", "gpu", "gpu_index", "pci_bus_id", "temp_c", "sm_clock_mhz",
                                         "sm_clock_max_mhz", "power_draw_w", "throttle_reasons", "file", "line"])
        frame = pd.DataFrame(rows)
        for column in ("temp_c", "sm_clock_mhz", "sm_clock_max_mhz", "power_draw_w", "throttle_reasons"):
            if column not in frame:  # a sampling without that field (e.g. no clocks queried): empty, not a KeyError
                frame[column] = None
        frame["time"] = _utc(frame["time_utc"])
        frame["gpu_index"] = frame["index"]
        frame["gpu"] = _gpu_label(frame)
        frame["text"] = [f"{r['time_utc']} gpu {r['gpu']}: {r['temp_c']} C, SM {r['sm_clock_mhz']} MHz, "
                         f"reasons {','.join(r['throttle_reasons'] or []) or '-'}" for _, r in frame.iterrows()]
        return frame

    def job_events(self) -> pd.DataFrame:
        """Training/launcher log events (NCCL init and transport, timeouts, errors, steps)."""
        rows = self._rows(kinds.TRAINING_LOG)
        frame = pd.DataFrame(rows, columns=["line", "kind", "text", "time_utc", "rank", "host", "pid",
                                            "local_device", "details", "folded", "file"])
        frame["time"] = _utc(frame["time_utc"])
        frame["rank"] = frame["rank"].astype("Int64")
        return frame

    def ranks(self) -> pd.DataFrame:
        """One row per rank: host, GPU, transport, NCCL version, first problem it reported."""
        return self._named(self._ranks())

    def _ranks(self) -> pd.DataFrame:
        events = self.job_events()
        init = events[events["kind"] == "nccl_init"] if not events.empty else events
        if init.empty:  # no NCCL init lines (NCCL_DEBUG was off): ranks cannot be placed
            return pd.DataFrame(columns=["rank", "host", "gpu_index", "pci_bus_id", "transport", "first_problem"])
        rows: dict[int, dict] = {}
        for ev in init.itertuples():
            for m in members_of(JobEvent(ev.line, ev.kind, ev.text, rank=ev.rank, host=ev.host, pid=ev.pid,
                                         local_device=ev.local_device, details=ev.details, folded=ev.folded)):
                rows.setdefault(int(m["rank"]), {"rank": int(m["rank"]), "host": m["host"], "gpu_index": m["cuda_dev"],
                                                 "pci_bus_id": m["pci_bus_id"], "nranks": ev.details.get("nranks"),
                                                 "pid": m["pid"]})
        transport = {}
        for _, e in events[events["kind"].isin(["nccl_transport", "nccl_no_ib"])].iterrows():
            net = e["details"].get("network") if e["kind"] == "nccl_transport" else "Socket (no IB device)"
            transport[(e["host"], e["pid"])] = net if (e["host"], e["pid"]) not in transport else transport[
                (e["host"], e["pid"])]
        versions = {e["host"]: e["details"].get("version") for _, e in events[events["kind"] == "nccl_version"].iterrows()}
        first: dict[int, tuple] = {}
        for e in _problems(events).sort_values("time", kind="stable").itertuples():
            first.setdefault(int(e.rank), (f"{e.kind}: {e.text[:500]}", e.time))  # tables cut at a word, not here
        for rank, row in rows.items():
            row["transport"] = transport.get((row["host"], row["pid"]))
            row["nccl_version"] = versions.get(row["host"])
            row["first_problem"], row["first_problem_time"] = first.get(rank, (None, pd.NaT))
        frame = pd.DataFrame(sorted(rows.values(), key=lambda r: r["rank"]))
        return frame.astype({"pid": "Int64", "gpu_index": "Int64", "nranks": "Int64"})

    def rank_events(self) -> pd.DataFrame:
        """Per-rank problem events (timeouts, errors, OOM, aborts) for the rank plot."""
        return _problems(self.job_events()).reset_index(drop=True)

    def training_steps(self) -> pd.DataFrame:
        """Step progress per rank: seconds per step (or the sum of the per-phase timings), the
        data-loading share when the log gives it, and the loss when printed."""
        events = self.job_events()
        steps = events[events["kind"] == "step"]
        rows = []
        for _, e in steps.iterrows():
            d = e["details"]
            metrics = d.get("metrics_ms") or {}
            step_s, measure = d.get("s_per_step"), "s/step"
            if step_s is None and metrics:  # per-phase timings: the rank's own work, without the wait
                step_s = sum(v for k, v in metrics.items() if k != "allreduce_wait_ms") / 1000
                measure = "compute+data"
            loss = d.get("loss")
            if loss is None:
                m = _LOSS.search(e["text"])
                loss = float(m["loss"]) if m else None
            rows.append({"time": e["time"], "host": e["host"], "rank": e["rank"], "step": d.get("step"),
                         "step_time_s": step_s, "measure": measure,
                         "data_s": metrics["data_ms"] / 1000 if "data_ms" in metrics else None,
                         "loss": loss, "file": e["file"], "line": e["line"], "text": e["text"]})
        return pd.DataFrame(rows, columns=["time", "host", "rank", "step", "step_time_s", "measure", "data_s", "loss",
                                           "file", "line", "text"])

    def topology(self) -> pd.DataFrame:
        """The GPU-to-GPU link matrix of the first ``nvidia-smi topo -m`` (rows/columns GPU0..N)."""
        for f in self.gathered.of_kind(kinds.NVIDIA_SMI_TOPO):
            gpus = [d for d in f.records if d.get("kind") == "gpu"]
            if gpus:
                names = [d["name"] for d in gpus]
                return pd.DataFrame([[d["links"].get(n, "X") for n in names] for d in gpus], index=names, columns=names)
        return pd.DataFrame()

    def software_versions(self) -> pd.DataFrame:
        """Per host: NVIDIA driver and the CUDA version it supports (nvidia-smi), the CUDA
        toolkit (``nvcc -V``), the CUDA PyTorch was built for, and NCCL, from snapshots, bundle
        version files and job logs."""
        hosts: dict[str | None, dict] = {}

        def put(host, key, value):
            if value:
                hosts.setdefault(host, {"host": host}).setdefault(key, str(value))

        for _, s in self.gpu_states().iterrows():
            put(s.get("host"), "driver", s.get("driver_version"))
            put(s.get("host"), "cuda_driver", s.get("cuda_version"))
        for f in self.gathered.files:
            if f.path.name == "python-stack.json":
                try:
                    stack = json.loads(read_text(f.path)[0])
                except ValueError:  # unreadable or empty: the problem is listed with the inputs
                    continue
                put(f.host, "torch", stack.get("torch"))
                put(f.host, "torch_cuda", stack.get("torch_cuda"))
            elif f.path.name == "nvcc.txt":
                m = _NVCC.search(read_text(f.path)[0])
                put(f.host, "nvcc", m["ver"] if m else None)
        events = self.job_events()
        for _, e in events.iterrows():
            if e["kind"] == "nccl_version":
                put(e["host"], "nccl", e["details"].get("version"))
            m = _TORCH.search(e["text"] or "")
            if m:
                put(e["host"], "torch", m["torch"])
                put(e["host"], "torch_cuda", f"{m['cu'][:-1]}.{m['cu'][-1]}" if m["cu"] else None)
        columns = ["host", "driver", "cuda_driver", "nvcc", "torch", "torch_cuda", "nccl"]
        return pd.DataFrame(list(hosts.values()), columns=columns)

    def checkpoints(self, checkpoint_dirs: str = ""):
        """``find_latest`` over the given folders (comma-separated), else over the checkpoint
        folders found in the evidence, else the evidence path itself."""
        roots = [resolve_evidence(p) for p in checkpoint_dirs.split(",") if p.strip()]
        roots = roots or self.gathered.checkpoint_dirs or [self.path]
        return find_latest(roots)

    def gpu_palette(self) -> GpuPalette:
        """One colour and name per GPU of this evidence (snapshots, samples, kernel events, and the
        job's own indices from NCCL's rank lines), and which were lost when: pass it to every figure
        so a GPU looks the same in each."""
        return self._palette

    @cached_property
    def _palette(self) -> GpuPalette:
        kernel = self._kernel_events()
        kernel = kernel[kernel["xid"].notna()]  # an AER line names the PCIe port above a GPU, not a GPU
        named = pd.DataFrame([{"host": f.get("host"), "pci_bus_id": f.get("gpu_pci"), "gpu_index": f.get("gpu_index")}
                              for f in self.diagnosis.get("findings") or [] if f.get("gpu_pci")],
                             columns=["host", "pci_bus_id", "gpu_index"])  # the index at failure (NCCL, nvidia-smi)
        return GpuPalette.from_frames(self._states, self._gpu_samples(), kernel, named, job=self._ranks())

    def timeline(self) -> pd.DataFrame:
        """The diagnosis timeline as a table (time, host, source, event, ``root_cause``: the
        event that is the diagnosis's root cause, marked on the timeline figure)."""
        frame = pd.DataFrame(self.diagnosis.get("timeline") or [], columns=["time", "host", "source", "event"])
        frame["root_cause"] = root_cause_rows(frame, self.diagnosis.get("root_cause") or {})
        frame["time"] = _utc(frame["time"])
        return frame

    # ---------------------------------------------------------------- BMC history and storage (trends)
    def sel_events(self) -> pd.DataFrame:
        """Every BMC event-log power entry, per node, on UTC: ``kind`` is ``loss`` (power cut or a
        supply degraded), ``restored`` (its recovery) or ``power`` (any other power entry, e.g. a
        supply inserted); ``restored_at`` is when a loss came back (NaT: never, in this log).

        SEL times are on the BMC's clock: they are put on UTC with ``sel time get`` of the same
        capture and the bundle's capture time (``clock`` says how), as the diagnosis does."""
        columns = ["time", "host", "sensor", "event", "direction", "kind", "restored_at", "clock", "file", "line"]
        clocks = {Path(f.path).parent: r["time_bmc"] for f in self.gathered.of_kind(kinds.IPMITOOL_SEL_TIME)
                  for r in f.records if r.get("time_bmc")}
        rows = []
        for f in self.gathered.of_kind(kinds.IPMITOOL_SEL):
            events = [SelEvent(**{k: r.get(k) for k in _SEL_FIELDS}) for r in f.records]
            clock = place_on_utc(events, clocks.get(Path(f.path).parent), _captured_at(Path(f.path)))
            losses = {id(p.event): p for p in power_losses(events)}
            recoveries = {id(p.restored) for p in losses.values() if p.restored is not None}
            for e in events:
                kind = "loss" if id(e) in losses else "restored" if id(e) in recoveries else (
                    "power" if e.is_power_event else None)
                if kind is None:
                    continue
                back = losses[id(e)].restored if kind == "loss" else None
                rows.append({"time": e.time_utc, "host": f.host, "sensor": e.sensor, "event": e.event,
                             "direction": e.direction, "kind": kind, "restored_at": back.time_utc if back else None,
                             "clock": clock, "file": self._rel(Path(f.path)), "line": e.line})
        frame = pd.DataFrame(rows, columns=columns)
        frame["time"], frame["restored_at"] = _utc(frame["time"]), _utc(frame["restored_at"])
        return frame

    def storage_usage(self) -> pd.DataFrame:
        """How full ``/dev/shm`` and the data and checkpoint paths were on each node when captured
        (``stat -f``'s exact bytes where present, else ``df -h``'s rounded ones): ``use_pct``,
        ``inodes_used_pct``, ``full``. Several captures of one node over time make the trend."""
        columns = ["time", "host", "path", "fs_type", "size_gib", "used_gib", "avail_gib", "use_pct",
                   "inodes_used_pct", "full", "source", "file", "line"]
        rows = {}
        for f in sorted(self.gathered.of_kind(*kinds.FILESYSTEM_USAGE), key=lambda f: f.kind != kinds.STATFS):  # stat -f wins
            when = _captured_at(Path(f.path))
            for r in f.records:
                path = r.get("path") or r.get("mount")
                key = (f.host, path, when)
                if not path or key in rows:
                    continue
                total, free = r.get("inodes_total"), r.get("inodes_free")
                rows[key] = {"time": when, "host": f.host, "path": path, "fs_type": r.get("fs_type") or r.get("filesystem"),
                             "size_gib": r["size_bytes"] / 2**30, "used_gib": r["used_bytes"] / 2**30,
                             "avail_gib": r["avail_bytes"] / 2**30, "use_pct": r["use_pct"],
                             "inodes_used_pct": 100.0 * (total - free) / total if total and free is not None else None,
                             "full": r["avail_bytes"] <= 0 or free == 0, "source": f.kind,
                             "file": self._rel(Path(f.path)), "line": r.get("line")}
        frame = pd.DataFrame(list(rows.values()), columns=columns)
        frame["time"] = _utc(frame["time"])
        return frame.sort_values(["host", "path", "time"], ignore_index=True)

    def nccl_runs(self) -> list[dict]:
        """Every nccl-tests run recorded in the evidence (nightly fabric checks, a pasted run), judged
        like ``gpulib nccl-parse``: ``series`` (out-of-place / in-place busbw per size, as printed),
        ``expected`` (the bandwidth model's curve at the same sizes, None when the GPU or fabric is
        unknown to it), ``status`` PASS/WARN/FAIL and ``summary`` (one line with the reason)."""
        table = thresholds.load()
        out = []
        for f in self.gathered.of_kind(nccl_tests.KIND):
            text, _problems = read_text(Path(f.path))
            for run in (nccl_tests.parse(text, source=str(f.path)).records if text else []):
                summary = summarize_run(run, table)
                series: dict[str, list[tuple[int, float]]] = {}
                for r in run.rows:
                    for label, busbw in (("out-of-place", r.oop_busbw_gbps), ("in-place", r.ip_busbw_gbps)):
                        if busbw is not None:
                            series.setdefault(label, []).append((r.size_bytes, busbw))
                verdict = summary["verdict"]
                curve = (verdict.get("expected") or {}).get("curve")
                out.append({"file": self._rel(Path(f.path)), "line": run.line, "host": f.host, "series": series,
                            "expected": [(int(s), float(g)) for s, g in curve] if curve else None,
                            "status": verdict["status"],
                            "summary": f"{self._rel(Path(f.path))} line {run.line}: {summary['collective']} on "
                                       f"{summary['nranks'] or '?'} ranks ({summary['gpu']}): **{verdict['status']}** "
                                       f"{verdict['reason']}"})
        return out


_SEL_FIELDS = tuple(f.name for f in fields(SelEvent))


@lru_cache(maxsize=256)
def _captured_at(path: Path) -> str | None:
    """The capture time of the evidence bundle holding ``path`` (None outside a bundle)."""
    for folder in path.parents:
        if is_bundle(folder):
            try:
                return Bundle.open(folder).manifest.get("captured_at")
            except Exception:  # noqa: BLE001 - a broken manifest: the times stay on the BMC clock
                return None
    return None


def sel_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per node: power losses in the SEL, how many came back, the first and the last. A node whose
    supplies flap month after month shows here before the night one of them takes a job down."""
    columns = ["host", "losses", "restored", "still_lost", "first", "last"]
    losses = frame[frame["kind"] == "loss"] if not frame.empty else frame
    if losses.empty:
        return pd.DataFrame(columns=columns)
    out = losses.groupby(losses["host"].fillna("?")).agg(
        losses=("kind", "size"), restored=("restored_at", "count"), first=("time", "min"), last=("time", "max"))
    out["still_lost"] = out["losses"] - out["restored"]
    return out.reset_index().reindex(columns=columns).sort_values(["still_lost", "losses"], ascending=False,
                                                                   ignore_index=True)


def root_cause_rows(timeline: pd.DataFrame, root: dict) -> pd.Series:
    """True for the timeline entries of the root cause: its time and host, and a source that is
    one of its quoted lines (else the first entry at its time and host)."""
    marks = pd.Series(False, index=timeline.index, dtype=bool)
    if timeline.empty or not root.get("time"):
        return marks
    same = (timeline["time"] == root["time"]) & ((timeline["host"] == root.get("host")) | (root.get("host") is None))
    sources = {f"{e.get('file')}:{e.get('line')}" for e in root.get("evidence") or []}
    exact = same & timeline["source"].isin(sources)
    chosen = exact if exact.any() else same
    if chosen.any():
        marks[chosen[chosen].index[0]] = True
    return marks


#: Job-log event kinds that mean something went wrong on a rank.
PROBLEM_KINDS = ("watchdog_timeout", "watchdog_stuck", "watchdog_exception", "nccl_error", "nccl_warn",
                 "socket_error", "ib_completion_error", "cuda_oom", "cuda_error", "device_assert",
                 "process_failed", "child_failed", "exception", "dataloader_error", "store_error",
                 "node_failure")


def _problems(events: pd.DataFrame) -> pd.DataFrame:
    """Problem events of a rank, one row per rank and line: a large job's timeouts folded into one
    record (:mod:`gpulib.parsers.fold`) are given back a row each, at their own rank and time."""
    problems = events[events["kind"].isin(PROBLEM_KINDS)]
    folded = problems[problems["folded"].map(lambda v: isinstance(v, (list, tuple, Members)) and len(v) > 0)]
    if folded.empty:
        return problems[problems["rank"].notna()]
    extra = [{**row._asdict(), "rank": m["rank"], "time_utc": m["time_utc"], "folded": None}
             for row in folded.itertuples(index=False)
             for m in islice(members_of(JobEvent(row.line, row.kind, row.text, row.time_utc, rank=row.rank,
                                                folded=row.folded)), 1, None)]
    out = pd.concat([problems, pd.DataFrame(extra, columns=problems.columns)], ignore_index=True)
    out["time"] = _utc(out["time_utc"])
    out["rank"] = out["rank"].astype("Int64")
    return out[out["rank"].notna()]


_TORCH = re.compile(r"\btorch[= ](?P<torch>\d+\.\d+\.\d+)(?:\+cu(?P<cu>\d{3,}))?")
_NVCC = re.compile(r"release (?P<ver>\d+\.\d+)")
_LOSS = re.compile(r"\bloss[ =:]+(?P<loss>\d+(?:\.\d+)?)")


def _state_text(row: pd.Series) -> str:
    parts = [f"gpu {row.get('gpu')}", str(row.get("pci_bus_id") or "")]
    if row.get("lost"):
        parts.append(f"LOST ({row.get('lost_reason') or 'no readings'})")
    for key, unit in (("temp_c", "C"), ("mem_used_mib", "MiB used"), ("power_draw_w", "W")):
        value = row.get(key)
        if value is not None and pd.notna(value):
            parts.append(f"{value:g} {unit}")
    if row.get("throttle_reasons"):
        parts.append("reasons " + ",".join(row["throttle_reasons"]))
    return " ".join(p for p in parts if p)


def gpu_labels(frame: pd.DataFrame) -> pd.Series:
    """``host 0000:4e:00.0 (GPU 3)`` labels: the PCI id that survives renumbering and the index
    as captured (:func:`gpulib.findings.gpu_name`; host omitted when unknown, ``GPU N`` when no
    PCI id is known). The step checks name GPUs with it, so a throttle period of a plot matches
    the rows of its GPU in a table."""
    def col(name: str) -> list:
        return list(frame[name]) if name in frame.columns else [None] * len(frame)

    labels = []
    for host, pci, index, gpu in zip(col("host"), col("pci_bus_id"), col("gpu_index"), col("gpu"), strict=True):
        pci = normalize_pci(pci) or pci if isinstance(pci, str) and pci else None
        index = int(index) if index is not None and not pd.isna(index) else None
        name = gpu_name(pci, index) or (f"GPU {gpu}" if gpu is not None and not pd.isna(gpu) else "GPU ?")
        labels.append(f"{host} {name}" if isinstance(host, str) and host else name)
    return pd.Series(labels, index=frame.index, dtype=object)


def throttle_periods(frame: pd.DataFrame) -> list[dict]:
    """Contiguous runs of samples per GPU that carry a heat/power slowdown reason.

    Returns ``[{label, start, end, reasons, samples}]`` sorted by start time.
    """
    if frame is None or not {"time", "gpu", "throttle_reasons"} <= set(frame.columns) or frame.empty:
        return []
    data = frame[frame["time"].notna()].sort_values("time")
    periods = []
    for label, rows in data.groupby(gpu_labels(data), sort=True):
        current = None
        for time, reasons in zip(rows["time"], rows["throttle_reasons"], strict=True):
            slow = sorted(set(reasons or ()) & SLOWDOWN_REASONS)
            if slow:
                if current is None:
                    current = {"label": label, "start": time, "end": time, "reasons": set(), "samples": 0}
                current["end"] = time
                current["reasons"].update(slow)
                current["samples"] += 1
            elif current is not None:
                periods.append(current)
                current = None
        if current is not None:
            periods.append(current)
    for period in periods:
        period["reasons"] = sorted(period["reasons"])
    return sorted(periods, key=lambda p: p["start"])
