"""Per-node configuration facts, read from evidence bundles or raw folders.

Why: the nodes of one job must run the same software stack. A node with another driver, another
NCCL or a kernel someone upgraded by hand is the classic odd node out: NCCL refuses to talk to it,
or it is the one that hangs. These facts are what a job-scoped diff compares (:mod:`.drift`).

Where each fact comes from (first source that has it wins, and ``sources`` says which file):

* driver / CUDA: ``nvidia-smi -q``/``-q -x`` headers, NVML snapshot, ``/proc/driver/nvidia/version``;
* NCCL / torch: the collector's ``versions/python-stack.json``; else the job log's ``NCCL version``
  line and its ``torch X.Y.Z`` print for that host;
* kernel: ``uname -a``; OS: ``/etc/os-release`` ``PRETTY_NAME``;
* GPU model, count, ECC mode, MIG mode: the GPU records of the nvidia-smi snapshot;
  VBIOS and persistence mode: the same files (or NVML), per GPU - a node whose GPUs disagree
  reports ``mixed: ...``;
* InfiniBand: ``ibstat`` ports (IB link layer only): how many are Active, at which rates.

Files are recognised by content, not by name, so ``uname.txt`` or ``node7-uname`` both work.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile, Inputs, gather
from gpulib.evidence.record_summary import flag, summarize_values, summary_of

#: Fields compared across nodes, in the order a diff table shows them.
FIELDS = ("driver", "cuda", "nccl", "torch", "kernel", "os", "gpu_model", "gpu_count", "vbios",
          "persistence_mode", "ecc_mode", "mig_mode", "ib_ports_active", "ib_rate_gbps")
#: Unrecognised files up to this size are sniffed for version facts (uname, os-release, ...).
SNIFF_BYTES = 256 * 1024
#: Files sniffed for version facts: unrecognised ones, a bundle's ``versions/*``, its NVML snapshot.
SNIFF_KINDS = (kinds.UNKNOWN, kinds.TEXT, kinds.VERSIONS, kinds.NVML_SNAPSHOT)
_SNAPSHOT_KINDS = kinds.SMI_SNAPSHOTS
_UNAME = re.compile(r"^Linux (?P<host>\S+) (?P<kernel>\d+\.\d+\S*) #", re.M)
_PRETTY = re.compile(r'^PRETTY_NAME="?(?P<os>[^"\n]+)"?', re.M)
_NVRM = re.compile(r"NVRM version: .*?Kernel Module(?: for \w+)?\s+(?P<driver>\d+\.\d+(?:\.\d+)?)")
#: nvidia-smi -q text label / XML tag -> fact. Each pattern starts with its literal label, so the
#: regex engine skips to it at C speed (``^\s+Label`` tries every line start of a 100 KB text).
_Q_FIELDS = {
    "vbios": (re.compile(r"VBIOS Version\s*: (?P<v>.+?)\s*$", re.M),
              re.compile(r"<vbios_version>(?P<v>[^<]*)</vbios_version>")),
    "persistence_mode": (re.compile(r"Persistence Mode\s*: (?P<v>.+?)\s*$", re.M),
                         re.compile(r"<persistence_mode>(?P<v>[^<]*)</persistence_mode>")),
}


@dataclass
class NodeConfig:
    """The configuration facts of one node; None = no evidence said it."""

    host: str
    driver: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    torch: str | None = None
    kernel: str | None = None
    os: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    vbios: str | None = None
    persistence_mode: str | None = None
    ecc_mode: str | None = None
    mig_mode: str | None = None
    ib_ports_active: str | None = None  # "8/8" = Active IB ports of all IB ports
    ib_rate_gbps: str | None = None  # "400", or "mixed: 400 x7, 200 x1"
    sources: dict[str, str] = field(default_factory=dict)  # fact -> file it came from

    def facts(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in FIELDS}

    def set(self, name: str, value: object, source: str) -> None:
        """Record a fact unless an earlier (better) source already gave it."""
        if value in (None, "") or getattr(self, name) is not None:
            return
        setattr(self, name, value)
        self.sources[name] = source

    def to_dict(self) -> dict:
        return {"host": self.host, **self.facts(), "sources": dict(self.sources)}


def _snapshot_facts(cfg: NodeConfig, files: list[InputFile]) -> None:
    """GPU model, count, driver, CUDA, ECC and MIG from the richest nvidia-smi snapshot of the node,
    VBIOS and persistence mode from the same file's text (the GPU records do not carry them)."""
    order = {kind: i for i, kind in enumerate(_SNAPSHOT_KINDS)}
    snapshots = sorted((f for f in files if f.kind in order and summary_of(f).records), key=lambda f: order[f.kind])
    if not snapshots:
        return
    best = snapshots[0]
    src = best.display
    for name, value in summary_of(best).snapshot_facts:
        cfg.set(name, value, src)
    for name, value in text_facts(best):
        cfg.set(name, value, src)


class _Recorder:
    """Collects ``set(name, value, source)`` calls in order: the facts a file's own text says."""

    def __init__(self) -> None:
        self.items: list[tuple[str, object]] = []

    def set(self, name: str, value: object, _source: str) -> None:
        self.items.append((name, value))


def text_facts(f: InputFile) -> list[tuple[str, object]]:
    """The facts read from the raw text of ``f`` (VBIOS and persistence mode of an nvidia-smi
    snapshot; kernel, OS, driver, torch/NCCL of version files), in order. Read once and kept on
    the file (``f.facts``): a per-node digest carries them, so a 10,000-node diagnosis reads no
    node's raw files."""
    if f.facts is None:
        rec = _Recorder()
        if f.kind in (kinds.NVIDIA_SMI_XML, kinds.NVIDIA_SMI_Q):
            try:
                text = f.path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = None
            for name, (q_text, q_xml) in _Q_FIELDS.items() if text is not None else ():
                pattern = q_xml if f.kind == kinds.NVIDIA_SMI_XML else q_text
                rec.set(name, summarize_values([m["v"] for m in pattern.finditer(text)]), f.display)
        elif f.kind in SNIFF_KINDS:
            _sniff(rec, f)
        f.facts = rec.items
    return f.facts


def _ib_facts(cfg: NodeConfig, files: list[InputFile]) -> None:
    ports = [p for f in files if f.kind == kinds.IBSTAT for p in summary_of(f).ib_ports]
    if not ports:
        return
    src = next(f.display for f in files if f.kind == kinds.IBSTAT)
    cfg.set("ib_ports_active", f"{sum(1 for up, _rate in ports if up)}/{len(ports)}", src)
    cfg.set("ib_rate_gbps", summarize_values([f"{rate:g}" for up, rate in ports if up and rate is not None]), src)


def _sniff(cfg: NodeConfig | _Recorder, f: InputFile) -> None:
    """Version files the parsers do not claim: uname, os-release, the NVRM version, the collector's
    python-stack.json and NVML snapshot."""
    try:
        if f.path.stat().st_size > SNIFF_BYTES:
            return
        text = f.path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    src = f.display
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        if str(doc.get("schema", "")).startswith("gpulib.nvml-snapshot"):
            gpus = [g for g in doc.get("gpus") or [] if not g.get("lost")]
            cfg.set("driver", doc.get("driver_version"), src)
            cfg.set("cuda", doc.get("cuda_driver_version"), src)
            cfg.set("gpu_model", summarize_values([g.get("name") for g in gpus]), src)
            cfg.set("gpu_count", len(gpus) if doc.get("gpus") is not None else None, src)
            cfg.set("vbios", summarize_values([g.get("vbios_version") for g in gpus]), src)
            for name, key in (("persistence_mode", "persistence_mode"), ("ecc_mode", "ecc_mode_current"),
                              ("mig_mode", "mig_mode_current")):
                cfg.set(name, summarize_values([flag(g.get(key)) for g in gpus]), src)
        elif "torch" in doc or "nccl" in doc:
            cfg.set("torch", doc.get("torch"), src)
            cfg.set("nccl", doc.get("nccl"), src)
        return
    m = _UNAME.search(text)
    if m:
        cfg.set("kernel", m["kernel"], src)
    m = _PRETTY.search(text)
    if m:
        cfg.set("os", m["os"].strip(), src)
    m = _NVRM.search(text)
    if m:
        cfg.set("driver", m["driver"], src)


def _job_log_facts(configs: dict[str, NodeConfig], inputs: Inputs) -> None:
    """What the job really loaded, per host: ``host:pid:tid [0] NCCL INFO NCCL version 2.21.5+cuda12.4``
    and the job's own ``torch 2.3.1+cu121`` print (a node known only from its job log counts too).
    A version line without a host prefix (``NCCL version 2.18.5+cuda12.2`` under NCCL_DEBUG=VERSION)
    belongs to the file's host: its folder's, else the one host its prefixed lines all name."""
    for f in inputs.of_kind(kinds.TRAINING_LOG):
        named = {h for h in (getattr(ev, "host", None) for ev in f.records) if h}
        file_host = f.host or (next(iter(named)) if len(named) == 1 else None)
        for ev in f.records:
            kind = getattr(ev, "kind", None)
            if kind not in ("nccl_version", "torch_version"):
                continue
            host = ev.host or file_host
            if host:
                cfg = configs.setdefault(host, NodeConfig(host))
                cfg.set("nccl" if kind == "nccl_version" else "torch", ev.details.get("version"), f.display)


def node_configs(inputs: Inputs) -> dict[str, NodeConfig]:
    """Configuration facts of every host of already gathered evidence (no file is parsed twice)."""
    by_host: dict[str, list[InputFile]] = {}
    for f in inputs.files:
        if f.host and f.kind != kinds.TRAINING_LOG:
            by_host.setdefault(f.host, []).append(f)
    configs: dict[str, NodeConfig] = {}
    for host in sorted(by_host):
        files = by_host[host]
        cfg = NodeConfig(host)
        _snapshot_facts(cfg, files)
        for f in files:
            if f.kind in SNIFF_KINDS:
                for name, value in text_facts(f):
                    cfg.set(name, value, f.display)
        _ib_facts(cfg, files)
        if any(v is not None for v in cfg.facts().values()):
            configs[host] = cfg
    _job_log_facts(configs, inputs)
    return dict(sorted(configs.items()))


def configs_from_paths(paths: list[str | Path], tz: str | None = None) -> dict[str, NodeConfig]:
    """Gather bundles / raw folders (as :func:`gpulib.diagnose.diagnose` does) and read the facts."""
    return node_configs(gather([Path(p) for p in paths], tz))
