"""What the steps that join nodes read from one file's records, in a few numbers.

Why: a 10,000-node incident holds ~80,000 GPU snapshots, ~80,000 GPU time series and ~150,000
kernel-log events, and on a healthy node none of them says anything a rule acts on. Three steps
still read every file, whatever it says: the identity join (which nvidia-smi index and UUID a PCI
bus id has on a host, :mod:`.joins`), the incident's year (:mod:`gpulib.evidence.gather`) and the configuration
facts of each node (:mod:`.node_facts`). This module is what those steps read - one
:class:`FileSummary` per file, made from its records by :func:`summarize` - so a per-node digest
(:mod:`gpulib.evidence.digest`) can carry the summary of a quiet file instead of its records, and the central
diagnosis joins 10,000 nodes in memory that does not hold their GPU records. The same function
serves a diagnosis of the raw files (:func:`summary_of`), so both read the same facts.

Also here: :func:`summarize_values` (one value for a node's GPUs or ports, or ``mixed: ...``),
which the configuration facts use everywhere.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field

from gpulib.evidence import kinds

#: Records a file's year is counted from (a job log of a million lines says its year in its first).
YEAR_RECORDS = 2000
#: Kinds of file whose records a rule reads together when they name one host: kernel events (the
#: Xid burst, the reboot, the OOM killer's context) and GPU records (the snapshot of a host, the
#: series of one GPU), each with the dcgm-exporter scrape that reports the same. A file a digest
#: carries as its summary is one of these (or ``ibstat``), and stays summarised only while no file
#: outside its node names the same host in its family (:mod:`gpulib.evidence.gather`).
JOINED_BY_HOST = {
    "kernel": (*kinds.KERNEL, kinds.DCGM_EXPORTER),
    "gpu": kinds.GPU_STATE,
    "ib": (kinds.IBSTAT,),
}
#: Kinds whose quiet files a digest may carry as a summary instead of their records.
SUMMARISED_KINDS = frozenset(k for members in JOINED_BY_HOST.values() for k in members) - {kinds.DCGM_EXPORTER}


@dataclass(slots=True)
class GpuName:
    """One GPU's names as a file gives them: ``index`` from a snapshot (None from a kernel
    ``gpu_identity`` line, which names only the UUID), ``host`` when the record says it (else the
    file's host, known only once hosts are assigned)."""

    pci: str
    host: str | None = None
    index: int | None = None
    uuid: str | None = None
    snapshot: bool = True  # a snapshot's record (index and UUID both ways), else a kernel identity line


@dataclass(slots=True)
class Listing:
    """The GPUs one nvidia-smi snapshot lists (per host the records name): what the check for a
    job GPU that vanished from the listing reads (:func:`gpulib.diagnose.rules.gpu.run`)."""

    host: str | None
    captured_at: str | None  # as the tool printed it (read in the file's zone by the rule)
    listed: list[str] = field(default_factory=list)  # PCI bus ids
    present: bool = False  # some GPU was readable (not only "GPU is lost" lines)


@dataclass(slots=True)
class FileSummary:
    """What the joining steps read from one file (see the module text)."""

    records: int = 0
    years: dict[int, int] = field(default_factory=dict)  # year -> stamps of the first YEAR_RECORDS records
    gpus: list[GpuName] = field(default_factory=list)
    listings: list[Listing] = field(default_factory=list)
    snapshot_facts: list[tuple[str, object]] = field(default_factory=list)  # node_facts, from GPU records
    ib_ports: list[tuple[bool, float | None]] = field(default_factory=list)  # (up, rate Gb/s) of IB ports
    hosts: list[str] = field(default_factory=list)  # hosts its records name

    def to_json(self) -> dict:
        return {"records": self.records, "years": sorted(self.years.items()),
                "gpus": [[g.pci, g.host, g.index, g.uuid, g.snapshot] for g in self.gpus],
                "listings": [[x.host, x.captured_at, x.listed, x.present] for x in self.listings],
                "snapshot_facts": [list(x) for x in self.snapshot_facts], "ib_ports": [list(p) for p in self.ib_ports],
                "hosts": self.hosts}

    @classmethod
    def from_json(cls, doc: dict) -> FileSummary:
        """A summary as a digest wrote it. Read only: what every node's summary says alike (the
        year counts, the facts, the IB ports, the PCI ids a snapshot lists) is one shared object,
        and so is a whole summary that names no host and no GPU by UUID - the kernel log's, the
        monitoring CSV's and ``ibstat``'s of 10,000 quiet nodes are three objects, not 30,000."""
        years = _share(tuple((int(y), int(n)) for y, n in doc["years"]))
        facts = _share(tuple(_share(tuple(x)) for x in doc["snapshot_facts"]))
        ports = _share(tuple(_share((bool(up), rate)) for up, rate in doc["ib_ports"]))
        hosts = _share(tuple(map(sys.intern, doc["hosts"])))
        gpus = [GpuName(sys.intern(pci), *rest) for pci, *rest in doc["gpus"]]  # 8 PCI ids, in every node
        listings = [Listing(host and sys.intern(host), at and sys.intern(at), _share(tuple(map(sys.intern, listed))),
                            present) for host, at, listed, present in doc["listings"]]
        return _shared_if_plain(cls(doc["records"], dict(years), gpus, listings, list(facts), list(ports), list(hosts)))


#: Values read from digests, by content: a few distinct ones in the whole fleet (see from_json).
_SHARED: dict[tuple, tuple] = {}
#: Whole summaries that name no GPU, by content.
_SUMMARIES: dict[tuple, FileSummary] = {}


def _share(value: tuple) -> tuple:
    return _SHARED.setdefault(value, value)


def summarize_values(values: list) -> str | None:
    """One value for a node: the value all GPUs/ports share, or ``mixed: a x7, b x1``."""
    values = [v for v in values if v not in (None, "")]
    if not values:
        return None
    counts = Counter(values)
    if len(counts) == 1:
        return values[0]
    return "mixed: " + ", ".join(f"{v} x{n}" for v, n in counts.most_common())


def flag(value: bool | None) -> str | None:
    return None if value is None else ("Enabled" if value else "Disabled")


def count_years(records: list) -> dict[int, int]:
    """Year -> how many of the first :data:`YEAR_RECORDS` records are stamped in it."""
    years: Counter = Counter()
    for rec in records[:YEAR_RECORDS]:
        stamp = getattr(rec, "time_utc", None) or getattr(rec, "captured_at", None)
        if isinstance(stamp, str) and stamp[:4].isdigit():
            years[int(stamp[:4])] += 1
    return dict(years)


def summarize(records: list) -> FileSummary:
    """The :class:`FileSummary` of a file's records (records of any parser; plain dicts give an
    empty one but their count)."""
    out = FileSummary(records=len(records), years=count_years(records))
    hosts: dict[str, None] = {}
    states, listings = [], {}
    sampled: set[tuple] = set()  # a series (`--query-gpu ... -l 60`) names each GPU once, however many samples
    for rec in records:
        host = getattr(rec, "host", None)
        if isinstance(host, str):
            hosts[host] = None
        if hasattr(rec, "pci_bus_id") and hasattr(rec, "index") and not hasattr(rec, "time_utc"):
            if rec.pci_bus_id:
                out.gpus.append(GpuName(rec.pci_bus_id, host, rec.index, getattr(rec, "uuid", None)))
        elif hasattr(rec, "pci_bus_id") and hasattr(rec, "index") and rec.pci_bus_id and rec.index is not None:
            names = (rec.pci_bus_id, host, rec.index, getattr(rec, "uuid", None))
            if names not in sampled:
                sampled.add(names)
                out.gpus.append(GpuName(*names))
        elif getattr(rec, "kind", None) == "gpu_identity" and getattr(rec, "pci_bus_id", None):
            uuid = rec.details.get("uuid")
            if uuid:
                out.gpus.append(GpuName(rec.pci_bus_id, host, None, uuid, snapshot=False))
        if hasattr(rec, "lost"):
            states.append(rec)
        if hasattr(rec, "lost") and hasattr(rec, "processes"):
            listing = listings.setdefault(host, Listing(host, None))
            listing.captured_at = listing.captured_at or rec.captured_at or None
            if rec.pci_bus_id:
                listing.listed.append(rec.pci_bus_id)
            listing.present = listing.present or not rec.lost
        if getattr(rec, "is_infiniband", False):
            out.ib_ports.append((bool(rec.up), rec.rate_gbps))
    out.listings = list(listings.values())
    out.hosts = list(hosts)
    if states:
        readable = [g for g in states if not g.lost]
        out.snapshot_facts = [
            ("driver", next((g.driver_version for g in states if g.driver_version), None)),
            ("cuda", next((g.cuda_version for g in states if g.cuda_version), None)),
            ("gpu_model", summarize_values([g.name for g in readable])),
            ("gpu_count", len(readable)),
            ("ecc_mode", summarize_values([flag(g.ecc_mode_enabled) for g in readable])),
            ("mig_mode", summarize_values([flag(g.mig_enabled) for g in readable])),
        ]
    return out


def summary_of(f) -> FileSummary:
    """``f``'s summary: the one its digest carried, else made from its records (and kept, for
    files that have a ``summary`` field: :class:`~gpulib.evidence.gather.InputFile`)."""
    found = getattr(f, "summary", None)
    if found is None:
        found = _shared_if_plain(summarize(f.records))
        if hasattr(f, "summary"):
            f.summary = found
    return found


def _shared_if_plain(summary: FileSummary) -> FileSummary:
    """One object for every summary alike that lists no GPUs and names no host and no GPU by UUID:
    nothing in it tells two nodes apart (read only, as from_json's)."""
    if summary.listings or any(g.host or g.uuid for g in summary.gpus):
        return summary
    key = (summary.records, _share(tuple(summary.years.items())), _share(tuple(map(_share, summary.snapshot_facts))),
           _share(tuple(summary.ib_ports)), _share(tuple(summary.hosts)),
           tuple((g.pci, g.index, g.snapshot) for g in summary.gpus))
    return _SUMMARIES.setdefault(key, summary)


__all__ = ["JOINED_BY_HOST", "SUMMARISED_KINDS", "FileSummary", "GpuName", "Listing", "count_years", "flag", "summarize",
           "summarize_values", "summary_of"]
