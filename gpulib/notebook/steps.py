"""What each runbook step records: views over the diagnosis, plus the step's threshold checks.

The diagnosis (:func:`gpulib.diagnose.diagnose`) is the one rule engine: a step shows the
diagnosis findings of its subject (the kernel log's, the GPU snapshots', a category's). The
readings an engineer tunes with a notebook's sliders (how hot is too hot, how much memory
imbalance is suspicious, how slow is a stalled step) are checked here, and :func:`combine` hands
an event the diagnosis also reports back to the diagnosis's finding, so one event has one id,
one severity and one category in every step, in ``findings.json``, the report and ``archive diff``.
Records are :class:`gpulib.findings.Finding` as dicts (``findings-NN.json`` is JSON).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpulib.checkpoints import candidates
from gpulib.checkpoints.candidates import checkpoint_findings as checkpoint_findings
from gpulib.checkpoints.candidates import checkpoint_step as checkpoint_step
from gpulib.checkpoints.candidates import steps_lost_text as steps_lost_text
from gpulib.evidence import kinds
from gpulib.findings import Finding, event_id, finding_dict, ordered, summarize
from gpulib.identity import normalize_pci, to_utc_iso
from gpulib.notebook.tables import gpu_labels, throttle_periods
from gpulib.parsers.gpu_records import ERROR_COUNTERS
from gpulib.preflight import gate

# The gate's checks are the notebooks' too (08 preflight, 09 health report, the views of 01/02/06):
# re-exported here, where the notebooks find every check as ``checks.NAME``.
from gpulib.preflight.gate import GPU_STATE_KINDS as GPU_STATE_KINDS
from gpulib.preflight.gate import HARDWARE_CATEGORIES as HARDWARE_CATEGORIES
from gpulib.preflight.gate import KERNEL_KINDS as KERNEL_KINDS
from gpulib.preflight.gate import THERMAL_CATEGORIES as THERMAL_CATEGORIES
from gpulib.preflight.gate import combine as combine
from gpulib.preflight.gate import event_keys as event_keys
from gpulib.preflight.gate import from_diagnosis as from_diagnosis
from gpulib.preflight.gate import go_no_go as go_no_go
from gpulib.preflight.gate import hardware_findings as hardware_findings
from gpulib.preflight.gate import health_findings as health_findings
from gpulib.preflight.gate import held_findings as held_findings
from gpulib.preflight.gate import imbalance_findings as imbalance_findings
from gpulib.preflight.gate import kernel_findings as kernel_findings
from gpulib.preflight.gate import supported_by as supported_by
from gpulib.vocabulary import SEVERITIES

FINDING_MIME = "application/vnd.gpulib.finding+json"


def finding(id: str, severity: str, category: str, title: str, *, host: str | None = None,
            gpu_index: int | None = None, rank: int | None = None, time: Any = None,
            quotes: Sequence[dict] = (), actions: Sequence[str] = (), **extra: Any) -> dict:
    """One finding as its JSON dict (:func:`gpulib.findings.finding_dict`) from a table's cells:
    pandas' missing values become None, timestamps UTC ISO text."""
    return finding_dict(id, severity, category, title, host=host,
                        gpu_index=None if gpu_index is None or pd.isna(gpu_index) else int(gpu_index),
                        rank=None if rank is None or pd.isna(rank) else int(rank), time=_iso(time),
                        quotes=quotes, actions=actions, **extra)


def normalize_findings(items: Iterable[Any], *, step: str | None = None) -> list[dict]:
    """Findings or their dicts -> dicts with every key of the model, de-duplicated by id, most
    severe first."""
    out: dict[str, Finding] = {}
    for item in items:
        f = item if isinstance(item, Finding) else Finding.from_dict(item.to_dict() if hasattr(item, "to_dict")
                                                                     else dict(item))
        f.time = _iso(f.time)
        if step:
            f.extra.setdefault("step", step)
        out.setdefault(str(f.id), f)
    return [f.to_dict() for f in ordered(out.values())]


def summarize_findings(items: Sequence[dict], *, step: str = "") -> str:
    """The text people read under the findings: counts, then one line per finding."""
    return summarize([Finding.from_dict(f) for f in items], step=step)


def _iso(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, str):
        return value
    return to_utc_iso(pd.Timestamp(value).to_pydatetime())  # naive = UTC already


def _pci(row: Any) -> str | None:
    pci = row.get("pci_bus_id")
    return (normalize_pci(pci) or pci) if isinstance(pci, str) and pci else None


def _gpu(row: Any) -> str | int | None:
    """Whom a table row's GPU finding is about, as :func:`gpulib.findings.event_id` names it: the
    PCI id where known (it survives renumbering after a GPU is lost), else the index."""
    if _pci(row):
        return _pci(row)
    index = row.get("gpu_index")
    return None if index is None or pd.isna(index) else int(index)


def _quote_rows(rows: pd.DataFrame, limit: int = 3) -> list[dict]:
    cols = [c for c in ("file", "line", "text") if c in rows.columns]
    return [{c: (None if pd.isna(r[c]) else (int(r[c]) if c == "line" else str(r[c]))) for c in cols}
            for _, r in rows.head(limit).iterrows()]


#: Which notebook explains a root-cause category.
NEXT_NOTEBOOK = {
    "gpu_fell_off_bus": "01_kernel_xid", "gpu_memory_error": "06_driver_cuda_ecc_topology",
    "gpu_firmware_error": "01_kernel_xid", "nvlink_error": "06_driver_cuda_ecc_topology",
    "thermal_throttling": "04_thermal_power", "power_fault": "04_thermal_power", "cuda_oom": "02_gpu_memory_oom",
    "host_oom": "02_gpu_memory_oom", "network_fabric": "03_nccl_network",
    "driver_mismatch": "06_driver_cuda_ecc_topology", "application_error": "03_nccl_network",
    "data_pipeline_stall": "05_data_loading", "node_lost": "01_kernel_xid", "none": "07_checkpoint_resume",
}


def next_step(diagnosis: dict) -> str:
    """Markdown naming the notebook to open next for this diagnosis."""
    verdict = diagnosis.get("verdict") or {}
    category = verdict.get("category") or "none"
    target = NEXT_NOTEBOOK.get(category, "01_kernel_xid")
    if category == "none":
        return (f"No failure found: open **{target}.ipynb** to confirm the checkpoint, then **08_preflight.ipynb**.")
    return (f"Root cause category `{category}` ({verdict.get('interruption', 'unknown')} interruption): open "
            f"**{target}.ipynb** next, then **07_checkpoint_resume.ipynb** and **08_preflight.ipynb**.")


def findings_table(items: Sequence[dict]) -> pd.DataFrame:
    """Findings as a table, with the first quoted line (column ``evidence``, the JSON's word)."""
    rows = [{"severity": f["severity"], "category": f["category"], "title": f["title"], "host": f.get("host"),
             "gpu": f.get("gpu_index"), "rank": f.get("rank"), "time": f.get("time"),
             "evidence": "; ".join(f"{e.get('file')}:{e.get('line')}: {e.get('text')}" for e in f["evidence"][:1])}
            for f in items]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# 01 kernel log and Xid


# --------------------------------------------------------------------------------------------
# 02 GPU memory


# --------------------------------------------------------------------------------------------
# 04 thermal and power


def _first(rows: pd.DataFrame, column: str) -> Any:
    if column not in rows.columns:
        return None
    values = rows[column].dropna()
    return values.iloc[0] if len(values) else None


# --------------------------------------------------------------------------------------------
# 05 data loading


def step_findings(steps: pd.DataFrame, stall_factor: float = 2.0) -> list[dict]:
    """Ranks whose step time exceeded ``stall_factor`` x the median of the same measure.

    Logs give either the whole step (``s/step``, usually printed by rank 0 only, and including
    the wait for the slowest rank) or per-phase timings per rank (compute + data, without the
    wait); each is compared with its own median so the two are never mixed. Where a rank's own
    work is timed, stragglers are judged on it alone: its slow whole steps were spent waiting.
    """
    if steps is None or steps.empty or "step_time_s" not in steps.columns:
        return []
    data = steps[steps["step_time_s"].notna()]
    measures = data["measure"] if "measure" in data.columns else pd.Series("s/step", index=data.index)
    # Ranks whose own work is timed: their whole-step time includes the wait for the slowest
    # rank, so a slow whole step says the *job* waited, not that this rank was slow (rank 0 logs
    # s/step and waits for a throttled rank 3: blaming rank 0 sends the engineer to its loader).
    own_work = set(data.loc[measures != "s/step", "rank"].dropna().astype(int)) if "rank" in data.columns else set()
    out = []
    for measure, rows in data.groupby(measures, sort=True):
        median = float(rows["step_time_s"].median())
        slow = rows[rows["step_time_s"] > median * stall_factor]
        ranks = slow["rank"].astype("Float64").fillna(-1) if "rank" in slow.columns else pd.Series(-1, index=slow.index)
        for rank, mine in slow.groupby(ranks, sort=True):
            if measure == "s/step" and own_work and (rank == -1 or int(rank) in own_work):
                continue  # judged on its compute time (the other measure), not on its waiting
            worst = mine.loc[mine["step_time_s"].idxmax()]
            who = "the logging rank" if rank == -1 else f"rank {int(rank)}"
            out.append(finding(
                event_id("slow-steps", rank=int(rank), detail=measure), "warning", "data_pipeline_stall",
                f"{len(mine)} step(s) of {who} took more than {stall_factor:g} x the median {measure} "
                f"({median:.2f} s); worst {worst['step_time_s']:.2f} s at step {int(worst['step'])}",
                host=worst.get("host") if isinstance(worst.get("host"), str) else None,
                rank=None if rank == -1 else int(rank), time=worst.get("time"), quotes=_quote_rows(mine),
                actions=["If one rank is slow, check its GPU clocks (04 thermal) before its data loader.",
                         "If all ranks slow together: storage or network file system; raise num_workers / "
                         "prefetch_factor, use persistent_workers=True, pin_memory=True."],
                measure=measure,
            ))
    return out


# --------------------------------------------------------------------------------------------
# 06 driver, CUDA, ECC, topology


#: Per-GPU error counters of the health report's inventory (compared night to night by
#: ``gpulib archive diff``: a counter that grew is a GPU getting worse).
def gpu_inventory(states: pd.DataFrame) -> list[dict]:
    """Every GPU in the evidence (its newest snapshot): identity, lost or not, error counters."""
    if states is None or states.empty:
        return []
    frame = states.copy()
    frame["_key"] = [u if isinstance(u, str) and u else f"{h}|{p if isinstance(p, str) else i}"
                     for u, h, p, i in zip(_col(frame, "uuid"), _col(frame, "host"), _col(frame, "pci_bus_id"),
                                           _col(frame, "gpu_index"), strict=True)]
    frame = frame.sort_values("time", na_position="first", kind="stable").drop_duplicates("_key", keep="last")

    def plain(value: Any) -> Any:
        if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
            return None
        return value.item() if hasattr(value, "item") else value

    gpus = []
    for _, row in frame.iterrows():
        gpu = {"host": plain(row.get("host")), "uuid": plain(row.get("uuid")),
               "pci_bus_id": plain(row.get("pci_bus_id")), "index": plain(row.get("gpu_index")),
               "name": plain(row.get("name")), "lost": bool(row.get("lost"))}
        gpu.update({c: None if plain(row.get(c)) is None else int(row.get(c)) for c in ERROR_COUNTERS})
        gpu["index"] = None if gpu["index"] is None else int(gpu["index"])
        gpus.append(gpu)
    return sorted(gpus, key=lambda g: (str(g["host"]), g["index"] if g["index"] is not None else -1,
                                       str(g["pci_bus_id"])))


def _col(frame: pd.DataFrame, column: str) -> pd.Series:
    return frame[column] if column in frame.columns else pd.Series(None, index=frame.index, dtype=object)


def inventory_finding(states: pd.DataFrame) -> dict:
    """The health report's GPU inventory as one ``info`` finding (``gpus``: :func:`gpu_inventory`),
    which ``gpulib archive diff`` compares between two nights: vanished GPUs, grown counters."""
    gpus = gpu_inventory(states)
    hosts = sorted({str(g["host"]) for g in gpus})
    lost = sum(g["lost"] for g in gpus)
    title = f"inventory: {len(gpus)} GPU(s) on {len(hosts)} host(s)" + (f", {lost} lost" if lost else "")
    return finding("gpu-inventory", "info", "none", title, gpus=gpus)


def version_findings(versions: pd.DataFrame) -> list[dict]:
    """PyTorch or the CUDA toolkit built for a newer CUDA than the driver supports.

    The driver's CUDA version (nvidia-smi header) is the newest runtime it can serve; a PyTorch
    wheel built for a newer CUDA fails at the first kernel ("CUDA driver version is
    insufficient"), a newer nvcc produces PTX the driver cannot JIT.
    """
    out = []
    if versions is None or versions.empty:
        return out
    for _, row in versions.iterrows():
        driver = _version(row.get("cuda_driver"))
        if driver is None:
            continue
        for key, what, severity in (("torch_cuda", "PyTorch is built for CUDA", "error"),
                                    ("nvcc", "the CUDA toolkit (nvcc) is", "warning")):
            built = _version(row.get(key))
            if built is not None and built > driver:
                out.append(finding(
                    event_id(f"{key}-newer", host=row.get("host")), severity, "driver_mismatch",
                    f"{what} {row[key]} but the driver on {row.get('host') or 'this host'} supports CUDA "
                    f"{row['cuda_driver']} at most (driver {row.get('driver')})", host=row.get("host"),
                    actions=["Upgrade the NVIDIA driver, or use a PyTorch/CUDA build not newer than the driver's "
                             "CUDA version (nvidia-smi header)."]))
    return out


def _version(text: Any) -> tuple[int, ...] | None:
    match = re.match(r"(\d+)\.(\d+)", str(text or ""))
    return (int(match[1]), int(match[2])) if match else None


def topology_findings(matrix: pd.DataFrame, host: str | None = None) -> list[dict]:
    """GPU pairs without NVLink on a board where other pairs have it (lost or disabled links)."""
    if matrix is None or matrix.empty:
        return []
    pairs = [(a, b, str(matrix.loc[a, b])) for i, a in enumerate(matrix.index) for b in list(matrix.columns)[i + 1:]]
    if not any(link.startswith("NV") for _, _, link in pairs):
        return []  # a PCIe-only machine: nothing is missing
    slow = [f"{a}-{b} ({link})" for a, b, link in pairs if not link.startswith("NV")]
    if not slow:
        return []
    return [finding(event_id("nvlink-missing", host=host), "warning", "nvlink_error",
                    f"{len(slow)} GPU pair(s) without NVLink on a board that has it: {', '.join(slow[:6])}",
                    host=host, actions=["Check nvidia-smi nvlink -s for inactive links and the kernel log for Xid 74; "
                                        "collectives across these pairs run at PCIe speed."])]


def _num(value: Any) -> float:
    return 0.0 if value is None or pd.isna(value) else float(value)


# --------------------------------------------------------------------------------------------
# tables shown by the notebooks (selected, readable columns)


def _columns(frame: pd.DataFrame | None, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of ``frame`` (those it has). A GPU is one column, ``gpu``: its one name
    (``0000:54:00.0 (GPU 2 at capture, 3 in the job)``, the ``gpu_name`` the evidence tables
    carry) in place of a bare index and a PCI column that could disagree with the figures."""
    if frame is None or frame.empty:
        return pd.DataFrame(columns=[c for c in columns if c not in ("pci_bus_id", "gpu_index")])
    if "gpu_name" in frame.columns and frame["gpu_name"].notna().any():
        frame = frame.assign(gpu=frame["gpu_name"].where(frame["gpu_name"].notna(), frame.get("gpu")))
        columns = [c for c in columns if c not in ("pci_bus_id", "gpu_index")]
    return frame.reindex(columns=[c for c in columns if c in frame.columns])


def rank_table(ranks: pd.DataFrame) -> pd.DataFrame:
    """One row per rank with its GPU named as in every figure of the runbook."""
    return _columns(ranks, ["rank", "host", "gpu", "pci_bus_id", "gpu_index", "transport", "nccl_version",
                            "first_problem", "first_problem_time"])


def xid_table(events: pd.DataFrame) -> pd.DataFrame:
    """Xid events with the catalog's name, hard/soft and action, in time order."""
    if events is None or events.empty:
        return _columns(events, [])
    data = events[events["xid"].notna()].sort_values("time", na_position="last")
    return _columns(data, ["time", "host", "gpu", "pci_bus_id", "xid", "name", "interruption", "action", "pid",
                           "process", "file", "line"])


def other_kernel_events(events: pd.DataFrame) -> pd.DataFrame:
    """Non-Xid kernel events worth reading (AER, OOM kills, hung tasks, link changes)."""
    if events is None or events.empty:
        return _columns(events, [])
    data = events[events["xid"].isna() & events["kind"].isin(tuple(KERNEL_KINDS) + ("ib_link_up", "sxid",
                                                                                      "nccl_segfault"))]
    return _columns(data.sort_values("time", na_position="last"), ["time", "host", "kind", "pci_bus_id", "text",
                                                                    "file", "line"])


#: How a file kind reads in a legend (other kinds: their name with spaces).
SOURCE_LABELS = {kinds.KERNEL_LOG: "kernel log", kinds.TRAINING_LOG: "training log", kinds.NCCL_TESTS: "nccl-tests",
                 kinds.DCGM_EXPORTER: "DCGM exporter", kinds.DCGMI_DIAG: "DCGM diag",
                 kinds.FLIGHT_RECORDER: "NCCL flight recorder", kinds.SLURM_SINFO: "Slurm sinfo",
                 kinds.IPMITOOL_SDR: "IPMI sensors", kinds.IBSTAT: "InfiniBand", kinds.FUSER: "fuser"}


def source_label(kind: str | None) -> str:
    """``kernel_log`` -> ``kernel log``; every ``nvidia_smi_*`` kind -> ``nvidia-smi``."""
    if not kind or kind == kinds.UNKNOWN:
        return "other"
    return "nvidia-smi" if kind.startswith("nvidia_smi") else SOURCE_LABELS.get(kind, kind.replace("_", " "))


def timeline_table(timeline: pd.DataFrame, inputs: Sequence[dict]) -> pd.DataFrame:
    """The diagnosis timeline with ``source_kind`` (what kind of file said it) and the host filled
    in from the file when the event names none.

    A summary event (``NCCL watchdog timeout on 15 ranks``) has no host of its own, but it was
    read from a file that belongs to one; only an event whose file has no host either stays
    without one. ``inputs`` is the diagnosis's ``inputs`` list (``path``, ``kind``, ``host``).
    """
    frame = timeline.copy()
    if frame.empty:
        return frame.assign(source_kind=pd.Series(dtype=object))
    by_path = {str(i.get("path")): i for i in inputs or []}
    by_name: dict[str, list[dict]] = {}
    for item in inputs or []:
        by_name.setdefault(Path(str(item.get("path"))).name, []).append(item)

    def owner(source: object) -> dict:
        path = re.sub(r":\d+$", "", str(source or ""))
        if path in by_path:
            return by_path[path]
        same_name = by_name.get(Path(path).name, [])
        return same_name[0] if len(same_name) == 1 else {}

    files = [owner(s) for s in frame["source"]]
    frame["source_kind"] = [source_label(f.get("kind")) for f in files]
    frame["host"] = [h if isinstance(h, str) and h else f.get("host") for h, f in zip(frame["host"], files, strict=True)]
    return frame


def memory_table(states: pd.DataFrame) -> pd.DataFrame:
    data = _columns(states, ["time", "host", "gpu", "pci_bus_id", "mem_used_mib", "mem_total_mib",
                             "util_gpu_pct", "processes", "file"])
    if "processes" in data.columns:
        data["processes"] = data["processes"].map(
            lambda ps: ", ".join(f"{p.get('pid')} {p.get('name') or ''} {p.get('used_mib') or ''}MiB".strip()
                                 for p in ps or []))
    return data


def thermal_table(states: pd.DataFrame) -> pd.DataFrame:
    data = _columns(states, ["time", "host", "gpu", "pci_bus_id", "lost", "temp_c", "temp_slowdown_c",
                             "sm_clock_mhz", "sm_clock_max_mhz", "power_draw_w", "power_limit_w", "throttle_reasons",
                             "file"])
    if "throttle_reasons" in data.columns:
        data["throttle_reasons"] = data["throttle_reasons"].map(lambda r: ", ".join(r or []))
    return data


def throttle_table(samples: pd.DataFrame, min_samples: int = 2) -> pd.DataFrame:
    """Slowdown periods per GPU with their length, peak temperature and lowest clock."""

    rows = []
    for p in throttle_periods(samples):
        if p["samples"] < min_samples:
            continue
        inside = samples[(gpu_labels(samples) == p["label"]) & (samples["time"] >= p["start"])
                         & (samples["time"] <= p["end"])]
        rows.append({"gpu": p["label"], "start": p["start"], "end": p["end"],
                     "minutes": round((p["end"] - p["start"]).total_seconds() / 60, 1),
                     "reasons": ", ".join(p["reasons"]), "peak_temp_c": inside["temp_c"].max(),
                     "min_sm_clock_mhz": inside["sm_clock_mhz"].min(), "samples": p["samples"]})
    return pd.DataFrame(rows)


def ecc_table(states: pd.DataFrame) -> pd.DataFrame:
    return _columns(states, ["host", "gpu", "pci_bus_id", "ecc_volatile_sbe", "ecc_volatile_dbe",
                             "ecc_aggregate_dbe", "remapped_rows_correctable", "remapped_rows_uncorrectable",
                             "remapped_rows_pending", "remapped_rows_failure", "retired_pages_pending",
                             "pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max",
                             "pcie_replay_count", "file"])


# --------------------------------------------------------------------------------------------
# 03 NCCL


def nccl_findings(ranks: pd.DataFrame, diagnosis: dict) -> list[dict]:
    """Transport mismatch between ranks, and the timeout cascade.

    Ranks on IB next to ranks on sockets cannot connect reliably. The timeout count is *info*:
    it says how far the cascade went. NCCL version skew between nodes is the diagnosis's
    ``driver_mismatch`` finding (``from_diagnosis``), not repeated here.
    """
    out = []
    if ranks is None or ranks.empty:
        return out
    transports = ranks.dropna(subset=["transport"]).groupby("transport")["host"].agg(lambda h: sorted(set(h)))
    if len(transports) > 1:
        worst = transports[[t for t in transports.index if "Socket" in t]] if any(
            "Socket" in t for t in transports.index) else transports
        hosts = sorted({h for hs in worst for h in hs if h})
        out.append(finding(
            "nccl-transport-mismatch", "error", "network_fabric",
            "ranks use different NCCL transports: " + "; ".join(f"{t}: {', '.join(h)}" for t, h in transports.items()),
            host=hosts[0] if len(hosts) == 1 else None,
            actions=["Check ibstat on the socket-fallback hosts (State Active, LinkUp); pin NCCL_IB_HCA and "
                     "NCCL_SOCKET_IFNAME; never run a job with mixed IB/socket transports."],
        ))
    # a watchdog *timeout* (the rank waited for a peer); "watchdog stuck" is the rank that hung itself,
    # counted with the ranks that did not time out, as the diagnosis's timeout finding counts them
    timeouts = ranks[ranks["first_problem"].fillna("").str.startswith("watchdog_timeout")]
    if len(timeouts):
        silent = sorted(set(ranks["rank"]) - set(timeouts["rank"]))
        out.append(finding(
            # a cascade row carries its own category (ranks that waited: the job's, not the GPU's)
            "nccl-timeout-cascade", "info", "application_error",
            f"{len(timeouts)} of {len(ranks)} ranks first reported a watchdog timeout (cascade: they were waiting)"
            + (f"; ranks that did not: {', '.join(map(str, silent))}" if silent else ""),
            caused_by=(diagnosis.get("root_cause") or {}).get("finding"),
            actions=["Look at the rank(s) that did not time out: that is where the job stopped."],
        ))
    return out


# --------------------------------------------------------------------------------------------
# 07 checkpoints


def checkpoint_table(report: Any) -> pd.DataFrame:
    """Every checkpoint the picker offers (:func:`checkpoint_candidates`), in its order: the
    recommended one, the older complete ones, the rejected ones with why - one table and one
    picker over the same list, so nothing the picker lists is missing from the table (the
    picker adds the steps lost, which need the training log)."""
    verdicts = {"recommended": "RESUME FROM THIS", "complete": "complete, older", "rejected": "rejected"}
    rows = []
    for c in checkpoint_candidates(report):
        reason = c["why"] or ""
        if c["verdict"] != "rejected" and c["lacks"]:
            reason += f"; lacks {', '.join(c['lacks'])}"
        rows.append({"checkpoint": c["path"], "verdict": verdicts[c["verdict"]], "step": c["step"], "reason": reason})
    return pd.DataFrame(rows, columns=["checkpoint", "verdict", "step", "reason"])


def last_logged_step(steps: pd.DataFrame | None) -> dict | None:
    """The last training step the logs show: ``{step, time, rank, file, line}``, or None.

    "Last" is in time order, not the highest number: after a restart the counter goes back, and
    the run that crashed is the one that logged last. Without times, the highest step counts.
    """
    if steps is None or steps.empty or "step" not in steps.columns:
        return None
    data = steps[steps["step"].notna()]
    if data.empty:
        return None
    timed = data[data["time"].notna()] if "time" in data.columns else data.iloc[0:0]
    row = (timed.sort_values(["time", "step"]).iloc[-1] if len(timed)
           else data.sort_values("step").iloc[-1])
    return {"step": int(row["step"]), "time": _iso(row.get("time")), "rank": None if pd.isna(row.get("rank"))
            else int(row["rank"]), "file": row.get("file"), "line": None if pd.isna(row.get("line")) else int(row["line"]),
            "seconds_per_step": _median_step_s(data)}


def _median_step_s(steps: pd.DataFrame) -> float | None:
    if "step_time_s" not in steps.columns:
        return None
    values = pd.to_numeric(steps["step_time_s"], errors="coerce").dropna()
    return float(values.median()) if len(values) else None


def checkpoint_candidates(report: Any, steps: pd.DataFrame | None = None) -> list[dict]:
    """Notebook 07's picker rows: :func:`gpulib.checkpoints.candidates.checkpoint_candidates` with the
    last step the training log shows (:func:`last_logged_step` of ``steps``)."""
    return candidates.checkpoint_candidates(report, last_logged_step(steps))


def resume_findings(steps: pd.DataFrame, max_jump_pct: float = 10.0) -> list[dict]:
    """Loss continuity across restarts found in the logs.

    A restart shows as the step counter going *back* in time order. After a correct resume the
    first loss is close to the loss the previous run had at that step; a jump of more than
    ``max_jump_pct`` percent means optimizer state, LR schedule or data position were not
    restored (or a different checkpoint was loaded).
    """
    if steps is None or steps.empty or "loss" not in steps.columns:
        return []
    data = steps[steps["loss"].notna() & steps["step"].notna()].sort_values(["time", "step"])
    out = []
    history: dict[int, float] = {}
    previous = None
    for _, row in data.iterrows():
        step, loss = int(row["step"]), float(row["loss"])
        if previous is not None and step < previous:
            before = [s for s in history if s <= step]
            if before:
                ref_step = max(before)
                ref = history[ref_step]
                jump = (loss - ref) / ref * 100 if ref else 0.0
                ok = abs(jump) <= max_jump_pct
                out.append(finding(
                    event_id("resume", detail=step), "info" if ok else "warning", "none",
                    f"restart at step {step}: loss {loss:.4g} vs {ref:.4g} at step {ref_step} before ({jump:+.1f} %)"
                    + ("" if ok else f", more than {max_jump_pct:g} %"),
                    rank=row.get("rank"), time=row.get("time"), quotes=_quote_rows(pd.DataFrame([row])),
                    actions=[] if ok else ["Check that optimizer, LR scheduler and sampler state were restored "
                                           "from the checkpoint, and that it is the one you meant to load."]))
        history[step] = loss
        previous = step
    return out


# --------------------------------------------------------------------------------------------
# 08 preflight


def gpus_seen(states: pd.DataFrame | None) -> int:
    """GPUs in the GPU states table (one per host and GPU), as :func:`gpulib.preflight.gate.gpus_seen` counts them."""
    return len(states.drop_duplicates(subset=["host", "gpu"])) if states is not None and not states.empty else 0


def self_check(diagnosis: dict, states: pd.DataFrame | None) -> list[dict]:
    """Notebook 08's node self-check: :func:`gpulib.preflight.gate.self_check` with the GPUs of the
    states table (the same check ``gpulib slurm healthcheck`` runs)."""
    return gate.self_check(diagnosis, gpus_seen(states))


def fabric_findings(result: dict | None, *, required: bool = True) -> list[dict]:
    """The collective test's verdict; ``None`` (not run) is a warning when the test is ``required``."""
    if result is None and not required:
        return []
    if result is None:
        return [finding("fabric-not-tested", "warning", "network_fabric", "fabric test not run",
                        actions=["Run gpulib nccl-test under torchrun before relaunching."])]
    verdict = str(result.get("verdict", "FAIL")).upper()
    severity = {"PASS": "info", "WARN": "warning"}.get(verdict, "error")
    title = f"fabric test {verdict}: {result.get('summary') or result.get('reason') or ''}".rstrip(": ")
    return [finding("fabric-test", severity, "none" if verdict == "PASS" else "network_fabric", title,
                    quotes=[{"file": result.get("results_path"), "line": None, "text": result.get("summary")}]
                    if result.get("results_path") else [],
                    actions=[] if verdict == "PASS" else ["Read the test log; check ibstat and NCCL_DEBUG=INFO output."],
                    fabric={k: v for k, v in result.items() if k != "result"})]  # the verdict, not every row


# --------------------------------------------------------------------------------------------
# 09 health report


def health_grid(states: pd.DataFrame, items: Sequence[dict]) -> pd.DataFrame:
    """(host, gpu, check, severity) rows: every GPU gets an ``ok`` row per check, findings raise it."""
    checks = ("kernel", "memory", "thermal", "hardware")
    by_category = {"gpu_fell_off_bus": "hardware", "gpu_memory_error": "hardware", "gpu_firmware_error": "kernel",
                   "nvlink_error": "hardware", "thermal_throttling": "thermal", "power_fault": "thermal",
                   "cuda_oom": "memory", "host_oom": "memory", "driver_mismatch": "hardware"}
    rows = []
    if states is not None and not states.empty:
        for _, s in states.drop_duplicates(subset=["host", "gpu"]).iterrows():
            rows += [{"host": s["host"], "gpu": str(s["gpu"]), "check": c, "severity": "ok"} for c in checks]
    for f in items:
        if f.get("gpu_index") is None:
            continue
        rows.append({"host": f.get("host"), "gpu": str(f["gpu_index"]),
                     "check": by_category.get(f["category"], "kernel"), "severity": f["severity"]})
    return pd.DataFrame(rows, columns=["host", "gpu", "check", "severity"])


def host_summary(states: pd.DataFrame, items: Sequence[dict]) -> pd.DataFrame:
    """Per host: GPUs seen, lost, and findings per severity."""
    hosts = sorted({str(h) for h in (states["host"].dropna() if states is not None and not states.empty else [])}
                   | {f["host"] for f in items if f.get("host")})
    rows = []
    for host in hosts:
        mine = states[states["host"] == host] if states is not None and not states.empty else pd.DataFrame()
        row = {"host": host, "gpus": mine["gpu"].nunique() if len(mine) else 0,
               "lost": int(mine["lost"].sum()) if "lost" in mine.columns else 0}
        row.update({s: sum(1 for f in items if f.get("host") == host and f["severity"] == s) for s in SEVERITIES})
        rows.append(row)
    return pd.DataFrame(rows)


