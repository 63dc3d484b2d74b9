"""Typed results of inspecting one checkpoint file or directory.

Severities are kept apart because they call for different actions:
``incomplete`` (truncated, missing pieces: the save was interrupted - use an older checkpoint),
``corrupt`` (CRC mismatch, bad header: the bytes changed after the save - restore a replica),
``unsafe`` (globals that run code when unpickled: never ``torch.load`` it),
``needs_review`` (globals gpulib does not know as safe: allowlist policy - maybe a gadget no
scanner knows yet, so never recommended for resume and never advised for ``add_safe_globals``),
``needs_allowlist`` (known data-only objects that ``weights_only=True`` refuses), and
``warning`` / ``info`` for everything else worth knowing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulib.checkpoints.contents import ContentSummary

BLOCKING = ("incomplete", "corrupt")
MAX_VALUES = 200


@dataclass
class CheckpointIssue:
    """What the inspector found wrong or noteworthy in one checkpoint file (not an incident
    finding: ``severity`` here says whether the file can be resumed from)."""

    severity: str  # incomplete | corrupt | unsafe | needs_review | needs_allowlist | warning | info
    message: str


@dataclass
class TensorRecord:
    name: str
    dtype: str
    shape: list
    nbytes: int
    storage: str | None = None  # storage key / shard file
    location: str | None = None  # 'cpu', 'cuda:3'


@dataclass
class GlobalRecord:
    module: str
    name: str
    count: int
    verdict: str  # dangerous | needs_review | needs_allowlist | weights_only_ok
    why: str


@dataclass
class FileReport:
    path: str
    format: str  # torch_zip | torch_legacy | torchscript | pickle | safetensors | dcp | json | unknown | missing
    size_bytes: int | None = None
    findings: list[CheckpointIssue] = field(default_factory=list)
    tensors: list[TensorRecord] = field(default_factory=list)
    values: dict[str, object] = field(default_factory=dict)  # scalar leaves (first MAX_VALUES)
    globals: list[GlobalRecord] = field(default_factory=list)
    summary: ContentSummary | None = None
    meta: dict = field(default_factory=dict)
    deep_checked: bool = False

    def add(self, severity: str, message: str) -> None:
        self.findings.append(CheckpointIssue(severity, message))

    @property
    def valid(self) -> bool:
        return not any(f.severity in BLOCKING for f in self.findings)

    @property
    def unsafe(self) -> bool:
        return any(f.severity == "unsafe" for f in self.findings)

    @property
    def untrusted(self) -> bool:
        """UNSAFE or needs review: never to be recommended for a resume."""
        return any(f.severity in ("unsafe", "needs_review") for f in self.findings)

    def reasons(self, severities=BLOCKING) -> list[str]:
        return [f.message for f in self.findings if f.severity in severities]

    def to_dict(self, with_tensors: bool = True) -> dict:
        d = {
            "path": self.path, "format": self.format, "size_bytes": self.size_bytes, "valid": self.valid,
            "unsafe": self.unsafe, "deep_checked": self.deep_checked,
            "findings": [f.__dict__ for f in self.findings],
            "summary": self.summary.to_dict() if self.summary else None,
            "globals": [g.__dict__ for g in self.globals], "meta": self.meta,
            "values": {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in self.values.items()},
        }
        if with_tensors:
            d["tensors"] = [t.__dict__ for t in self.tensors]
        return d
