"""Training job logs as engineers have them: torchrun/slurm/per-rank consoles, with NCCL_DEBUG.

What an interrupted job leaves behind is mostly *symptoms*: every healthy rank prints a watchdog
timeout, torchrun names the first process *it* saw die, slurm cancels the step. The few lines that
explain the incident (the OOM on one rank, the CUDA error, the rank that never arrived, the node
that fell back to TCP sockets) are buried in hundreds of MB of progress lines. This parser turns
the lines that matter into :class:`JobEvent` records:

* identity: NCCL ``Init START/COMPLETE`` (rank -> host, pid, cudaDev, nvmlDev, busId), ``Bootstrap``
  addresses (peer IP -> host), launcher lines such as ``device=cuda:5`` / ``(rank 11): env://, gpu 3``;
* transport: ``Using network IB|Socket``, ``NET/IB : No device found``, NCCL version;
* failures: watchdog timeouts of every torch generation (with/without SeqNum, NumelIn, PG prefixes),
  last enqueued/completed work, heartbeat-monitor kills, NCCL errors by class, NCCL WARN lines
  (IB completion errors, socket resets), CUDA OOM (all wordings, with the numbers), CUDA errors,
  Python exceptions, torchrun exit codes/signals and ChildFailedError reports, srun/slurmstepd
  errors, DataLoader and TCPStore/rendezvous errors;
* progress: step/iteration lines with s/step and ``*_ms`` metrics per rank, checkpoint save
  start/commit, "Training completed".

Launcher prefixes are stripped first: srun ``--label`` (``2: ``), mpirun (``[1,0]<stdout>:``), pdsh
(``node-3: ``), Ray (``(RayWorkerWrapper pid=1, ip=...)``) and torch's ``[rankN]:``.

Speed: a multi-GB log is read in chunks; only lines holding one of :data:`CATALOGUE_KEYWORDS`
(found by :mod:`gpulib.parsers.prefilter` at memory speed) are decoded and matched in detail.
Progress lines, which can be every line, are read at both ends of a large file and in sampled
windows in between (:func:`progress_ranges` says why the step-time analysis loses nothing).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from itertools import chain
from operator import attrgetter
from pathlib import Path

from gpulib.catalog.cuda_errors import DRIVER_CLASSES, load_cuda_errors, pattern
from gpulib.identity import normalize_pci
from gpulib.logs import get_logger
from gpulib.parsers import linescan
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.fold import Folder
from gpulib.parsers.kernel_prefix import MARKDOWN_QUOTE
from gpulib.parsers.linescan import ChunkReader, number_lines
from gpulib.parsers.logtime import first_year, modified_year, seconds_between, stamp_in, year_hint, zone_of
from gpulib.parsers.prefilter import KeywordLines

log = get_logger(__name__)

KIND = "training_log"

#: Literal byte strings that every interesting line contains at least one of. The detailed
#: regexes below only ever see lines that hold one of these (the prefilter), so each regex must be
#: reachable through one of them. The benchmark hands the same list to ``grep -E``.
CATALOGUE_KEYWORDS: tuple[bytes, ...] = (
    # watchdog / heartbeat (every torch generation)
    b"Watchdog caught", b"NCCL work", b"PG status", b"Process group watchdog", b"NCCL watchdog thread",
    b"ProcessGroupNCCL's watchdog", b"Heartbeat monitor", b"Terminating the process", b"Work WorkNCCL(",
    # NCCL errors and warnings
    b"NCCL WARN", b"NCCL error", b"ncclSystemError", b"ncclInternalError", b"ncclRemoteError",
    b"ncclUnhandledCudaError", b"ncclInvalidUsage", b"ncclInvalidArgument", b"Last error",
    # CUDA / Python
    b"CUDA out of memory", b"OutOfMemoryError", b"Tried to allocate", b"CUDA error", b"Assertion `",
    b"Error: ", b"Error:\n", b"Exception: ", b"Traceback (most recent",
    # launchers
    b"(exitcode", b"ChildFailedError", b"closing signal SIG", b": Exited with exit code", b"Aborted", b"Killed",
    b"CANCELLED AT", b"STEPD TERMINATED", b"DataLoader", b"TCPStore", b"Rendezvous", b"recvValue failed",
    b"store based barrier", b"death signal", b"rdzv_endpoint", b"rdzv-endpoint", b"hosts the TCP store", b"##[group]Run ",
    b"##[error]Process completed",
    # identity and transport (NCCL_DEBUG=INFO)
    b"Init COMPLETE", b"Init START", b"Using network", b"No device found", b"NCCL version", b"Bootstrap",
    b"NET/IB", b"NET/Socket", b"Process group destroyed", b"Succeeded", b" passed", b"NCCL_IB_DISABLE set",
    b"NCCL_IB_HCA set",
    # driver / runtime mismatch: every wording of the CUDA error table's driver rows
    *(w.encode() for row in load_cuda_errors() if row.klass in DRIVER_CLASSES for w in (*row.phrases, *row.names())),
)
#: Lines read only from the head and tail of a large log (every line of a small one): progress,
#: launcher identity, checkpoints and completion, which can be on every other line.
PROGRESS_KEYWORDS: tuple[bytes, ...] = (
    b"step", b"iteration", b"Iter", b"s/it", b"val batch", b"heckpoint", b"raining complete", b"raining finished",
    b"raining done", b"otal training time", b"successfully finished", b"train_runtime", b"torch ", b"torch=", b"torch version",
    b"orch.__version__", b"PyTorch version", b"device=cuda:", b"local_rank=", b"distributed init (rank", b"re-looped",
    b"srun: error", b"slurmstepd: error", b"real\t", b"real ", b"Data (t)", b"data_time", b"Data: ",
    b" PASSED", b"iter ", b"poch", b"raining is ", b"raining has ", b"echo $?", b"s saved", b"as saved", b"een saved",
    b"/sec", b"img/s", b"samples/s", b"tokens/s",
)

#: Event kinds that are not failures: identity, transport, versions, progress, and lines that only
#: accompany a failure reported by another kind (the traceback header before its exception, the
#: watchdog's progress line after its timeout, torchrun's SIGTERM to the surviving workers).
#: "No IB device" is transport identity: normal on a single node, and a socket fallback across
#: nodes shows up as socket/NCCL errors. ``gpulib watch`` alerts on every other kind.
INFO_KINDS = frozenset({
    "nccl_init", "nccl_transport", "nccl_version", "nccl_address", "nccl_no_ib", "nccl_ib_requested", "rank_device",
    "torch_version", "benign", "process_exited", "completed", "checkpoint_saved", "checkpoint_save_start", "step",
    "eval_progress", "traceback", "watchdog_progress", "sigterm_sent", "store_host", "ci_step_start", "barrier_wait",
    "test_passed",
})

# ---------------------------------------------------------------- launcher prefixes
#: mpirun --tag-output ``[1,3]<stderr>:`` (job id, rank) and horovodrun's ``[3]<stderr>:`` (rank only);
#: with --timestamp-output a ``date``-style stamp leads: ``Tue Mar  3 11:20:44 2026[1,3]<stderr>:``.
_MPI_TAG = re.compile(r"^\[(?:(?P<job>\d+),)?(?P<rank>\d+)\]<std(?:out|err)>:\s?")
#: ``kubectl logs --prefix`` (``-l app=...`` or a job's pods at once): ``[pod/<pod>/<container>] ``. The pod
#: is the node of the job as the job sees it (its name is also the NCCL host of its lines).
_KUBECTL_POD = re.compile(r"^\[pod/(?P<pod>[\w.-]+)/[\w.-]+\] ")
_MPI_STAMP = re.compile(r"^(?P<stamp>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})(?=\[[\d,]+\]<std)")
_SRUN_LABEL = re.compile(r"^\s{0,6}(?P<task>\d{1,6}): ")
#: pdsh/clush/DeepSpeed ``host: ``: a host with a digit, or any host name when what follows is itself a
#: known layer (an NCCL ``host:pid:tid [dev]`` prefix, a ``[rankN]``/glog/dmesg bracket, an ISO stamp);
#: then it may start with a digit too (a container's hex host name, ``5c2e9a0b71f4``).
_PDSH_HOST = re.compile(r"^(?P<host>\d{1,3}(?:\.\d{1,3}){3}|[a-z][\w-]*\d[\w.-]*|[A-Za-z0-9][\w.-]*(?=: (?:[\w.-]+:\d+:\d+ "
                        r"\[\d+\]|\[(?:rank|default|\d| *\d+\.\d|[EWIF]\d{3}|[A-Z][a-z]{2} "
                        r")|\d{4}-\d\d-\d\d|[a-z][\w-]*\d[\w.-]*: ))): ")
#: A dotted Python name ending in a class (``numba.cuda.cudadrv.driver.CudaAPIError: [702] ...``,
#: ``torch.OutOfMemoryError: ...``) is the exception line itself, not a fan-out host prefix.
_PYTHON_CLASS = re.compile(r"\.[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*$")
_RAY = re.compile(r"^\((?:[\w:]+ )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\d.]+))?\)\s")
_RANK_PREFIX = re.compile(r"^\[rank(?P<rank>\d+)\]:\s?")
_RANK_GLUED = re.compile(r"(?<=[\]|%\s])\[rank(?P<rank>\d+)\]:\s?")  # after a tqdm bar: "...s/it][rank3]: ..."
_RANK_LINE = re.compile(r"(?m)^(?:\s*\d+: )?\[rank\d+\]:")  # torchrun's per-rank prefix starts a line
_RANK_WORD = re.compile(r"\[rank(?P<a>\d+)\]|\|\s*rank(?P<b>\d+)\s*\||\brank[ =:](?P<c>\d+)\b")


_ERROR_RECORD = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")


def _traceback_line(text: str) -> bool:
    """A line of a Python traceback before its final exception line."""
    return text.startswith(("Traceback (most recent call last)", "  ")) or not text.strip()


def _logged_exception(before: list[str], year: int | None, tz) -> bool:
    """Whether the lines before an untimed exception line are a traceback that directly follows
    an ERROR/CRITICAL log record (launcher prefixes stripped; any other line in between - another
    rank's, a progress line - and it is not)."""
    seen_traceback = False
    for raw in reversed(before):
        text = strip_prefixes(raw)[0]
        if stamp_in(raw, year=year, tz=tz):
            return seen_traceback and bool(_ERROR_RECORD.search(text))
        if not _traceback_line(text):
            return False
        seen_traceback = seen_traceback or text.startswith("Traceback (most recent call last)")
    return False


def strip_prefixes(line: str) -> tuple[str, dict]:
    """Remove launcher prefixes; return the message and what they said (task, rank, host, ...).

    tqdm bars rewrite their line with ``\\r`` and an error printed meanwhile lands in the same
    line: the last ``\\r`` segment is the message. A ``[rankN]:`` glued after a progress bar still
    names the rank.
    """
    hints: dict = {}
    if "\r" in line:
        segments = [seg for seg in line.split("\r") if seg.strip()]
        line = segments[-1] if segments else ""
    if line.startswith((">", " >", "  >")):
        line = MARKDOWN_QUOTE.sub("", line, count=1)
    for _ in range(3):
        # each prefix starts with its own kind of character: only those that can match are tried
        # (every line of a 10,000-node console passes here, some twice)
        first = line[:1]
        if first == "[":
            m = _MPI_TAG.match(line)
            if m:
                hints["rank"] = int(m["rank"])  # mpirun's [job,rank]
                line = line[m.end():]
                continue
            m = _KUBECTL_POD.match(line) if line.startswith("[pod/") else None
            if m:
                hints.setdefault("prefix_host", m["pod"])
                line = line[m.end():]
                continue
        elif first.isupper() and "]<std" in line:
            m = _MPI_STAMP.match(line)
            if m:
                hints["stamp"] = m["stamp"]  # the rank's tag follows
                line = line[m.end():]
                continue
        elif first == "(":
            m = _RAY.match(line)
            if m:
                hints["ray_pid"], hints["ray_ip"] = int(m["pid"]), m["ip"]
                line = line[m.end():]
                continue
        if first.isspace() or first.isdigit():
            m = _SRUN_LABEL.match(line)
            if m:
                hints.setdefault("task", int(m["task"]))
                line = line[m.end():]
                continue
        colon = line.find(":")  # a pdsh host is a word right before the line's first ": "
        if first.isalnum() and colon > 0 and line[colon + 1:colon + 2] == " ":
            m = _PDSH_HOST.match(line)
            if m and not line.startswith(("srun:", "slurmstepd:")) and not _PYTHON_CLASS.search(m["host"]):
                hints.setdefault("prefix_host", m["host"])
                line = line[m.end():]
                continue
        break
    m = (_RANK_PREFIX.match(line) or _RANK_GLUED.search(line)) if "[rank" in line else None
    if m:
        hints["rank"] = int(m["rank"])
        line = line[m.end():]
    return line, hints


# ---------------------------------------------------------------- detailed patterns
_NCCL_LINE = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\] )?(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) "
    r"\[(?P<dev>\d+)\] (?:(?P<file>[\w./-]+):(?P<line>\d+) (?:\((?P<func>\w+)\) )?)?NCCL (?P<level>INFO|WARN) (?P<msg>.*)")
_COMM_INIT = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cudadev>\d+)"
    r"(?: nvmlDev (?P<nvml>\d+))? busId (?P<busid>[0-9a-f]+).*? - (?P<phase>Init START|Init COMPLETE)")
_NCCL_VERSION = re.compile(r"NCCL version (?P<ver>\d+\.\d+\.\d+)")
#: NCCL_DEBUG=VERSION (and rank 0 of older releases) prints the version with no host:pid:tid prefix.
_BARE_NCCL_VERSION = re.compile(r"NCCL version (?P<ver>\d+\.\d+\.\d+)\+cuda[\d.]+\s*$")
_USING_NETWORK = re.compile(r"Using network (?P<net>\S+)")
#: NCCL's echo of a setting that asks for InfiniBand (``NCCL_IB_DISABLE set by environment to 0``,
#: ``NCCL_IB_HCA set to mlx5_0:1,...``): a socket transport after it is a fallback, not a choice.
_IB_REQUESTED = re.compile(r"NCCL_IB_DISABLE set by environment to 0|NCCL_IB_HCA set (?:by environment )?to \S")
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using (?:\[\d+\])?(?P<iface>[^:\s]+):(?P<addr>[\d.]+)")
_OOB = re.compile(r"OOB (?P<iface>[^:\s]+):(?P<addr>[\d.]+)")
_IB_COMPLETION = re.compile(
    r"Got completion (?:from peer (?P<peer>[\d.]+)\S* )?with (?:error (?P<err>\d+)|status=(?:\w+\()?(?P<status>\d+)\)?)"
    r".*?vendor[ _]err[= ]?(?P<vendor>\d+)")
#: The reporting end of an IB completion error (NCCL 2.19+): ``localGid ::ffff:10.20.2.42 remoteGids::ffff:10.20.2.43
#: hca mlx5_2``: a RoCE GID that embeds the local IPv4 address, and the HCA that saw the error.
_LOCAL_GID = re.compile(r"\blocalGid (?:::ffff:)?(?P<addr>\d{1,3}(?:\.\d{1,3}){3})\b")
_IB_HCA_NAMED = re.compile(r"\bhca (?P<hca>[A-Za-z][\w-]*)")
_SOCKET_ERR = re.compile(
    r"(?:socket\w*|Net) ?: ?(?:Call to \w+ (?:from|to) (?P<peer>[\d.]+)\S* failed : (?P<err1>.+)|"
    r"Connect to (?P<peer2>\S+) failed : (?P<err2>.+)|Connection closed by remote peer (?P<peer3>\S+)|"
    r"(?P<err4>wrong type .+))")
_WORK = (r"WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel_in>-?\d+), "
         r"NumelOut=(?P<numel_out>-?\d+))?, Timeout\(ms\)=(?P<timeout_ms>\d+)\)")
_WATCHDOG_TIMEOUT = re.compile(r"\[Rank (?P<pg_rank>\d+)\] ?Watchdog caught collective operation timeout: " + _WORK +
                               r"(?: ran for (?P<elapsed_ms>\d+))?")
#: gloo's collective timeout, raised on the rank that waited: ``RuntimeError: [.../unbound_buffer.cc:78]
#: Timed out waiting 4000ms for recv operation to complete``.
#: The shell's ``time`` summary (``real	3m29.863s``): printed only once the command it timed has exited.
#: (A trainer's "Total training time" says its loop ended - not that it ended well: detectron2 prints
#: it from a ``finally`` hook after a crash too - so it is read as the same kind of end.)
_SHELL_TIME = re.compile(r"real\s+(?:\d+m)?\d+(?:[.,]\d+)?s\s*$")
_GLOO_TIMEOUT = re.compile(r"Timed out waiting (?P<ms>\d+)ms for (?P<op>recv|send) operation")
_BLOCKING_WAIT = re.compile(r"\[Rank (?P<pg_rank>\d+)\] Work " + _WORK + r" timed out in blocking wait")
_PG_PREFIX = re.compile(r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>[^\s(\]]+))?(?: ?\((?P<desc>[^)]*)\))? "
                        r"Rank (?P<pg_rank>\d+)\]")
_RANK_BRACKET = re.compile(r"\[Rank (?P<rank>\d+)\]")
_WATCHDOG_SEEN = re.compile(
    r"(?:detected by watchdog at work|Timeout at NCCL work): (?P<seq>\d+), last enqueued NCCL work: (?P<enq>-?\d+), "
    r"last completed NCCL work: (?P<comp>-?\d+)"
    r"|detected by watchdog at work sequence id: (?P<seq2>\d+) PG status: last enqueued work: (?P<enq2>-?\d+), "
    r"last completed work: (?P<comp2>-?\d+)")
#: torch's store-based barrier at init_process_group (torch < 2.2): each rank says it waits, and times out
#: when fewer than world_size ranks arrived (worker_count) within the timeout.
_STORE_BARRIER = re.compile(r"(?P<what>Waiting in|Timed out initializing process group in) store based barrier (?:to "
                            r"initialize process group )?(?:for|on) rank: ?(?P<rank>\d+), (?:for )?key: \S+ "
                            r"\(world_size=(?P<world>\d+), worker_count=(?P<count>\d+), timeout=(?P<timeout>[\d:.]+)\)")
_WATCHDOG_STUCK = re.compile(r"watchdog got stuck for (?P<sec>\d+) seconds|Heartbeat monitor timed out")
_WATCHDOG_TERMINATED = re.compile(r"(?:Process group|NCCL) watchdog thread terminated with exception: (?P<what>.*)")
_NCCL_ERROR = re.compile(r"NCCL error(?: in: [^,]+,)?:? (?P<errstr>.+?), NCCL version (?P<ver>\d+\.\d+\.\d+)")
_NCCL_CLASS = re.compile(r"\b(?P<code>ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidArgument|"
                         r"ncclInvalidUsage|ncclRemoteError|ncclTimeout): ")
_NCCL_ERRSTR_CLASS = (
    ("unhandled cuda error", "ncclUnhandledCudaError"), ("unhandled system error", "ncclSystemError"),
    ("internal error", "ncclInternalError"), ("invalid argument", "ncclInvalidArgument"),
    ("invalid usage", "ncclInvalidUsage"), ("remote process exited", "ncclRemoteError"),
)
_SIZE = r"\d+(?:\.\d+)? ?(?:bytes|[KMGT]iB|[KMGT]B)"
_OOM_NEW = re.compile(r"[Oo]ut of memory\. Tried to allocate (?P<req>" + _SIZE + r")\. (?:GPU|Device) (?P<gpu>\d+) has a "
                      r"total capac(?:i)?ty of (?P<total>" + _SIZE + r") of which (?P<free>" + _SIZE + r") is free")
_OOM_OLD = re.compile(r"CUDA out of memory\. Tried to allocate (?P<req>" + _SIZE + r") \(GPU (?P<gpu>\d+); (?P<total>" +
                      _SIZE + r") total capacity; (?P<alloc>" + _SIZE + r") already allocated; (?P<free>" + _SIZE +
                      r") free;(?: (?P<allowed>" + _SIZE + r") allowed;)? (?P<reserved>" + _SIZE + r") (?:reserved|cached)")
_OOM_RESERVED = re.compile(r"(?P<resfree>" + _SIZE + r") is reserved by PyTorch but unallocated")
_OOM_ANY = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")
_CUDA_ERROR = re.compile(r"CUDA error: (?P<err>[a-zA-Z][^\n]*?)\s*$|cuda runtime error \((?P<code>\d+)\) : (?P<err2>[^\n]+?)"
                         r"(?: at \S+)?\s*$")
#: A CUDA error whose fix is the node's driver stack (the table's driver rows: too old for the runtime or
#: the PTX, or a user-space/kernel mismatch), in any of its wordings.
_DRIVER_ERROR = pattern(DRIVER_CLASSES)
_DEVICE_ASSERT = re.compile(r"(?P<file>\S+\.cu):(?P<line>\d+): .*Assertion `(?P<cond>.+)` failed")
#: A traceback's final line: ``KeyError: 'x'``, ``torch.OutOfMemoryError: ...``, and the bare
#: ``Exception: ...`` that ``raise Exception(...)`` prints (DeepSpeed's loss scaler, many scripts).
_EXCEPTION = re.compile(r"^(?P<cls>(?:[A-Za-z_][\w]*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Interrupt)|Exception(?=: )))"
                        r"(?:: (?P<msg>.*))?$")
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
_ELASTIC_FAILED = re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lrank>\d+) \(pid: (?P<pid>\d+)\)")
_ELASTIC_SIGTERM = re.compile(r"Sending process (?P<pid>\d+) closing signal (?P<sig>SIG\w+)")
_CFE_FIELD = re.compile(r"^\s+(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: (?P<val>.*)$")
_PEER_IP = re.compile(r"(?:from|to|peer) (\d{1,3}(?:\.\d{1,3}){3})")
_CFE_ENTRY = re.compile(r"^\[\d+\]:\s*$")
_CFE_RANK = re.compile(r"(\d+) \(local_rank: (\d+)\)")
_CFE_EXIT = re.compile(r"(-?\d+) \(pid: (\d+)\)")
_SRUN_TASK = re.compile(r"srun: error: (?P<host>[\w.-]+): tasks? (?P<tasks>[\d,-]+): (?P<what>.+)")
_SRUN_NODE_FAIL = re.compile(r"[Nn]ode failure on (?P<host>[\w.-]+)|DUE TO NODE FAILURE")
_SLURM_CANCEL = re.compile(r"\*\*\* (?P<what>JOB|STEP) (?P<id>[\d.]+) ON (?P<host>[\w.-]+) CANCELLED AT (?P<at>\S+)"
                           r"(?: DUE TO (?P<why>[A-Z ]+))?")
_SLURM_STEPD_NOT_ENDING = re.compile(r"STEPD TERMINATED ON (?P<host>[\w.-]+) AT (?P<at>\S+) DUE TO JOB NOT ENDING")
_DATALOADER = re.compile(r"DataLoader worker \(pids?\(?s?\)? ?(?P<pid>[\d, ]+)\)? (?P<what>is killed by signal: .+|exited "
                         r"unexpectedly.*)|DataLoader timed out after (?P<sec>\d+) seconds")
#: Where the c10d store lives: the launch command's endpoint (``--rdzv_endpoint trn-a:29500``) or the
#: agent that says it hosts it (``Process 8 hosts the TCP store for the C10d rendezvous backend.``).
_STORE_HOST = re.compile(r"(?:--rdzv[-_]endpoint[= ]['\"]?|^\s*rdzv_endpoint\s+: )(?P<host>[\w.-]+)(?::\d+)?|"
                         r"(?P<self>hosts the TCP store)")
#: A CI runner's own lines (GitHub Actions): a step starts (``##[group]Run <command>``), a step's
#: process failed (``##[error]Process completed with exit code 1.``). Each line carries the runner's
#: ISO stamp (``2026-03-10T04:12:41.1030000Z``): when the job started and when it failed.
_CI_STEP = re.compile(r"##\[group\]Run (?P<cmd>.+)|##\[error\]Process completed with exit code (?P<code>[1-9]\d*)")
#: torchrun's agent stopped by a signal (Ctrl-C, the scheduler, a node shutdown): its workers go too.
_DEATH_SIGNAL = re.compile(r"Received (?:Signals\.)?(?P<sig>\w+) death signal, shutting down workers")
_STORE_ERR = re.compile(r"(?P<cls>DistNetworkError|RendezvousConnectionError|RendezvousTimeoutError|DistStoreError|"
                        r"RendezvousClosedError)|recvValue failed|TCPStore.*(?:Connection reset|Broken pipe|timed out|"
                        r"failed)|connect\(\) timed out")
_RANK_DEVICE = re.compile(r"distributed init \(rank (?P<r1>\d+)\): \S+, gpu (?P<g1>\d+)"
                          r"|\[rank(?P<r2>\d+)\].*?device=cuda:(?P<g2>\d+)"
                          r"|rank(?P<r3>\d+)\b.*?local_rank=(?P<l3>\d+)\b.*?cuda:(?P<g3>\d+)"
                          r"|\[rank(?P<r4>\d+)\].*?local_rank=(?P<l4>\d+)\b.*?device=cuda:(?P<g4>\d+)")
_COMPLETED = re.compile(r"[Tt]raining (?:(?:is|has) )?(?:completed?|finished|done)\b|Process group destroyed|"
                        r"PyTorchJob \S+ successfully completed|worker group successfully finished|'train_runtime'|"
                        r"^\s*\S+\s+Succeeded\b|"
                        # pytest's summary lists failures first: a summary that starts with "passed" had none
                        r"^=*\s*\d+ passed(?:, \d+ (?:skipped|deselected|xfailed|xpassed|warnings?))* in [\d.]+s\b")
#: One test case that passed, as test scripts and runners print it: ``[testing] Running with FP8 ... passed``,
#: ``test_alltoall (test_comm.TestA2A) ... ok`` is not read (``ok`` is too common a word), pytest -v's
#: ``tests/test_x.py::test_fp8 PASSED [ 50%]``. A failed case is the generic vocabulary's (``failed``).
_TEST_PASSED = re.compile(r"\.\.\.\s*(?:passed|PASSED)\s*$|::\S+ PASSED\b")
#: ``echo $?`` as :func:`gpulib.parsers.unwrap.unwrap` keeps it in a pasted session: typed right after
#: a job's launch (elsewhere its prompt line is dropped), with the exit status on the next line.
_ECHO_STATUS = re.compile(r"^echo \$\?\s*$")
_STATUS = re.compile(r"^\s*(?P<code>\d{1,3})\s*$")
_CKPT_START = re.compile(r"(?:[Ss]aving|[Ss]ave) (?:the )?checkpoint|async save started|checkpoint: .*save started")
_CKPT_DONE = re.compile(r"(?:successfully saved|[Ff]inished saving|[Ss]aved) (?:the )?checkpoint|checkpoint.*committed"
                        r"|[Cc]heckpoint\b.{0,60}\b(?:is|was|has been) saved\b")
_BENIGN = re.compile(r"is being re-looped|re-looped|process group has NOT been destroyed")
#: ``torch 2.3.1+cu121``, ``torch==2.1.0``, ``PyTorch version: 2.4.0`` (collect_env), ``torch.__version__ = 2.2.2``.
_TORCH_VERSION = re.compile(r"\b(?:torch|PyTorch)(?:\.__version__)?(?: version)?\s*(?:==|[:=]|\s)\s*v?"
                            r"(?P<ver>\d+\.\d+\.\d+(?:[+.][\w.]*\w)?)")

# progress lines (head/tail pass)
#: ``step 120``, a tqdm bar ``120/4000 [``, and ``Iter: 31/418`` (Kaldi's train.py: the step out of the total).
#: A counter printed with its total (``iteration 5000/ 5000``, ``step 100/100``, ``Iter: 31/418``) states
#: the run's plan: ``planned`` in the event's details (a tqdm bar's ``98/98`` is one epoch's, not the run's).
_STEP = re.compile(r"\b(?:step|iteration|iter|global_step)[:= ]\s*(?P<step>\d+)(?:\s*/\s*(?P<of>\d+))?\b"
                   r"|\b(?P<tq>\d+)/(?P<total>\d+) \[|\bIter(?:ation)?:? (?P<tq2>\d+)/(?P<total2>\d+)\b")
#: The epoch a progress line is in, with the planned number of epochs when it is printed (``Epoch 99/99``,
#: ``Epoch [3/10]``): a per-epoch counter at its total is the end of an epoch, not of the run.
_EPOCH = re.compile(r"\b[Ee]poch\s*:?\s*\[?\s*(?P<epoch>\d+)(?![.\d])(?:\s*/\s*(?P<epochs>\d+)(?![.\d]))?")
_S_PER_STEP = re.compile(r"(?P<v>\d+(?:\.\d+)?) ?s/(?:step|it)\b|elapsed time per iteration \(ms\): (?P<ms>[\d.]+)")
#: The time a step waited for its batch, and the step's whole time, in seconds, as trainers print
#: them: open_clip ``Data (t): 0.121 Batch (t): 1.170``, timm ``Time: 0.312s ... Data: 0.012 (0.015)``,
#: mmengine/detectron2 ``time: 0.4567  data_time: 0.0123``, ``batch_time=1.2 data_time=0.9``.
_DATA_S = re.compile(r"(?:\bData \(t\)|(?<![\w.])data_time|(?<![\w.])Data)\s*[:=]\s*(?P<v>\d+(?:\.\d+)?)s?(?![\w.:])")
_STEP_S = re.compile(r"(?:\bBatch \(t\)|(?<![\w.])(?:batch_time|step_time|iter_time|[Tt]ime))\s*[:=]\s*"
                     r"(?P<v>\d+(?:\.\d+)?)s?(?![\w.:])")
#: A progress line's throughput, in the units trainers print it: tf_cnn_benchmarks/Horovod ``images/sec: 1590.3``,
#: ``1590.3 img/s``, ``samples/s``, ``tokens/s`` (or ``/sec``), tqdm's ``it/s``. Read as the run's speed: a speed that
#: falls and stays down is a run starved of something (:mod:`gpulib.diagnose.rules.throughput`). ``it/s`` is
#: no prefilter word: every tqdm bar prints it, a data-preparation scan too (not a training step); a training
#: bar is read by its other words (``Epoch``, ``step``, ``iter``).
_RATE_UNIT = r"(?P<unit{n}>images/sec|img/s(?:ec)?|samples/s(?:ec)?|tokens/s(?:ec)?|it/s)"
_THROUGHPUT = re.compile(_RATE_UNIT.format(n="") + r":?\s*(?P<v>\d+(?:\.\d+)?)(?![\d.])"
                         r"|(?<![\w.])(?P<v2>\d+(?:\.\d+)?) ?" + _RATE_UNIT.format(n="2") + r"(?![\w/:])")
#: A step counter that starts the line, tab- or space-separated from the columns after it (tf_cnn_benchmarks:
#: ``1500\timages/sec: 1411.8 +/- 6.7 (jitter = 88.0)\t6.977``): a step only beside a throughput.
_LEADING_STEP = re.compile(r"^\s*(?P<step>\d+)\s+(?=\S)")
_METRIC_MS = re.compile(r"\b(?P<k>[a-z][a-z0-9_]*_ms)=(?P<v>\d+(?:\.\d+)?)")
_EVAL_PROGRESS = re.compile(r"val(?:idation)? batch (?P<done>\d+)/(?P<total>\d+)")

#: Longer lines (a tqdm bar without newlines, a pasted tensor) are cut before any pattern runs.
MAX_LINE_CHARS = 32 * 1024

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
           11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}


@dataclass(slots=True)  # a 10,000-node job console is ~350,000 of them
class JobEvent:
    """One meaningful line (or block) of a job log.

    ``rank`` is the global rank when the line names it (``[rank5]:``, NCCL init); ``host``/``pid``/
    ``local_device`` come from NCCL's ``host:pid:tid [cudaDev]`` prefix or launcher output.
    ``time_approx`` is True when the line carries no stamp and the time was borrowed from the
    nearest stamped line.
    """

    line: int
    kind: str
    text: str
    time_utc: str | None = None
    time_approx: bool = False
    rank: int | None = None
    host: str | None = None
    pid: int | None = None
    local_device: int | None = None
    details: dict = field(default_factory=dict)
    #: lines of the same shape folded into this one, and their latest time (:mod:`gpulib.parsers.fold`)
    folded: list | None = None
    time_last: str | None = None


def looks_like(head: str) -> bool:
    """True for job consoles: torch/NCCL/launcher lines or training progress."""
    markers = ("NCCL INFO", "NCCL WARN", "ProcessGroupNCCL", "torch.distributed", "torchrun", "[rank",
               "local_rank", "Traceback (most recent", "srun: ", "ChildFailedError", "s/it]", "s/step",
               "iteration", "step ", "step:", "PyTorchJob", "distributed init", "distributed_c10d",
               "torch/distributed/", "[c10d]",
               "dist_world_size=", "global_rank_mapping=")  # the DeepSpeed launcher's placement lines
    hits = sum(1 for m in markers if m in head) + ("+ " in head and _LAUNCH_TRACE.search(head) is not None)
    return (hits >= 2 or "NCCL INFO" in head or "ProcessGroupNCCL" in head or "PyTorchJob" in head
            or _HF_TRAINER_BANNER in head  # a training log by its content, whatever its file is called
            or any(line in head for line in _MEGATRON_LINES)
            or "[rank" in head and _RANK_LINE.search(head) is not None
            or _timed_steps(head) >= 2  # progress lines with a data time and a step time (open_clip, timm)
            or _rated_steps(head) >= 2)  # progress lines with a step and a throughput (tf_cnn_benchmarks)


#: A batch script's ``set -x`` trace of the launch (``+ srun --label ... python train.py``): the
#: console of the job it starts, whatever the file is called (sbatch's ``slurm-<id>.out`` or not).
_LAUNCH_TRACE = re.compile(
    r"(?m)^\+ (?:srun|torchrun|mpirun|mpiexec|deepspeed|accelerate launch|python3? -m torch\.distributed)\s")


def _timed_steps(head: str) -> int:
    """How many lines of ``head`` carry both a data-wait and a step time: a trainer's progress lines.
    Only a line holding a literal of :data:`_DATA_S` is searched (its look-behinds cost ~10 us a
    line, and every kernel log's head is asked whether it is a job console before it is detected)."""
    if "Data" not in head and "data_time" not in head:
        return 0
    return sum(1 for line in head.splitlines()
               if ("Data" in line or "data_time" in line) and _DATA_S.search(line) and _STEP_S.search(line))


def _rated_steps(head: str) -> int:
    """How many lines of ``head`` carry a step counter and a throughput (``images/sec``, ``tokens/s``):
    a trainer's progress lines. Only lines holding ``/s`` are searched."""
    if "/s" not in head:
        return 0
    return sum(1 for line in head.splitlines() if "/s" in line and _THROUGHPUT.search(line)
               and (_STEP.search(line) or _LEADING_STEP.match(line)))


#: The banner the Hugging Face Trainer prints when its training loop starts.
_HF_TRAINER_BANNER = "***** Running training *****"
#: Megatron-LM's own progress and end lines: its console without any rank prefix (the launcher's
#: part of a log split per rank) is still the job's console.
_MEGATRON_LINES = ("elapsed time per iteration (ms)", "[after training is done]")


def _signal_of(code: int) -> str | None:
    return SIGNALS.get(-code) if code < 0 else None


#: NCCL facts about a host that every rank of it prints (its bootstrap address, its transport):
#: one record per host and fact - a 10,000-node job prints each 80,000 times.
HOST_FACTS = frozenset({"nccl_address", "nccl_transport", "nccl_no_ib"})
#: What :meth:`_Classifier.classify` returns for a line that repeats a host fact already recorded.
REPEATED = object()


class _Classifier:
    """Turns one candidate line (prefixes stripped) into a JobEvent, or None."""

    def __init__(self) -> None:
        self.cfe_block: dict | None = None
        self.host_facts: set[tuple] = set()  # NCCL lines (but their pid:tid [dev]) of HOST_FACTS seen

    def classify(self, body: str, hints: dict, lineno: int) -> JobEvent | None:  # noqa: C901 - one dispatch table
        rank = hints.get("rank")
        # guard: the host pattern is costly (~60 us on a watchdog line that mentions "NCCL work")
        m = _NCCL_LINE.search(body) if "NCCL INFO " in body or "NCCL WARN " in body else None
        if m:
            # a line that differs from a host fact's only in the printing process says nothing new
            # (one flat tuple per line, its two halves shared: the same text on every rank of a host)
            key = (sys.intern(body[:m.start("pid")]), sys.intern(body[m.end("dev"):]), *chain.from_iterable(hints.items()))
            if key in self.host_facts:
                return REPEATED
            ev = self._nccl(m, lineno, body)
            if ev is not None:
                if rank is not None and ev.rank is None:
                    ev.rank = rank
                if ev.kind in HOST_FACTS:
                    self.host_facts.add(key)
                    fact = (ev.kind, ev.host, *ev.details.items(), *hints.items())  # other words, same fact
                    if fact in self.host_facts:
                        return REPEATED
                    self.host_facts.add(fact)
                return ev
        elif "NCCL INFO " in body:
            ev = self._bare_transport(body, lineno, rank)
            if ev is not None:
                return ev
        m = _STORE_BARRIER.search(body) if "store based barrier" in body else None
        if m:
            h, mi, sec = (m["timeout"].split(":") + ["0", "0"])[:3]
            return JobEvent(lineno, "barrier_timeout" if m["what"].startswith("Timed") else "barrier_wait", body,
                            rank=int(m["rank"]), details={"world_size": int(m["world"]), "arrived": int(m["count"]),
                                                          "timeout_ms": int((int(h) * 3600 + int(mi) * 60
                                                                             + float(sec)) * 1000)})
        m = _WATCHDOG_TIMEOUT.search(body) or (_BLOCKING_WAIT.search(body) if "in blocking wait" in body else None)
        if m and "watchdog thread terminated" not in body:
            return JobEvent(lineno, "watchdog_timeout", body, rank=rank if rank is not None else int(m["pg_rank"]),
                            details=self._work(m) | self._pg(body))
        if "Watchdog caught collective operation timeout" in body and "watchdog thread terminated" not in body:
            pg = self._pg(body)  # a line cut before its WorkNCCL(...) part
            return JobEvent(lineno, "watchdog_timeout", body, rank=rank if rank is not None else pg.get("pg_rank"),
                            details={"truncated": True} | pg)
        m = _WATCHDOG_SEEN.search(body) if "watchdog at work" in body or "Timeout at NCCL work" in body else None
        if m:
            seq, enq, comp = (m["seq"] or m["seq2"], m["enq"] or m["enq2"], m["comp"] or m["comp2"])
            pg = self._pg(body)
            return JobEvent(lineno, "watchdog_progress", body, rank=rank if rank is not None else pg.get("pg_rank"),
                            details={"seq": int(seq), "last_enqueued": int(enq), "last_completed": int(comp)} | pg)
        m = _WATCHDOG_STUCK.search(body) if "got stuck" in body or "Heartbeat monitor" in body else None
        if m:
            pg = self._pg(body)
            return JobEvent(lineno, "watchdog_stuck", body, rank=rank if rank is not None else pg.get("pg_rank"),
                            details={"seconds": int(m["sec"]) if m["sec"] else None} | pg)
        m = _WATCHDOG_TERMINATED.search(body) if "watchdog thread terminated" in body else None
        if m:
            what = m["what"]
            pg = self._pg(body)
            r = rank if rank is not None else pg.get("pg_rank")
            cuda = _CUDA_ERROR.search(what)
            if cuda:
                return JobEvent(lineno, "cuda_error", body, rank=r, details={"error": (cuda["err"] or cuda["err2"]),
                                                                              "seen_by": "watchdog"} | pg)
            nccl = _NCCL_ERROR.search(what)
            if nccl:
                return JobEvent(lineno, "nccl_error", body, rank=r, details=self._nccl_error(nccl) | pg)
            if "Watchdog caught" in what:
                return None  # the timeout line itself was already recorded
            return JobEvent(lineno, "watchdog_exception", body, rank=r, details={"what": what} | pg)
        m = _NCCL_ERROR.search(body)
        if m:
            return JobEvent(lineno, "nccl_error", body, rank=rank, details=self._nccl_error(m))
        m = _NCCL_CLASS.search(body) if "nccl" in body else None
        if m:
            return JobEvent(lineno, "nccl_error_class", body, rank=rank, details={"code": m["code"]})
        if (_OOM_ANY.search(body) or "out of memory. Tried to allocate" in body.lower()) and "ray.exceptions." not in body \
                and "killed due to the node running low on memory" not in body:  # Ray's kill: host RAM, not GPU
            return self._oom(body, rank, lineno)
        if _DRIVER_ERROR.search(body):
            return JobEvent(lineno, "driver_too_old", body, rank=rank)
        m = _CUDA_ERROR.search(body)
        if m:
            return JobEvent(lineno, "cuda_error", body, rank=rank, details={"error": m["err"] or m["err2"]})
        m = _DEVICE_ASSERT.search(body) if "Assertion `" in body else None
        if m:
            return JobEvent(lineno, "device_assert", body, rank=rank, details={"file": m["file"], "cond": m["cond"]})
        m = _ELASTIC_FAILED.search(body)
        if m:
            code = int(m["code"])
            return JobEvent(lineno, "process_failed", body, pid=int(m["pid"]),
                            details={"exitcode": code, "local_rank": int(m["lrank"]), "signal": _signal_of(code)})
        m = _ELASTIC_SIGTERM.search(body)
        if m:
            return JobEvent(lineno, "sigterm_sent", body, pid=int(m["pid"]), details={"signal": m["sig"]})
        if "ChildFailedError" in body and "raise " not in body:
            return JobEvent(lineno, "child_failed", body, rank=rank)
        return self.classify_light(body, hints, lineno)

    def classify_light(self, body: str, hints: dict, lineno: int) -> JobEvent | None:  # noqa: C901
        """The launcher, identity, checkpoint and completion lines (also read in progress windows).

        Each pattern runs only when a cheap substring test says it can match: progress windows hold
        thousands of step lines, and none of these should cost a regex pass over them."""
        rank = hints.get("rank")
        if body.startswith("echo $?") and _ECHO_STATUS.match(body):
            return JobEvent(lineno, "status_echo", body, rank=rank)
        if body.startswith("NCCL version "):
            m = _BARE_NCCL_VERSION.match(body)
            if m:
                return JobEvent(lineno, "nccl_version", body, rank=rank, details={"version": m["ver"]})
        if "srun" in body:
            m = _SRUN_TASK.search(body)
            if m:
                return JobEvent(lineno, "srun_task_exit", body, host=m["host"],
                                details={"tasks": _expand_ranges(m["tasks"]), "what": m["what"].strip()})
        if "CANCELLED AT" in body:
            m = _SLURM_CANCEL.search(body)
            if m:
                why = (m["why"] or "").strip() or None
                return JobEvent(lineno, "node_failure" if why == "NODE FAILURE" else "slurm_cancelled", body,
                                host=m["host"], details={"job": m["id"], "reason": why,
                                                         "at": m["at"].rstrip("*").strip()})
        if "STEPD TERMINATED" in body:
            m = _SLURM_STEPD_NOT_ENDING.search(body)
            if m:
                return JobEvent(lineno, "slurm_kill_failed", body, host=m["host"], details={"at": m["at"]})
        if "ode failure" in body:
            m = _SRUN_NODE_FAIL.search(body)
            if m:
                return JobEvent(lineno, "node_failure", body, host=m["host"])
        if "DataLoader" in body:
            m = _DATALOADER.search(body)
            if m:
                return JobEvent(lineno, "dataloader_error", body, rank=rank,
                                details={"what": (m["what"] or f"timed out after {m['sec']} s").strip()})
        if "##[" in body:
            m = _CI_STEP.search(body)
            if m and m["code"] is not None:
                return JobEvent(lineno, "ci_step_failed", body, rank=rank, details={"exitcode": int(m["code"])})
            if m:
                return JobEvent(lineno, "ci_step_start", body, rank=rank, details={"command": m["cmd"].strip()})
        if "death signal" in body:
            m = _DEATH_SIGNAL.search(body)
            if m:
                return JobEvent(lineno, "agent_signal", body, rank=rank, details={"signal": m["sig"]})
        if "rdzv" in body or "TCP store" in body:
            m = _STORE_HOST.search(body)
            if m:
                return JobEvent(lineno, "store_host", body, rank=rank, details={"endpoint": m["host"]})
        if any(k in body for k in ("Error", "recvValue", "TCPStore", "connect()")):
            m = _STORE_ERR.search(body)
            if m:
                return JobEvent(lineno, "store_error", body, rank=rank, details={"class": m["cls"]})
        if "orch" in body:
            m = _TORCH_VERSION.search(body)
            if m:
                return JobEvent(lineno, "torch_version", body, rank=rank, details={"version": m["ver"]})
        if "cuda:" in body or "env://" in body:
            m = _RANK_DEVICE.search(body)
            if m:
                r = next(int(v) for v in (m["r1"], m["r2"], m["r3"], m["r4"]) if v is not None)
                g = next(int(v) for v in (m["g1"], m["g2"], m["g3"], m["g4"]) if v is not None)
                return JobEvent(lineno, "rank_device", body, rank=r, local_device=g)
        if ("re-looped" in body or "NOT been destroyed" in body) and _BENIGN.search(body):
            return JobEvent(lineno, "benign", body, rank=rank)
        if any(k in body for k in ("omplete", "inished", "destroyed", "Succeeded", "done", "train_runtime", " passed")) and \
                _COMPLETED.search(body):
            return JobEvent(lineno, "completed", body, rank=rank)
        if ("passed" in body or "PASSED" in body) and _TEST_PASSED.search(body):
            return JobEvent(lineno, "test_passed", body, rank=rank)
        if "heckpoint" in body or "save" in body:
            if _CKPT_DONE.search(body):
                return JobEvent(lineno, "checkpoint_saved", body, rank=rank)
            if _CKPT_START.search(body):
                return JobEvent(lineno, "checkpoint_save_start", body, rank=rank)
        if _TRACEBACK.match(body):
            return JobEvent(lineno, "traceback", body, rank=rank)
        if body.startswith("real") and _SHELL_TIME.match(body) or "otal training time" in body:
            return JobEvent(lineno, "process_exited", body, rank=rank)
        m = _EXCEPTION.match(body) if "Error" in body or "Exception" in body or "Interrupt" in body else None
        if m and not body.startswith(("  ", "\t")):
            wait = _GLOO_TIMEOUT.search(m["msg"] or "") if "Timed out waiting" in body else None
            if wait:  # this rank waited in a collective for a peer that never sent: a watchdog timeout, not a bug
                return JobEvent(lineno, "watchdog_timeout", body, rank=rank, details={
                    "op": wait["op"], "timeout_ms": int(wait["ms"]), "backend": "gloo"})
            return JobEvent(lineno, "exception", body, rank=rank, details={"class": m["cls"].rsplit(".", 1)[-1],
                                                                          "message": (m["msg"] or "").strip()})
        return None

    # -- helpers
    @staticmethod
    def _pg(body: str) -> dict:
        m = _PG_PREFIX.search(body)
        if not m:
            old = _RANK_BRACKET.search(body)  # torch <= 2.2: "[Rank 15] NCCL watchdog thread terminated"
            return {"pg_rank": int(old["rank"])} if old else {}
        return {"pg": int(m["pg"]), "pg_desc": _shared(m["desc"]), "pg_rank": int(m["pg_rank"])}

    @staticmethod
    def _work(m: re.Match) -> dict:
        out = {"op": _shared(m["op"]), "timeout_ms": int(m["timeout_ms"])}
        groups = m.groupdict()
        for key in ("seq", "numel_in", "numel_out", "elapsed_ms", "pg_rank"):
            if groups.get(key) is not None:
                out[key] = int(groups[key])
        return out

    @staticmethod
    def _nccl_error(m: re.Match) -> dict:
        errstr = m["errstr"]
        code = next((c for s, c in _NCCL_ERRSTR_CLASS if s in errstr), None)
        return {"error": errstr, "code": code, "nccl_version": m["ver"]}

    @staticmethod
    def _oom(body: str, rank: int | None, lineno: int) -> JobEvent:
        details: dict = {}
        m = _OOM_NEW.search(body) or _OOM_OLD.search(body)
        if m:
            details = {k: v for k, v in m.groupdict().items() if v is not None}
            details["gpu"] = int(details["gpu"])
        r = _OOM_RESERVED.search(body)
        if r:
            details["reserved_unallocated"] = r["resfree"]
        return JobEvent(lineno, "cuda_oom", body, rank=rank, details=details)

    @staticmethod
    def _bare_transport(body: str, lineno: int, rank: int | None) -> JobEvent | None:
        """The transport lines of an NCCL log pasted without its ``host:pid:tid [dev]`` prefixes
        (an issue comment, a container's stderr): which network NCCL chose, and whether InfiniBand
        was asked for, still tell a socket fallback."""
        net = _USING_NETWORK.search(body)
        if net:
            return JobEvent(lineno, "nccl_transport", body, rank=rank, details={"network": net["net"]} | (
                {"ib_requested": True} if _IB_REQUESTED.search(body) else {}))
        if "No device found" in body and "NET/IB" in body:
            return JobEvent(lineno, "nccl_no_ib", body, rank=rank)
        if _IB_REQUESTED.search(body):
            return JobEvent(lineno, "nccl_ib_requested", body, rank=rank)
        return None

    @staticmethod
    def _nccl(m: re.Match, lineno: int, body: str) -> JobEvent | None:
        msg = m["msg"]
        base = {"host": _shared(m["host"]), "pid": int(m["pid"]), "local_device": int(m["dev"])}
        if m["level"] == "WARN":
            details: dict = {"message": msg}
            ib = _IB_COMPLETION.search(msg)
            if ib:
                details |= {"peer": ib["peer"], "ib_status": int(ib["err"] or ib["status"]),
                            "vendor_err": int(ib["vendor"])}
                local, hca = _LOCAL_GID.search(msg), _IB_HCA_NAMED.search(msg)
                details |= ({"local_addr": local["addr"]} if local else {}) | ({"hca": hca["hca"]} if hca else {})
                return JobEvent(lineno, "ib_completion_error", body, details=details, **base)
            sock = _SOCKET_ERR.search(msg)
            if sock:
                details |= {"peer": sock["peer"] or sock["peer2"] or sock["peer3"],
                            "error": (sock["err1"] or sock["err2"] or sock["err4"] or "connection closed").strip()}
                return JobEvent(lineno, "socket_error", body, details=details, **base)
            return JobEvent(lineno, "nccl_warn", body, details=details, **base)
        init = _COMM_INIT.search(msg)
        if init:
            return JobEvent(lineno, "nccl_init", body, rank=int(init["rank"]), details={
                "nranks": int(init["nranks"]), "cuda_dev": int(init["cudadev"]),
                "nvml_dev": int(init["nvml"]) if init["nvml"] is not None else None,
                "pci_bus_id": _shared(normalize_pci(init["busid"])), "comm": init["comm"], "phase": _shared(init["phase"])},
                            **base)
        net = _USING_NETWORK.search(msg)
        if net:
            return JobEvent(lineno, "nccl_transport", body, details={"network": net["net"]} | (
                {"ib_requested": True} if _IB_REQUESTED.search(msg) else {}), **base)
        if _IB_REQUESTED.search(msg):
            return JobEvent(lineno, "nccl_ib_requested", body, **base)
        if "NET/IB : No device found" in msg or "NET/IB: No device found" in msg:
            return JobEvent(lineno, "nccl_no_ib", body, **base)
        ver = _NCCL_VERSION.search(msg)
        if ver:
            return JobEvent(lineno, "nccl_version", body, details={"version": ver["ver"]}, **base)
        boot = _BOOTSTRAP.search(msg) or _OOB.search(msg)
        if boot:
            return JobEvent(lineno, "nccl_address", body, details={"iface": boot["iface"], "addr": boot["addr"]}, **base)
        return None


#: Lines every rank of a job prints once (:mod:`gpulib.parsers.fold`), by kind: the fields a
#: folded line keeps (who printed it, and when), and those it drops.
FOLD_FIELDS: dict[str, tuple[str, ...]] = {
    "watchdog_timeout": ("rank", "time_utc"),
    "watchdog_progress": ("rank", "time_utc"),
    "nccl_init": ("rank", "host", "pid", "local_device", "cuda_dev", "nvml_dev", "pci_bus_id"),
}
_FOLD_DROPPED = {"watchdog_timeout": ("elapsed_ms", "pg_rank"), "watchdog_progress": ("pg_rank",),
                 "nccl_init": ("comm",)}
_EVENT_FIELDS = frozenset({"rank", "host", "pid", "local_device", "time_utc"})
#: Per kind: the event attributes that are part of a line's shape (the time never is), and the
#: details that are not.
_SHAPE = {kind: (attrgetter("time_approx", *sorted(_EVENT_FIELDS - set(fields) - {"time_utc"})),
                 frozenset(fields) | set(_FOLD_DROPPED[kind]) | {"task"})
          for kind, fields in FOLD_FIELDS.items()}


def _fold_shape(ev: JobEvent) -> tuple | None:
    spec = _SHAPE.get(ev.kind)
    if spec is None:
        return None
    attrs, skip = spec
    return ev.kind, attrs(ev), tuple([kv for kv in ev.details.items() if kv[0] not in skip])


def _fold_member(ev: JobEvent) -> tuple:
    """What a folded line keeps, in :data:`FOLD_FIELDS` order."""
    if ev.kind != "nccl_init":  # (rank, time): a stamp to the second is shared by many ranks' lines
        return ev.rank, sys.intern(ev.time_utc) if ev.time_utc else None
    d = ev.details
    return ev.rank, ev.host, ev.pid, ev.local_device, d.get("cuda_dev"), d.get("nvml_dev"), d.get("pci_bus_id")


def ranks_of(ev: JobEvent) -> list[int]:
    """The ranks that printed ``ev``'s line: its own, and those folded into it."""
    if not ev.folded:
        return [ev.rank] if ev.rank is not None else []
    return [m[0] for m in chain((_fold_member(ev),), ev.folded) if m[0] is not None]  # rank: every kind's first field


def members_of(ev: JobEvent) -> Iterator[dict]:
    """A :data:`FOLD_FIELDS` record and each line folded into it, as ``{field: value}``, one at a
    time (80,000 ranks' dicts at once would cost more than the folded lines themselves)."""
    fields = FOLD_FIELDS[ev.kind]
    return (dict(zip(fields, m, strict=True)) for m in chain((_fold_member(ev),), ev.folded or ()))


def _shared(text: str | None) -> str | None:
    """One copy of a word every rank prints (its host, the collective, the PG name): a 10,000-node
    console repeats each 80,000 times."""
    return sys.intern(text) if text is not None else None


def _expand_ranges(text: str) -> list[int]:
    """``0-1,3`` -> [0, 1, 3] (srun task lists)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            out.extend(range(int(lo), int(hi) + 1) if hi.isdigit() else [int(lo)])
    return out


class JobLogScanner:
    """Streams a job log chunk by chunk and collects :class:`JobEvent` records.

    Memory is bounded by the chunk size, not by the file. Feed chunks that end on a line
    boundary with :meth:`feed`; read the result with :meth:`result`.
    """

    CONTEXT_BYTES = 32 * 1024

    def __init__(self, source: str, *, year: int | None = None, tz: str | None = None, fold: bool = True,
                 written: str | Path | None = None) -> None:
        """``fold``: fold per-rank lines (:data:`FOLD_FIELDS`) of a large job; a follower that
        hands out each event as it comes (``gpulib watch``) reads them all. ``written``: the file,
        whose modification year completes glog stamps when no line of the log prints a year."""
        self.source = source
        self.year = year
        self.glog_year = modified_year(written)
        self.tz: tzinfo = zone_of(tz)
        self.events: list[JobEvent] = []
        self.problems: list[Problem] = []
        self.lines_seen = 0
        self._classifier = _Classifier()
        self._folder = Folder(_fold_shape, _fold_member, JobEvent.__slots__) if fold else None
        self._errors = KeywordLines(CATALOGUE_KEYWORDS)
        self._limit = 0
        self._error_starts: set[int] = set()
        self._progress_lines = KeywordLines(PROGRESS_KEYWORDS)

    @property
    def _year(self) -> int | None:
        """The year of the log's dated lines, else of the file's last write (glog stamps have none)."""
        return self.year or self.glog_year

    # ---------------------------------------------------------------- scanning
    def candidate_starts(self, chunk: bytes | bytearray, limit: int | None = None) -> list[int]:
        """Start offsets of lines holding a catalogue keyword (see :mod:`gpulib.parsers.prefilter`)."""
        return self._errors.line_starts(chunk, limit)

    def feed(self, chunk: bytes | bytearray, *, limit: int | None = None,
             progress: bool | list[tuple[int, int]] = False) -> None:
        """Scan ``chunk[:limit]`` (whole lines; the buffer may be reused afterwards). ``progress``
        (True, or byte ranges of the chunk) also reads step/checkpoint/launcher lines there; the
        error catalogue is always read everywhere."""
        limit = len(chunk) if limit is None else limit
        starts = self._starts(chunk, limit, progress)
        numbers = number_lines(chunk, starts, self.lines_seen)
        self.take(chunk, limit, list(zip(starts, numbers, strict=True)))
        line_no = (numbers[-1] - 1 if starts else self.lines_seen) + chunk.count(b"\n", starts[-1] if starts else 0,
                                                                                  limit)
        self.lines_seen = line_no + (1 if limit and chunk[limit - 1] != 10 else 0)

    def wanted(self, buf: bytearray, limit: int, offset: int, size: int) -> list[int]:
        """As a :class:`~gpulib.parsers.linescan.ChunkReader` of a whole file: the catalogue's lines
        everywhere, progress lines in the windows of :func:`progress_ranges`."""
        return self._starts(buf, limit, progress_ranges(size, offset, offset + limit))

    def take(self, buf: bytes | bytearray, limit: int, lines: list[tuple[int, int]]) -> None:
        """Read the lines chosen by :meth:`wanted` (``(start, line number)``, in order)."""
        self._limit = limit
        for start, lineno in lines:
            end = buf.find(b"\n", start, limit)
            raw = buf[start:end if end != -1 else limit]
            self._handle(raw.decode("utf-8", "replace").rstrip("\r"), lineno, buf, start, end,
                         light=start not in self._error_starts)

    def failed(self, exc: Exception) -> None:
        log.debug("training_log parse failed on %s", self.source, exc_info=exc)
        self.problems.append(Problem(self.source, f"could not be fully parsed: {exc}"))

    def _starts(self, chunk: bytes | bytearray, limit: int, progress: bool | list[tuple[int, int]]) -> list[int]:
        if self.year is None:  # the whole chunk: how far in the first date sits depends on the job's size
            self.year = year_hint(chunk[:limit])
        self._error_starts = set(self.candidate_starts(chunk, limit))
        ranges = [(0, limit)] if progress is True else (progress or [])
        light: set[int] = set()
        for lo, hi in ranges:
            lo = chunk.rfind(b"\n", 0, lo) + 1  # whole lines only
            light.update(lo + s for s in self._progress_lines.line_starts(chunk[lo:hi]))
        return sorted(self._error_starts | light)

    def _handle(self, raw: str, lineno: int, chunk: bytes, start: int, end: int, light: bool = False) -> None:
        if len(raw) > MAX_LINE_CHARS:
            self.problems.append(Problem(self.source, f"line of {len(raw):,} characters; only its start was read",
                                         lineno))
            raw = raw[:MAX_LINE_CHARS]
        body, hints = strip_prefixes(raw)
        ev = (self._classifier.classify_light if light else self._classifier.classify)(body, hints, lineno)
        if ev is REPEATED:
            return
        if ev is None:
            ev = self._progress(body, hints, lineno)
            if ev is None:
                return
        if ev.rank is None and hints.get("rank") is not None:
            ev.rank = hints["rank"]
        if ev.rank is None and ev.kind in ("step", "exception", "traceback", "cuda_oom", "cuda_error",
                                           "checkpoint_save_start", "checkpoint_saved", "eval_progress"):
            m = _RANK_WORD.search(body)
            if m:
                ev.rank = int(m["a"] or m["b"] or m["c"])
        if "task" in hints:
            ev.details.setdefault("task", hints["task"])
        if "prefix_host" in hints and ev.host is None:
            ev.host = hints["prefix_host"]
        ev.time_utc = stamp_in(body, year=self._year, tz=self.tz) or (
            stamp_in(hints["stamp"], year=self._year, tz=self.tz) if "stamp" in hints else None)
        if ev.time_utc is None and ev.kind not in ("nccl_init", "nccl_transport", "nccl_no_ib", "nccl_version",
                                                    "nccl_address", "rank_device", "benign"):
            ev.time_utc = self._nearby_time(chunk, start, end)
            ev.time_approx = ev.time_utc is not None
        last = self.events[-1] if self.events else None
        if (ev.kind == "nccl_error_class" and last is not None and last.kind == "nccl_error"
                and ev.line - last.line <= 2):
            last.details["code"] = last.details.get("code") or ev.details["code"]
            return  # the second line of the same NCCL error message
        if ev.kind == "status_echo" and not self._launch_status(ev, chunk, end):
            return
        if ev.kind == "child_failed":
            self._child_failed_block(ev, chunk, end)
        elif ev.kind == "nccl_error_class" or (ev.kind == "nccl_error" and "Last error" not in ev.details):
            self._last_error(ev, chunk, end)
        if self._folder is None or not self._folder.fold(ev):
            self.events.append(ev)

    def _nearby_time(self, chunk: bytes, start: int, end: int) -> str | None:
        """Borrow the time of the nearest stamped line: the previous one if the gap to the next is
        short (a traceback printed right after its log line), else the next one (error lines are
        followed within seconds by the launcher's teardown lines). One exception: a traceback that
        directly follows an ERROR/CRITICAL record is that record's ``exc_info`` (Python logging's
        ``logger.exception`` prints the message, then the traceback): it has the record's time,
        however long the others wait before their watchdog's teardown lines."""
        before = chunk[max(0, start - self.CONTEXT_BYTES):start].decode("utf-8", "replace").splitlines()
        prev = next((t for t in (stamp_in(x, year=self._year, tz=self.tz) for x in reversed(before)) if t), None)
        if prev and _logged_exception(before, self._year, self.tz):
            return prev
        after_end = self._limit if end == -1 else end
        after = chunk[after_end:min(after_end + self.CONTEXT_BYTES, self._limit)].decode("utf-8", "replace").splitlines()
        nxt = next((t for t in (stamp_in(x, year=self._year, tz=self.tz) for x in after) if t), None)
        if prev and nxt:
            return prev if seconds_between(prev, nxt) <= 120 else nxt
        return prev or nxt

    def _launch_status(self, ev: JobEvent, chunk: bytes, end: int) -> bool:
        """The shell's answer to an ``echo $?`` typed after the job's launch: ``0`` is a normal end
        (``ev`` becomes ``completed``), any other number a failed launch (``process_failed``);
        no number, and the line is dropped."""
        answer = self._following_lines(chunk, end, 1)
        status = _STATUS.match(answer[0]) if answer else None
        if status is None:
            return False
        code = int(status["code"])
        ev.kind, ev.details = ("completed", {"exitcode": 0}) if code == 0 else ("process_failed", {"exitcode": code})
        ev.text = f"{ev.text.strip()} -> {answer[0].strip()}"
        return True

    def _following_lines(self, chunk: bytes, end: int, count: int) -> list[str]:
        if end == -1:
            return []
        tail = chunk[end + 1:min(end + 1 + 8192, self._limit)].decode("utf-8", "replace").splitlines()[:count]
        return [strip_prefixes(x)[0] for x in tail]

    def _last_error(self, ev: JobEvent, chunk: bytes, end: int) -> None:
        following = self._following_lines(chunk, end, 4)
        for i, text in enumerate(following):
            if ev.kind == "nccl_error" and ev.details.get("code") is None:
                m = _NCCL_CLASS.search(text)
                if m:
                    ev.details["code"] = m["code"]
            if text.startswith("Last error:"):
                rest = text[len("Last error:"):].strip() or (following[i + 1].strip() if i + 1 < len(following) else "")
                ev.details["last_error"] = rest
                peer = _PEER_IP.search(rest)
                if peer:
                    ev.details["peer"] = peer.group(1)
                break

    def _child_failed_block(self, ev: JobEvent, chunk: bytes, end: int) -> None:
        """Read the ChildFailedError report that follows: failures and the agent's 'root cause'."""
        section, current = None, None
        failures: list[dict] = []
        for text in self._following_lines(chunk, end, 60):
            if text.startswith("Root Cause"):
                section = "root"
                continue
            if text.startswith("Failures:"):
                section = "failure"
                continue
            if _CFE_ENTRY.match(text.strip()):
                current = {"section": section}
                failures.append(current)
                continue
            m = _CFE_FIELD.match(text)
            if m and current is not None:
                key, val = m["key"], m["val"].strip()
                if key == "rank":
                    rm = _CFE_RANK.match(val)
                    if rm:
                        current["rank"], current["local_rank"] = int(rm.group(1)), int(rm.group(2))
                elif key == "exitcode":
                    em = _CFE_EXIT.match(val)
                    if em:
                        current["exitcode"], current["pid"] = int(em.group(1)), int(em.group(2))
                        current["signal"] = _signal_of(current["exitcode"])
                elif key == "time":
                    current["time_utc"] = stamp_in(val, year=self._year, tz=self.tz)
                else:
                    current[key] = val
            if text.startswith("=====") and failures and section == "root":
                break
        ev.details["failures"] = failures
        root = next((f for f in failures if f.get("section") == "root"), None)
        if root:
            ev.rank, ev.host, ev.pid = root.get("rank"), root.get("host"), root.get("pid")
            ev.details["root"] = root
            ev.time_utc = root.get("time_utc") or ev.time_utc

    @staticmethod
    def _progress(body: str, hints: dict, lineno: int) -> JobEvent | None:
        m = _EVAL_PROGRESS.search(body)
        if m:
            return JobEvent(lineno, "eval_progress", body, details={"done": int(m["done"]), "total": int(m["total"])})
        m = _STEP.search(body)
        waited, took = _DATA_S.search(body), _STEP_S.search(body)
        timed = waited is not None and took is not None  # a progress line by its timings alone
        rate = _THROUGHPUT.search(body) if "/s" in body else None
        leading = _LEADING_STEP.match(body) if rate and not m else None
        if not m and not timed and not leading:
            return None
        details: dict = {}
        if leading:
            details["step"] = int(leading["step"])
        elif m and m["step"]:
            details["step"] = int(m["step"])
            if m["of"]:
                details["planned"] = int(m["of"])
        elif m:
            details["step"], details["total"] = int(m["tq"] or m["tq2"]), int(m["total"] or m["total2"])
            if m["total2"]:
                details["planned"] = int(m["total2"])
        e = _EPOCH.search(body) if m and "poch" in body else None
        if e:
            details["epoch"] = int(e["epoch"])
            if e["epochs"]:
                details["epochs"] = int(e["epochs"])
        s = _S_PER_STEP.search(body)
        if s:
            details["s_per_step"] = float(s["v"]) if s["v"] else float(s["ms"]) / 1000.0
        if timed:
            details["data_s"] = float(waited["v"])
            details.setdefault("s_per_step", float(took["v"]))
        if rate:
            details["throughput"] = float(rate["v"] or rate["v2"])
            details["throughput_unit"] = rate["unit"] or rate["unit2"]
        metrics = {k: float(v) for k, v in _METRIC_MS.findall(body)}
        if metrics:
            details["metrics_ms"] = metrics
        if details.keys() <= {"step", "planned", "epoch", "epochs"} and " | " not in body and "loss" not in body:
            return None  # a bare number after the word "step" is not a progress line
        return JobEvent(lineno, "step", body, details=details)

    def result(self) -> ParseResult[JobEvent]:
        return ParseResult(KIND, self.events, self.problems)


CHUNK_BYTES = linescan.CHUNK_BYTES
#: In files up to this size every progress line is read; in larger ones those of the windows below.
WHOLE_FILE_BYTES = 8 * 1024 * 1024
#: Full resolution at both ends: launcher identity and the first steps; the last steps before the end.
HEAD_BYTES = 256 * 1024
TAIL_BYTES = 768 * 1024
#: Far from the ends, ``SAMPLE_WINDOWS`` windows of ``SAMPLE_BYTES``, evenly spaced.
SAMPLE_WINDOWS = 8
SAMPLE_BYTES = 32 * 1024


def progress_ranges(size: int, start: int, end: int) -> list[tuple[int, int]]:
    """The parts of the file slice [start, end) where progress lines are read, chunk-relative.

    A progress-dense log (every rank prints every step) is nearly all progress lines, and parsing
    one costs a Python regex pass: at ~25 us a line, an 800 MB console would take minutes. The scan
    of the error catalogue still reads every line; progress lines are read at full resolution at
    both ends of the file (the job's start; the last ~1 MB before it died, where the failure is)
    and in a few evenly spaced windows in between. Why the step-time analysis loses nothing it
    needs: it compares ranks *at the same step* (straggler: one rank's compute time far above the
    median of the others at that step; data stall: the data share of one rank's step), and the lines of one step sit
    next to each other, so every window is self-contained. A rank that turned slow stays slow
    until the end and shows in the tail at full resolution; the sampled windows date its onset to
    within one stride (1/8 of the file) - the first window after it is the first step reported.
    What it cannot see is a straggler that came and went between two windows, which did not stop
    the job."""
    if size <= WHOLE_FILE_BYTES:
        return [(0, end - start)]
    stride = (size - HEAD_BYTES - TAIL_BYTES) // (SAMPLE_WINDOWS + 1)
    windows = [(0, HEAD_BYTES), (size - TAIL_BYTES, size)]
    windows += [(HEAD_BYTES + k * stride, HEAD_BYTES + k * stride + SAMPLE_BYTES) for k in range(1, SAMPLE_WINDOWS + 1)]
    out = []
    for lo, hi in sorted(windows):
        lo, hi = max(lo, start), min(hi, end)
        if lo < hi:
            out.append((lo - start, hi - start))
    return out


def parse(text: str, source: str = "<text>", *, year: int | None = None, tz: str | None = None,
          **_opts) -> ParseResult[JobEvent]:
    """Parse a whole job log given as text. Never raises."""
    scanner = JobLogScanner(source, year=year, tz=tz)
    try:
        scanner.feed(text.encode("utf-8", "replace"), progress=True)
    except Exception as exc:  # noqa: BLE001 - a parser must report, never raise
        log.debug("training_log parse failed on %s", source, exc_info=True)
        scanner.problems.append(Problem(source, f"could not be fully parsed: {exc}"))
    return scanner.result()


def parse_file(path: str | Path, source: str | None = None, *, year: int | None = None,
               tz: str | None = None, also: Sequence[ChunkReader] = ()) -> ParseResult[JobEvent]:
    """Stream a job log from disk; memory stays flat whatever the file size. Never raises.

    ``also``: other readers of the same lines (the signature scan), fed from the same read
    (:mod:`gpulib.parsers.linescan`)."""
    source = source or str(path)
    scanner = JobLogScanner(source, year=year if year is not None else first_year(path), tz=tz, written=path)
    try:
        linescan.read_file(path, [scanner, *also], CHUNK_BYTES)
    except OSError as exc:
        scanner.problems.append(Problem(source, f"cannot read: {exc.strerror or exc}"))
    return scanner.result()
