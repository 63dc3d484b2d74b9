"""``gpulib slurm healthcheck``: preflight's self-check of this node, acted on through Slurm.

For ``HealthCheckProgram=`` (slurmd runs it every ``HealthCheckInterval`` seconds and at start,
as root, and kills it after 60 s) or as a ``Prolog``. It runs the single-node part of the
preflight runbook (notebook 08: every GPU visible, no pending row remap or uncorrectable ECC,
no slowdown reasons, no leftover processes, no Xid in the kernel log, one driver) - not the NCCL
fabric test, which needs the whole node for minutes - on a fresh capture of this node, or on
``--evidence PATH`` (a bundle or recorded tool outputs: replaying what a node printed).

* **no-go** (an error or critical finding): ``scontrol update nodename=NODE state=drain
  reason="gpulib: <first blocking finding>"``. A node someone else drained (a reason that does
  not start with ``gpulib:``) is left alone: their reason says more than ours.
* **go**: a node drained with a ``gpulib:`` reason is resumed - the checks that drained it now
  pass. Nothing else is ever resumed.
* the check itself failing (scontrol unreachable, the capture crashing) changes nothing on the
  node: a monitoring failure must not take a healthy node out of service.

``--gpus N`` says how many GPUs this node must show (default: Slurm's ``Gres=gpu:...`` for it;
without one, at least one - a GPU node that shows none is a no-go). ``--gpus 0`` marks a node
without GPUs, where only the kernel-log and driver checks apply.

Exit codes (docs/ARCHITECTURE.md): 0 go, 1 go with warnings, 2 usage error, 3 no-go (drained), 5 the check
itself failed. Slurm ignores a health check's exit code; it acts only on the drain.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpulib import exit_codes
from gpulib.errors import InputError
from gpulib.evidence import kinds
from gpulib.findings import Finding
from gpulib.readable import require_readable
from gpulib.slurm import scontrol
from gpulib.slurm.capture import capture
from gpulib.slurm.names import unsafe_reason

#: Collectors a periodic health check needs (seconds, not a minute: no IPMI, no torch probe).
QUICK_COLLECTORS = ["nvml", "nvidia-smi-q-xml", "kernel-log", "gpu-device-users", "versions"]
#: Default seconds for the whole check (slurmd kills a HealthCheckProgram after 60 s).
DEFAULT_BUDGET_S = 45.0

EXIT_GO, EXIT_WARN, EXIT_USAGE, EXIT_NO_GO, EXIT_FAILED = (exit_codes.OK, exit_codes.SOFT, exit_codes.USAGE, exit_codes.HARD,
                                                         exit_codes.RUN_FAILED)


@dataclass
class CheckResult:
    """The go/no-go of one node: ``verdict`` GO | NO-GO, the findings, and ``cause``, the one
    line a drain reason carries."""

    verdict: str
    findings: list[Finding] = field(default_factory=list)
    cause: str | None = None
    gpus_seen: int = 0

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]


def _short(host: str) -> str:
    return host.split(".")[0].lower()


def judge_only(files, evidence: Path, node: str) -> None:
    """Refuse evidence that cannot be this node's: the drain acts on ``node``, so a bundle of
    another host (its manifest, or host-prefixed lines) would drain this node for that host's
    fault; and evidence of which nothing could be read says nothing about any node (a no-go on
    it would drain a healthy node). Files that name no host (a replayed ``nvidia-smi -q``) are
    taken as this node's: that is what replaying recorded outputs means."""
    if not any(f.kind not in kinds.NOTHING_READ for f in files.files):
        raise InputError("nothing in the evidence could be read: no verdict on this node is possible",
                         path=str(evidence), hint="give a bundle or the node's recorded tool outputs (nvidia-smi -q, "
                                                  "the kernel log)")
    others = sorted({f.host for f in files.files if f.host and f.host_basis in ("bundle", "content")
                     and _short(f.host) != _short(node)})
    if others:
        raise InputError(f"the evidence is of {', '.join(others)}, not of this node ({node}): a health check judges "
                         f"only the node it runs on, and would drain {node} for another host's fault",
                         path=str(evidence), hint="run it on that node, or give --node NAME of the node the evidence "
                                                  "is of")


def self_check(evidence: Path, expected_gpus: int | None, node: str | None = None) -> CheckResult:
    """Preflight's single-node checks (:func:`gpulib.preflight.gate.self_check`, the same notebook 08
    runs) on ``evidence``. ``expected_gpus``: None = at least one; 0 = a node without GPUs; N = N visible.
    ``node``: the evidence must be of this node (:func:`judge_only`)."""
    from gpulib.diagnose.cache import Evidence  # the diagnosis: only when a check runs
    from gpulib.preflight import gate

    opened = Evidence.open(evidence)
    files, diagnosis = opened.files, opened.diagnosis
    if node is not None:
        judge_only(files, evidence, node)
    seen = gate.gpus_seen(files.snapshots())
    recorded = gate.self_check(diagnosis, seen, expected_gpus)  # the preflight's own list (notebook 08), as JSON
    verdict = gate.go_no_go(recorded)
    findings = [Finding.from_dict(f) for f in recorded]
    blocking = [f for f in findings if f.severity in ("critical", "error")]
    return CheckResult(verdict["verdict"], findings, blocking[0].title if blocking else None, seen)


@dataclass
class HealthOutcome:
    """What the health check found and did to the node. ``action``: drained | resumed | none | failed."""

    node: str
    check: CheckResult | None
    action: str
    message: str
    exit_code: int


def run_healthcheck(env: dict[str, str], *, node: str | None = None, evidence: Path | None = None,
                    expected_gpus: int | None = None, budget_s: float = DEFAULT_BUDGET_S,
                    dry_run: bool = False) -> HealthOutcome:
    """Check this node and drain or resume it through scontrol (never raises for Slurm trouble; an
    unsafe node name or evidence that is not this node's is an :class:`InputError`, exit 2)."""
    node = scontrol.node_name(node, env)
    if reason := unsafe_reason(node):  # the live capture is written to a folder of this name
        raise InputError(f"the node name {node!r} {reason}", hint="give --node the node's Slurm name")
    if evidence is not None:
        require_readable([evidence], what="evidence", special=False)
    try:
        state = scontrol.show_node(node, timeout_s=min(scontrol.TIMEOUT_S, budget_s / 4))
    except scontrol.SlurmError as exc:
        if not dry_run:
            return HealthOutcome(node, None, "failed", f"cannot read the node from Slurm: {exc}", EXIT_FAILED)
        state = None
    if expected_gpus is None and state is not None:
        expected_gpus = state.gpus_configured
    scratch = None
    try:
        if evidence is None:
            scratch = Path(tempfile.mkdtemp(prefix="gpulib-healthcheck-"))
            result = capture(scratch / node, node, budget_s * 0.7, only=QUICK_COLLECTORS)
            if result.bundle is None:
                return HealthOutcome(node, None, "failed", f"capture of this node failed: {result.reason}",
                                     EXIT_FAILED)
            check = self_check(result.bundle, expected_gpus)
        else:
            check = self_check(evidence, expected_gpus, node)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return _act(node, state, check, dry_run)


def _act(node: str, state, check: CheckResult, dry_run: bool) -> HealthOutcome:
    ours = state is not None and state.draining and (state.reason or "").startswith(scontrol.REASON_PREFIX)
    if check.verdict == "NO-GO":
        reason = scontrol.one_line_reason(check.cause or "preflight no-go")
        if state is not None and state.draining and not ours:
            return HealthOutcome(node, check, "none", f"no-go ({check.cause}); already drained by someone else "
                                                      f"({state.reason!r}): left as is", EXIT_NO_GO)
        if ours and state.reason == reason:
            return HealthOutcome(node, check, "none", f"no-go; still drained: {reason}", EXIT_NO_GO)
        if dry_run:
            return HealthOutcome(node, check, "none", f"no-go; would drain: {reason}", EXIT_NO_GO)
        try:
            scontrol.drain(node, reason)
        except scontrol.SlurmError as exc:
            return HealthOutcome(node, check, "failed", f"no-go, but the drain failed: {exc}", EXIT_FAILED)
        return HealthOutcome(node, check, "drained", f"no-go; drained: {reason}", EXIT_NO_GO)
    code = EXIT_WARN if check.warnings else EXIT_GO
    if not ours:
        return HealthOutcome(node, check, "none", "go" + (f" with {len(check.warnings)} warning(s)"
                                                          if check.warnings else ""), code)
    if dry_run:
        return HealthOutcome(node, check, "none", f"go; would resume (drained by gpulib: {state.reason!r})", code)
    try:
        scontrol.resume(node)
    except scontrol.SlurmError as exc:
        return HealthOutcome(node, check, "failed", f"go, but the resume failed: {exc}", EXIT_FAILED)
    return HealthOutcome(node, check, "resumed", f"go; resumed (was drained: {state.reason!r})", code)
