"""Typed results of inspecting one checkpoint file or directory.

Severities are kept apart because they call for different actions:
``incomplete`` (truncated, missing pieces: the save was interrupted - use an older checkpoint),
``corrupt`` (CRC mismatch, bad header: the bytes changed after the save - restore a replica),
``unsafe`` (globals that run code when unpickled: never ``torch.load`` it),
``needs_review`` (globals gpulib does not know as safe: allowlist policy - maybe a gadget no
scanner knows yet, so never recommended for resume and never advised for ``add_safe_globals``),
``needs_allowlist`` (known data-only objects that ``weights_only=True`` refuses), and
``warning`` / ``info`` for everything else worth knowing.

Plain classes, not dataclasses: ``gpulib ckpt inspect`` imports this module on every start, and
``dataclasses`` (with ``inspect``, ``ast`` and ``dis`` behind it) would cost it a sixth of its time.
"""

from __future__ import annotations

from gpulib.checkpoints.contents import ContentSummary

BLOCKING = ("incomplete", "corrupt")
MAX_VALUES = 200


class CheckpointIssue:
    """What the inspector found wrong or noteworthy in one checkpoint file (not an incident
    finding: ``severity`` here says whether the file can be resumed from)."""

    def __init__(self, severity: str, message: str) -> None:
        self.severity = severity  # incomplete | corrupt | unsafe | needs_review | needs_allowlist | warning | info
        self.message = message

    def __repr__(self) -> str:
        return f"CheckpointIssue({self.severity!r}, {self.message!r})"


class TensorRecord:
    """One tensor as the checkpoint describes it (never loaded)."""

    def __init__(self, name: str, dtype: str, shape: list, nbytes: int, storage: str | None = None,
                 location: str | None = None) -> None:
        self.name, self.dtype, self.shape, self.nbytes = name, dtype, shape, nbytes
        self.storage = storage  # storage key / shard file
        self.location = location  # 'cpu', 'cuda:3'


class GlobalRecord:
    """One global the pickle names, how often, and what gpulib makes of it."""

    def __init__(self, module: str, name: str, count: int, verdict: str, why: str) -> None:
        self.module, self.name, self.count = module, name, count
        self.verdict = verdict  # dangerous | needs_review | needs_allowlist | weights_only_ok
        self.why = why


class FileReport:
    """Everything inspecting one file or DCP folder found; ``valid`` = nothing blocks a resume."""

    def __init__(self, path: str, format: str, size_bytes: int | None = None) -> None:  # noqa: A002 - the report's field name
        self.path = path
        self.format = format  # torch_zip | torch_legacy | torchscript | pickle | safetensors | dcp | json | unknown | missing
        self.size_bytes = size_bytes
        self.findings: list[CheckpointIssue] = []
        self.tensors: list[TensorRecord] = []
        self.values: dict[str, object] = {}  # scalar leaves (first MAX_VALUES)
        self.globals: list[GlobalRecord] = []
        self.summary: ContentSummary | None = None
        self.meta: dict = {}
        self.deep_checked = False

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
