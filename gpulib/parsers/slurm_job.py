"""Slurm's record of a job: ``scontrol show job [-d] [-o] [JOBID]`` (and ``scontrol show node``).

Why it matters in an incident: the job record is the scheduler's verdict, written by the one
component that watched every node. ``JobState=NODE_FAIL`` says a node of the allocation stopped
answering slurmctld (power, panic, network) - a hard cause the ranks' NCCL timeouts only echo;
``OUT_OF_MEMORY`` says the cgroup killed a step for host memory; ``TIMEOUT`` says the job ran
into its time limit (often a hang nobody noticed); ``FAILED`` with ``ExitCode=1:0`` is the
batch script's own exit. ``ExitCode=E:S`` is the script's exit status and the signal that killed
it; ``DerivedExitCode`` the highest exit of any step. ``-d`` adds one line per node group with
the CPUs and GPUs (``GRES=gpu:8(IDX:0-7)``) the job held there.

While an ``Epilog`` runs the job shows ``JobState=COMPLETING``: the final state is only set
when every node finished its epilog. ``Reason=NonZeroExitCode`` and the exit codes are already
final then, which is what :func:`ended_badly` reads.

Times are printed in slurmctld's local zone without an offset: they are read in ``tz`` (the
bundle's zone or ``--tz``; default UTC).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.logtime import stamp_in, zone_of
from gpulib.parsers.slurm import expand_nodelist

KIND = "slurm_job"

#: Every job state Slurm prints (``squeue``/``sacct``/``scontrol`` long names).
JOB_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "COMPLETING", "CONFIGURING", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PENDING", "PREEMPTED", "RESV_DEL_HOLD", "REQUEUE_FED", "REQUEUE_HOLD", "REQUEUED",
    "RESIZING", "REVOKED", "RUNNING", "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT", "STOPPED", "SUSPENDED", "TIMEOUT",
})
#: End states that mean the job did not finish on its own terms (the epilog captures these).
BAD_END_STATES = frozenset({"FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"})
#: ``Reason=`` values slurmctld sets while a badly ended job is still COMPLETING.
BAD_REASONS = frozenset({"NonZeroExitCode", "TimeLimit", "NodeDown", "NodeFail", "OutOfMemory", "BootFail",
                         "DeadLine", "RaisedSignal"})

_KEY = re.compile(r"(?:(?<=\s)|^)(?P<key>[A-Za-z][\w/:.]*)=")
_JOB_START = re.compile(r"^\s*JobId=\d")
_NODE_START = re.compile(r"^\s*NodeName=\S")
_DETAIL = re.compile(r"^\s+Nodes=\S")
_EXIT = re.compile(r"^(?P<code>-?\d+):(?P<signal>\d+)$")
_DURATION = re.compile(r"^(?:(?P<days>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)$")
_MEM = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)$")
_GPU_COUNT = re.compile(r"(?:^|,)gpu(?::[^:,(]+)?:(?P<n>\d+)")
_NULLS = ("(null)", "None", "Unknown", "N/A", "")


@dataclass
class NodeDetail:
    """One ``-d`` line: what the job held on ``nodes`` (CPU ids, memory, GPUs by index)."""

    nodes: list[str]
    cpu_ids: str | None
    mem_mib: int | None
    gres: str | None
    gpu_indices: list[int] = field(default_factory=list)
    line: int = 0


@dataclass
class SlurmJob:
    """One job as ``scontrol show job`` printed it. ``exit_code``/``exit_signal`` are the batch
    script's (``ExitCode=E:S``); ``derived_exit_code`` the highest of its steps. Times are UTC."""

    job_id: str
    job_name: str | None = None
    user: str | None = None
    job_state: str | None = None
    reason: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    derived_exit_code: int | None = None
    derived_exit_signal: int | None = None
    partition: str | None = None
    node_list: str | None = None
    nodes: list[str] = field(default_factory=list)
    batch_host: str | None = None
    num_nodes: int | None = None
    restarts: int | None = None
    submit_time_utc: str | None = None
    start_time_utc: str | None = None
    end_time_utc: str | None = None
    run_time_s: float | None = None
    time_limit_s: float | None = None
    std_out: str | None = None
    std_err: str | None = None
    work_dir: str | None = None
    command: str | None = None
    node_details: list[NodeDetail] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def gpus_per_node(self) -> dict[str, int]:
        """GPUs the job held per node, from the ``-d`` lines (empty without ``-d``)."""
        return {n: len(d.gpu_indices) for d in self.node_details for n in d.nodes if d.gpu_indices}


@dataclass
class SlurmNode:
    """One node as ``scontrol show node`` printed it. ``state`` keeps Slurm's flags
    (``IDLE+DRAIN``); ``reason`` is the text only - Slurm's ``[user@time]`` suffix is split off."""

    name: str
    state: str | None = None
    reason: str | None = None
    reason_user: str | None = None
    reason_time_utc: str | None = None
    gres: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def state_flags(self) -> set[str]:
        return set((self.state or "").upper().replace("*", "").split("+")) - {""}

    @property
    def draining(self) -> bool:
        """DRAIN set (``IDLE+DRAIN``, ``MIXED+DRAIN``, ``DRAINED``, ``DRAINING``)."""
        return any(flag.startswith("DRAIN") for flag in self.state_flags)

    @property
    def gpus_configured(self) -> int | None:
        """GPUs Slurm was told this node has (``Gres=gpu:h100:8``); None when no GPU gres is set."""
        if not self.gres or self.gres in _NULLS:
            return None
        counts = [int(m["n"]) for m in _GPU_COUNT.finditer(re.sub(r"\([^)]*\)", "", self.gres))]
        return sum(counts) if counts else None


def split_exit(text: str | None) -> tuple[int | None, int | None]:
    """``'1:0'`` -> (1, 0); anything else -> (None, None)."""
    m = _EXIT.match((text or "").strip())
    return (int(m["code"]), int(m["signal"])) if m else (None, None)


def duration_s(text: str | None) -> float | None:
    """Slurm's ``[DD-]HH:MM:SS`` / ``MM:SS`` -> seconds; UNLIMITED, N/A, junk -> None."""
    m = _DURATION.match((text or "").strip())
    if not m:
        return None
    return (int(m["days"] or 0) * 86400 + int(m["h"] or 0) * 3600 + int(m["m"]) * 60 + float(m["s"]))


def normalise_state(text: str | None) -> tuple[str | None, bool]:
    """(state, was_truncated): ``'CANCELLED by 1000'`` -> CANCELLED; ``sacct``'s cut ``'OUT_OF_ME+'``
    -> OUT_OF_MEMORY when exactly one state starts so; an unknown word is returned as printed."""
    word = (text or "").strip().split(" ")[0].upper()
    if not word:
        return None, False
    if word.endswith("+"):
        stem = word[:-1]
        hits = [s for s in JOB_STATES if s.startswith(stem)]
        return (hits[0] if len(hits) == 1 else stem), True
    return word, False


def fields(text: str) -> dict[str, str]:
    """``Key=value`` pairs of scontrol's text: a value runs to the next `` Key=`` (values such as
    ``Reason=gpulib: no GPU [root@...]`` or ``OS=Linux 6.1 #1 SMP`` hold spaces)."""
    out: dict[str, str] = {}
    matches = list(_KEY.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out.setdefault(m["key"], text[m.end():end].strip())
    return out


def _value(record: dict[str, str], key: str) -> str | None:
    value = record.get(key)
    return None if value is None or value in _NULLS else value


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _mem_mib(text: str | None) -> int | None:
    m = _MEM.match((text or "").strip())
    if not m:
        return None
    scale = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "P": 1024 ** 3}[m["unit"]]
    return int(float(m["n"]) * scale)


def _indices(gres: str) -> list[int]:
    """``gpu:h100:8(IDX:0-3,6-7)`` -> [0, 1, 2, 3, 6, 7]."""
    m = re.search(r"IDX:([\d,\-]+)", gres)
    out: list[int] = []
    for part in (m.group(1).split(",") if m else []):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _blocks(text: str, start: re.Pattern) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each record: a record starts at a line matching ``start``."""
    blocks: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if start.match(line):
            blocks.append((number, [line]))
        elif blocks and line.strip():
            blocks[-1][1].append(line)
    return blocks


def looks_like(head: str) -> bool:
    lines = head.splitlines()[:40]
    return any(_JOB_START.match(line) for line in lines) and any("JobState=" in line for line in lines)


def parse(text: str, source: str = "<text>", *, tz: str | None = None, **_opts) -> ParseResult[SlurmJob]:
    """Every job of ``scontrol show job`` output (multi-line, ``-d`` or one-line ``-o``)."""
    result: ParseResult[SlurmJob] = ParseResult(KIND)
    zone = zone_of(tz)

    def when(value: str | None) -> str | None:
        return stamp_in(value, year=None, tz=zone) if value else None

    blocks = _blocks(text, _JOB_START)
    if not blocks and text.strip():
        result.problems.append(Problem(source, "no 'JobId=' record: not scontrol show job output"))
    for first, lines in blocks:
        record = fields(" ".join(line for line in lines if not _DETAIL.match(line)))
        job = SlurmJob(job_id=record.get("JobId", "?"), line=first, fields=record)
        job.job_name = _value(record, "JobName")
        job.user = (_value(record, "UserId") or "").split("(")[0] or None
        state, _ = normalise_state(_value(record, "JobState"))
        job.job_state = state
        job.reason = _value(record, "Reason")
        job.exit_code, job.exit_signal = split_exit(record.get("ExitCode"))
        job.derived_exit_code, job.derived_exit_signal = split_exit(record.get("DerivedExitCode"))
        job.partition = _value(record, "Partition")
        job.node_list = _value(record, "NodeList")
        job.nodes = expand_nodelist(job.node_list) if job.node_list else []
        job.batch_host = _value(record, "BatchHost")
        job.num_nodes = _int((record.get("NumNodes") or "").split("-")[0])
        job.restarts = _int(record.get("Restarts"))
        job.submit_time_utc = when(_value(record, "SubmitTime"))
        job.start_time_utc = when(_value(record, "StartTime"))
        job.end_time_utc = when(_value(record, "EndTime"))
        job.run_time_s = duration_s(record.get("RunTime"))
        job.time_limit_s = duration_s(record.get("TimeLimit"))
        job.std_out, job.std_err = _value(record, "StdOut"), _value(record, "StdErr")
        job.work_dir, job.command = _value(record, "WorkDir"), _value(record, "Command")
        for offset, line in enumerate(lines):
            if _DETAIL.match(line):
                d = fields(line.strip())
                gres = _value(d, "GRES")
                job.node_details.append(NodeDetail(expand_nodelist(d.get("Nodes", "")), _value(d, "CPU_IDs"),
                                              _mem_mib(d.get("Mem")), gres, _indices(gres or ""),
                                              first + offset))
        if job.job_state is None:
            result.problems.append(Problem(source, f"job {job.job_id}: no JobState", first))
        elif job.job_state not in JOB_STATES:
            result.problems.append(Problem(source, f"job {job.job_id}: unknown JobState {job.job_state!r}", first))
        result.records.append(job)
    return result


def parse_nodes(text: str, source: str = "<text>", *, tz: str | None = None) -> ParseResult[SlurmNode]:
    """Every node of ``scontrol show node [NAME]`` output."""
    result: ParseResult[SlurmNode] = ParseResult("slurm_node")
    zone = zone_of(tz)
    blocks = _blocks(text, _NODE_START)
    if not blocks and text.strip():
        result.problems.append(Problem(source, "no 'NodeName=' record: not scontrol show node output"))
    for first, lines in blocks:
        record = fields(" ".join(lines))
        node = SlurmNode(record.get("NodeName", "?"), _value(record, "State"), None, fields=record, line=first,
                         gres=_value(record, "Gres"))
        reason = _value(record, "Reason")
        if reason:
            m = re.match(r"^(?P<text>.*?)\s*\[(?P<user>[^@\]]+)@(?P<time>[^\]]+)\]$", reason)
            if m:
                node.reason, node.reason_user = m["text"], m["user"]
                node.reason_time_utc = stamp_in(m["time"], year=None, tz=zone)
            else:
                node.reason = reason
        result.records.append(node)
    return result


def ended_badly(job: SlurmJob, *, env_exit: str | None = None, env_derived: int | None = None) -> str | None:
    """Why the job counts as ended badly, or None when it ended well (or was cancelled).

    Reads the final state when there is one; while the job is COMPLETING (inside the Epilog) the
    ``Reason`` and exit codes. ``env_exit`` is the epilog's ``SLURM_JOB_EXIT_CODE2`` (``E:S``),
    ``env_derived`` its ``SLURM_JOB_DERIVED_EC`` (a wait() status): the same facts from the
    environment, for when scontrol could not be asked.
    """
    if job.job_state in BAD_END_STATES:
        return f"JobState={job.job_state}" + (f" Reason={job.reason}" if job.reason else "")
    if job.job_state == "CANCELLED":
        return None
    if job.reason in BAD_REASONS:
        return f"Reason={job.reason}"
    if job.exit_code:
        return f"ExitCode={job.exit_code}:{job.exit_signal or 0}"
    if job.derived_exit_code:
        return f"DerivedExitCode={job.derived_exit_code}:{job.derived_exit_signal or 0}"
    return env_ended_badly(env_exit, env_derived)


def env_ended_badly(env_exit: str | None, env_derived: int | None) -> str | None:
    """The epilog environment's verdict alone (scontrol unavailable): a non-zero exit status.
    A signal alone is not counted: ``scancel`` ends a job with signal 15 and exit 0."""
    code, _signal = split_exit(env_exit)
    if code:
        return f"SLURM_JOB_EXIT_CODE2={env_exit}"
    if env_derived and env_derived >> 8:
        return f"SLURM_JOB_DERIVED_EC={env_derived}"
    return None
