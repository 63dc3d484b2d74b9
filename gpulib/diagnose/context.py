"""What every rule needs: the parsed inputs, the identity map, and a way to mint findings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.diagnose.joins import IdentityMap
from gpulib.diagnose.node_facts import NodeConfig, node_configs
from gpulib.evidence.gather import InputFile, Inputs
from gpulib.evidence.thresholds import Thresholds
from gpulib.findings import Finding, Quote
from gpulib.parsers.logtime import stamp_in, zone_of


@dataclass
class Context:
    inputs: Inputs
    ids: IdentityMap
    tz: str | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    findings: list[Finding] = field(default_factory=list)
    _counter: dict[str, int] = field(default_factory=dict)
    _records: dict[tuple, list] = field(default_factory=dict)
    _configs: dict[str, NodeConfig] | None = None
    #: (file, line) of lines a kind-specific rule judged in full (a SEL entry placed on the incident
    #: timeline and found to be history): the signature scan must not judge them again out of context.
    judged: set[tuple[str, int]] = field(default_factory=set)
    #: What a shared pass read from the inputs once per diagnosis, by the pass's name (the normal
    #: ends of the job logs, :mod:`gpulib.diagnose.ends`): the inputs do not change while rules run.
    memo: dict[str, object] = field(default_factory=dict)

    def add(self, prefix: str, **fields) -> Finding:
        """Mint a finding with a stable, readable id (``xid79-1``, ``oom-1``, ...). A host named by a
        Kubernetes pod becomes the pod's node (what the operator drains); the pod is kept to say where."""
        n = self._counter.get(prefix, 0) + 1
        self._counter[prefix] = n
        if "title" in fields:
            fields["title"] = without_unknowns(fields["title"])
        node = self.ids.node_of(fields.get("host"))
        if node != fields.get("host"):
            fields["extra"] = {"pod": fields["host"]} | fields.get("extra", {})
            fields["host"] = node
        finding = Finding(id=f"{prefix}-{n}", **fields)
        self.findings.append(finding)
        return finding

    def records(self, *kinds: str) -> list[tuple[InputFile, object]]:
        """(file, record) for every record of files of the given kinds (computed once per kinds)."""
        if kinds not in self._records:
            self._records[kinds] = [(f, rec) for f in self.inputs.of_kind(*kinds) for rec in f.records]
        return self._records[kinds]

    def configs(self) -> dict[str, NodeConfig]:
        """The configuration facts of every host (:func:`~gpulib.diagnose.node_facts.node_configs`),
        read once: the version-skew rule and the config diff both compare them."""
        if self._configs is None:
            self._configs = node_configs(self.inputs)
        return self._configs

    def utc(self, stamp: str | None, file: InputFile | None = None) -> str | None:
        """A record's time as ``...Z``; naive stamps (nvidia-smi prints no zone) read in the file's
        bundle zone or ``--tz`` (default UTC)."""
        if not stamp:
            return None
        if stamp.endswith("Z"):
            return stamp
        return stamp_in(stamp, year=None, tz=zone_of((file.timezone if file else None) or self.tz))


_UNKNOWN_PART = re.compile(r"(?:\s(?:on|of|at|by|from) None\b|\s(?:for|after) None ?(?:s|ms|seconds)\b|\b[Rr]ank None:?\s?"
                           r"|\bGPU None\s?|\(None\)\s?)")


def without_unknowns(title: str) -> str:
    """A title with the parts that name an unknown host/rank/GPU/duration left out: an operator
    reading "rank None on None" or "for None s" learns nothing and may think the tool is broken."""
    return re.sub(r"\s{2,}", " ", _UNKNOWN_PART.sub(" ", title)).strip().replace(" :", ":")


def quote(file: InputFile, line: int | None, text: str) -> Quote:
    """A finding's quote of one line of ``file`` (named as the user gave it), its text stripped."""
    return Quote(file.display, line, text.strip())


def place(ctx: Context, finding: Finding, **names) -> Finding:
    """Fill host / GPU / rank of a finding from any of its names (rank, pci, pid, host)."""
    ref = ctx.ids.locate(**names)
    finding.host = finding.host or ref.host
    if ref.pod and finding.host == ref.host:
        finding.extra.setdefault("pod", ref.pod)
    finding.gpu_index = finding.gpu_index if finding.gpu_index is not None else ref.gpu_index
    finding.gpu_pci = finding.gpu_pci or ref.gpu_pci
    finding.gpu_uuid = finding.gpu_uuid or ref.gpu_uuid
    finding.rank = finding.rank if finding.rank is not None else ref.rank
    return finding
