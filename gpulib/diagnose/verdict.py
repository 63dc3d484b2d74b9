"""Root-cause selection: the first abnormal event with a causal path to the interruption.

1. Fold duplicates: the PCIe AER report just before a GPU falls off the bus, the "GPU is lost"
   nvidia-smi snapshot, pending row remaps after an Xid 48 - all evidence of one GPU event, whose
   time is the defining kernel event (the Xid), not the precursor.
2. Collect the *suspects* that the symptoms point at (ranks that never arrived, peers that
   vanished, the node whose job step could not be killed).
3. A cause is *linked* when it sits on a suspect rank, GPU or host (or, with no pointers at all,
   anywhere), happened no later than the interruption, and - unless it is a lasting condition
   such as a lost GPU or link - no earlier than the job (a transient Xid of yesterday's job is not
   today's cause).
   A port on an HCA the job does not use (not selected by ``NCCL_IB_HCA``) is not on its path
   (:mod:`.hca_path`). A condition that began long before the job (:data:`STALE_S` before its start,
   or before the failure when the log shows no start) is not the first failure of *this*
   interruption while a linked cause near it exists elsewhere: it stays "also seen" unless it is at
   the same place, or the job felt it at start-up (NCCL on that node opened fewer HCAs or sockets).
4. The root cause is the earliest linked cause; hardware evidence beats a job-side error on the
   same GPU/rank within minutes (the job's CUDA error is how the Xid looked from inside); a crash
   beats an earlier slowdown (a hot GPU explains waiting peers, not a rank that raised).
5. Everything else that is linked - and every symptom - gets ``caused_by`` the root.
"""

from __future__ import annotations

import re

from gpulib.diagnose.context import Context, place
from gpulib.diagnose.hca_path import HcaPath, hca_of, hca_path
from gpulib.findings import Finding, Pointers, Quote
from gpulib.findings import weigh as weigh_finding
from gpulib.parsers.linescan import lines_up_to
from gpulib.parsers.logtime import seconds_between
from gpulib.vocabulary import GPU_CATEGORIES

FOLD_S = 60  # precursors/duplicates within this many seconds belong to the same event
HW_PREFERENCE_S = 600  # a hardware cause this close to a job-side one on the same GPU wins
LATE_SLACK_S = 60
HANG_AFTER_XID_S = 600  # a kernel hang this soon after an Xid on one GPU of its node hangs on that GPU
EARLY_SLACK_S = 300
#: A cause this much older than the job (or than its failure, when the log shows no start) is a
#: condition the job ran beside, not the failure that interrupted it, while something nearer explains it.
STALE_S = 6 * 3600
#: Causes that only slow a rank down, and causes that make a process exit: when both are linked,
#: the crash is what interrupted the job.
SLOWDOWNS = {"thermal_throttling"}
CRASHES = {"cuda_oom", "host_oom", "application_error", "data_pipeline_stall"}
#: Causes printed on a rank the line does not name (a data-preparation bar in a shared console): when the
#: symptoms blame ranks the evidence cannot place, such a cause may be on one of them, like a node's fault.
UNPLACED_STALLS = {"data_pipeline_stall"}
#: Faults of a GPU itself (an OOM is its process's demand, not the device's failure).
DEVICE_FAULTS = GPU_CATEGORIES - {"cuda_oom"}
#: Conditions that outlive the event that reported them: a GPU off the bus, a dead link, a
#: pending row remap, a failed PSU or a wrong driver break the *next* job too.
PERSISTENT = {"gpu_fell_off_bus", "network_fabric", "gpu_memory_error", "power_fault", "driver_mismatch",
              "nvlink_error", "gpu_firmware_error", "node_lost"}


def _close(a: str | None, b: str | None, limit: float) -> bool:
    return bool(a and b) and abs(seconds_between(a, b)) <= limit


def _same_gpu(a: Finding, b: Finding) -> bool:
    if a.host and b.host and a.host != b.host:
        return False
    if a.gpu_pci and b.gpu_pci:
        return a.gpu_pci == b.gpu_pci
    return a.rank is not None and a.rank == b.rank


def _just_before(a: Finding, b: Finding) -> bool:
    """``a`` precedes ``b`` by at most FOLD_S; without clocks (raw ``dmesg`` and no boot time), a line
    a few lines above ``b`` in the same file."""
    if a.time and b.time:
        return 0 <= seconds_between(a.time, b.time) <= FOLD_S
    if a.time or b.time or not (a.quotes and b.quotes):
        return False
    ea, eb = a.quotes[0], b.quotes[-1]
    return ea.file == eb.file and ea.line is not None and eb.line is not None and 0 <= eb.line - ea.line <= 50


def fold(ctx: Context) -> None:
    """Merge precursors and after-the-fact snapshots into the GPU event they belong to."""
    kernel_gpu = [f for f in ctx.findings
                  if f.hardware and f.role == "cause" and f.id.startswith(("xid", "fell-off", "sig-xid", "sig-fell-off"))]
    slowed = [f for f in ctx.findings if f.id.startswith("throttle-") and not f.observed]  # from a time series
    drop: set[str] = set()
    for f in ctx.findings:
        if f.id.startswith(("aer-", "sig-aer-fatal")) and f.role == "cause":
            target = next((g for g in kernel_gpu if g.host == f.host and g.category == "gpu_fell_off_bus"
                           and _just_before(f, g)), None)
            if target:
                target.quotes = target.quotes[:1] + f.quotes + target.quotes[1:]
                target.title += " (after a fatal PCIe AER on its upstream link)"
                drop.add(f.id)
        elif f.id.startswith(("gpu-lost-", "gpu-missing-", "ecc-", "fell-off-bus-")) and f.id not in drop:
            target = next((g for g in kernel_gpu if g is not f and g.category == f.category and _same_gpu(g, f)
                           and (f.time is None or g.time is None or seconds_between(g.time, f.time) >= -FOLD_S)),
                          None)
            if target and (target.time or "") <= (f.time or "~"):
                target.quotes.extend(f.quotes)
                drop.add(f.id)
        elif f.id.startswith("throttle-") and f.observed:
            # a snapshot that saw the GPU still throttled is the same slowdown the time series shows
            target = next((g for g in slowed if g is not f and _same_gpu(g, f)), None)
            if target:
                target.quotes.extend(f.quotes)
                drop.add(f.id)
    ctx.findings[:] = [f for f in ctx.findings if f.id not in drop]
    _hang_on_its_gpu(ctx)


def _hang_on_its_gpu(ctx: Context) -> None:
    """A task hung in the kernel minutes after an Xid on one GPU of its node hangs on that GPU: the
    driver waits on a channel the GPU no longer serves. The hang then names the GPU, and its first
    quote is the Xid's, where the wedge began (the hung-task report comes 120 s or more later).
    Xids on two GPUs, or none within HANG_AFTER_XID_S: the hang names no GPU."""
    xids = [f for f in ctx.findings if f.xid is not None and f.gpu_pci and f.time]
    for hang in ctx.findings:
        if not hang.id.startswith(("sig-hung-task", "hung-task")) or hang.gpu_pci or not hang.time:
            continue
        before = sorted((x for x in xids if x.host == hang.host
                         and 0 <= seconds_between(x.time, hang.time) <= HANG_AFTER_XID_S), key=lambda x: x.time)
        if not before or len({x.gpu_pci for x in before}) != 1:
            continue
        first = before[0]
        place(ctx, hang, host=hang.host, pci=first.gpu_pci)
        hang.quotes = first.quotes[:1] + hang.quotes
        hang.time = first.time
        hang.title += f" after Xid {first.xid} on GPU {first.gpu_pci}"


def promote_stall(ctx: Context) -> None:
    """A hang whose only explanation is a data stall: ranks wait in collectives (watchdog timeouts, a
    stack dump in ``all_reduce``) and nothing failed, while one rank was still reading or preprocessing
    data, or sat in its DataLoader. That rank is the one the others waited for: the stall is the cause."""
    if any(f.role == "cause" and f.interruption for f in ctx.findings):
        return
    waiting = [f for f in ctx.findings if f.role == "symptom"]
    stalls = [f for f in ctx.findings if f.role in ("context", "cause") and f.category == "data_pipeline_stall"]
    if waiting and stalls:
        stall = min(stalls, key=lambda f: f.time or "~")
        stall.role, stall.interruption, stall.severity = "cause", "soft", "error"
        stall.title += " while the other ranks waited in a collective"


def suspects(ctx: Context) -> tuple[Pointers, Pointers]:
    """(strong, weak) pointers gathered from every symptom."""
    strong, weak = Pointers(), Pointers()
    for f in ctx.findings:
        if f.role == "context" or not f.pointers:
            continue  # causes may point too: a transport mismatch blames the node that fell back
        target = weak if f.id.startswith("torchrun-") else strong
        target.ranks |= {r for r in f.pointers.ranks if r is not None}
        target.hosts |= {ctx.ids.node_of(h) for h in f.pointers.hosts if h}
        target.gpus |= {(ctx.ids.node_of(h), pci) for h, pci in f.pointers.gpus}
        for addr in f.pointers.peer_addrs:
            host = ctx.ids.host_of_addr(addr)
            if host:
                target.hosts.add(host)
    for ptr in (strong, weak):  # a suspect rank also makes its host and GPU suspect
        for rank in list(ptr.ranks):
            ref = ctx.ids.locate(rank=rank)
            if ref.gpu_pci:
                ptr.gpus.add((ref.host, ref.gpu_pci))
    return strong, weak


def _linked(f: Finding, ptr: Pointers) -> bool:
    if not ptr:
        return True
    if f.rank is not None and f.rank in ptr.ranks:
        return True
    if f.gpu_pci and ((f.host, f.gpu_pci) in ptr.gpus or (None, f.gpu_pci) in ptr.gpus):
        return True
    if f.host and f.host in ptr.hosts:
        return True
    if not f.host and set(f.extra.get("hosts") or ()) & ptr.hosts:  # a cause shared by several nodes
        return True
    # a node-level cause (no GPU of its own) on the node of a suspect rank/GPU
    return bool(f.host) and f.gpu_pci is None and any(h == f.host for h, _ in ptr.gpus)


def choose(ctx: Context, interrupted_at: str | None, job_start: str | None = None,
           prefer_hard: bool = False) -> Finding | None:
    """The root cause among the causes, or None. ``interrupted_at``: when the job last reported a
    failure (later causes cannot explain it); ``job_start``: its first log line (transient faults
    before it belong to an earlier job; persistent ones - a lost GPU or link - still count).
    ``prefer_hard``: with no job log to link causes to, a hardware failure is what stopped it."""
    causes = [f for f in ctx.findings if f.role == "cause" and f.interruption in ("hard", "soft")]
    job_start = known_start(job_start, interrupted_at)
    if interrupted_at:
        causes = [f for f in causes if not f.time or f.observed
                  or seconds_between(f.time, interrupted_at) >= -LATE_SLACK_S]
    if job_start:
        causes = [f for f in causes if not f.time or f.category in PERSISTENT
                  or seconds_between(f.time, job_start) <= EARLY_SLACK_S]
    path = hca_path(ctx)
    if path.known():  # a port the job's traffic never used did not interrupt it
        causes = [f for f in causes if f.category != "network_fabric" or path.on_path(hca_of(f), f.host) is not False]
    strong, weak = suspects(ctx)
    linked = [f for f in causes if _linked(f, strong)] if strong else []
    if not linked and weak:
        linked = [f for f in causes if _linked(f, weak)]
    if not linked and strong and _unplaced(ctx, strong):
        linked = [f for f in causes if f.rank is None and (f.hardware or f.category in UNPLACED_STALLS)]
    if not linked and not strong:
        linked = causes
    if not linked:
        return None
    linked = _near_the_interruption(linked, job_start or interrupted_at, bool(job_start), path)
    best = min(tier(f) for f in linked)  # what needs service first, then what kills a process, ...
    linked = [f for f in linked if tier(f) == best]
    if best == 1 and any(f.hardware for f in linked):
        # a job's report of a GPU fault (a CUDA error naming an uncorrectable ECC) is how the kernel's record
        # of it looked from inside: the record names the GPU, and the job's clock may run ahead of the kernel's
        linked = [f for f in linked if f.hardware or f.category not in GPU_CATEGORIES]
    if prefer_hard and any(f.interruption == "hard" for f in linked):
        linked = [f for f in linked if f.interruption == "hard"]
    elif prefer_hard and any(_device_fault(f) for f in linked):
        linked = [f for f in linked if _device_fault(f)]
    timed = sorted((f for f in linked if f.time), key=lambda f: (f.time, not f.hardware))
    root = timed[0] if timed else linked[0]
    if root.category in SLOWDOWNS:  # a slow GPU explains waiting ranks, not a rank that crashed
        crashes = [f for f in timed if f.category in CRASHES]
        root = crashes[0] if crashes else root
    if not root.hardware:
        better = [f for f in linked if f.hardware and f.time and root.time and _same_place(f, root)
                  and _close(f.time, root.time, HW_PREFERENCE_S if root.time_approx else 5)]
        if better:
            root = min(better, key=lambda f: f.time)
    return root


def _near_the_interruption(linked: list[Finding], reference: str | None, started: bool, path: HcaPath) -> list[Finding]:
    """The linked causes that can be this interruption's first failure. One that began
    :data:`STALE_S` or more before ``reference`` (the job's start, else its failure) is a condition
    the job ran beside - a port down since boot, a GPU that faulted in yesterday's job - and gives way
    to a cause near the interruption, unless it is at that cause's place (it may be why it failed)
    or the job felt it at start-up (NCCL on its node opened fewer HCAs, or sockets). With nothing
    nearer it stays the cause, and its title says how old it is."""
    if not reference:
        return linked
    old = [f for f in linked if f.time and not f.observed and seconds_between(f.time, reference) >= STALE_S]
    fresh = [f for f in linked if f not in old]
    if not fresh:
        for f in old:
            f.title += (f" ({_age(seconds_between(f.time, reference))} before the job "
                        f"{'started' if started else 'failed'}: nothing nearer explains the failure)")
        return linked
    kept = [f for f in old if any(_same_place(f, g) for g in fresh)
            or (f.category == "network_fabric" and path.short_on(f.host))]
    return fresh + kept


def _age(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours / 24:.0f} day(s)" if hours >= 48 else f"{hours:.0f} hour(s)"


def _device_fault(f: Finding) -> bool:
    """A fault of the GPU itself (a contained memory error, a throttle), not of a process on it. With
    no job log, the kernel's Xid 13/31/43 name the process that faulted (``pid=..., name=python3``):
    that process's bug, which ended with it; a device fault on the node is what the operator must
    act on, even days later and on another GPU."""
    return f.hardware and f.category in DEVICE_FAULTS


def _unplaced(ctx: Context, ptr: Pointers) -> bool:
    """Whether the symptoms blame ranks only, none of which the evidence places on a host or GPU (no
    NCCL init lines, no launcher table): a hardware fault on a node, or a data stall printed without
    a rank (the ranks that timed out were in a collective, not reading data), cannot be tested against
    such a pointer, so it is not ruled out by it. A rank's own error still is: it names another rank."""
    return not (ptr.hosts or ptr.gpus or ptr.peer_addrs) and all(
        ctx.ids.locate(rank=r).host is None for r in ptr.ranks)


def known_start(job_start: str | None, interrupted_at: str | None) -> str | None:
    """The job's start, or None when its log does not tell it. A job that hangs from its first
    minute (waiting on a file lock or a read from a stalled file system) prints nothing stamped
    until the scheduler kills it: its "first stamped line" is then the failure itself, and taking
    that as the start would throw away the storage stall that began hours earlier and held the job
    all along. So a "start" within a minute of the failure (the stamps of the failure report
    itself) says nothing about when the job began."""
    if job_start and interrupted_at and seconds_between(job_start, interrupted_at) <= LATE_SLACK_S:
        return None
    return job_start


def tier(f: Finding) -> int:
    """The catalogue tier of a cause (see :mod:`gpulib.catalog.signatures`); findings of the
    kind-specific rules get theirs from what they are."""
    if f.tier is not None:
        return f.tier
    if f.hardware and f.interruption == "hard":
        return 1
    if f.category in SLOWDOWNS or (f.category == "data_pipeline_stall" and f.id.startswith("data-stall")):
        return 3
    return 5 if f.id.startswith("exception") else 2


def alarms(ctx: Context) -> list[Finding]:
    """Findings that say something failed (causes and the cascade), benign ones aside."""
    return [f for f in ctx.findings if not f.benign and f.category != "none" and (
        f.role == "symptom" or f.role == "cause" and f.severity in ("critical", "error"))]


def best_guess(found: list[Finding]) -> str | None:
    """With no root cause, the category the failure lines point at most strongly."""
    if not found:
        return None
    return min(found, key=lambda f: (f.role != "cause", tier(f), f.time or "~")).category


def _same_place(a: Finding, b: Finding) -> bool:
    if _same_gpu(a, b):
        return True
    return a.host is not None and a.host == b.host and (a.gpu_pci is None or b.gpu_pci is None)


def adopt_job_rank(ctx: Context, root: Finding) -> None:
    """A GPU fault's rank: the one rank whose own error of the same kind (``CUDA error: uncorrectable
    ECC error`` under an Xid 48) came within minutes of it - how the fault looked from inside that
    rank. Taken only when exactly one rank said so and nothing places that rank on another node or GPU.
    Without two times to compare (an ``nvidia-smi`` paste after the crash names the lost GPU by bus id;
    a traceback carries no stamp), the rank must be the one that drives the GPU the fault names."""
    if root.rank is not None or not root.hardware or root.category not in GPU_CATEGORIES:
        return  # a node's link or power is no one rank's: the rank that saw it first is not its culprit
    ranks, timed = set(), True
    for f in ctx.findings:
        if f is root or f.hardware or f.rank is None or f.category != root.category:
            continue
        ref = ctx.ids.locate(rank=f.rank)
        if ref.host not in (root.host, None) or (ref.gpu_pci and root.gpu_pci and ref.gpu_pci != root.gpu_pci):
            continue
        if root.time and f.time:
            if not _close(f.time, root.time, HW_PREFERENCE_S):
                continue
        elif root.gpu_index is None or _device_of(ctx, f.rank, ref.gpu_index) != root.gpu_index:
            continue  # no times to match (a snapshot, a traceback): the rank must drive the GPU named
        else:
            timed = False
        ranks.add(f.rank)
    if len(ranks) == 1:
        root.rank = ranks.pop()
        if ctx.ids.pod_of_rank(root.rank):  # the node's fault, as the job named its place
            root.extra.setdefault("pod", ctx.ids.pod_of_rank(root.rank))
        root.extra.setdefault("identified_by", {})["rank"] = (
            "the one rank whose own error of this kind came with it" if timed else
            "the one rank whose own error of this kind came from this GPU (no times to match)")


def _device_of(ctx: Context, rank: int, known: int | None) -> int | None:
    """The GPU index ``rank`` drives: the identity map's, else, in a one-node job, the rank itself
    (one rank per GPU, rank i on GPU i: how torchrun, DeepSpeed and mp.spawn place them by default)."""
    if known is not None:
        return known
    hosts = {i.host for i in ctx.ids.ranks.values() if i.host} | ctx.ids.job_hosts
    return rank if len(hosts) <= 1 else None


def adopt_rank(ctx: Context, root: Finding) -> None:
    """A host OOM kill of a process that is not a rank (a DataLoader worker) still belongs to a rank:
    the one whose worker died or that torchrun saw SIGKILLed on that host within two minutes."""
    if root.rank is not None or root.category != "host_oom" or not root.host:
        return
    for f in sorted(ctx.findings, key=lambda f: f.time or "~"):
        if f is not root and f.rank is not None and f.host in (root.host, None) and \
                (f.id.startswith(("dataloader", "sigkill")) or (f.id.startswith("torchrun") and "SIGKILL" in f.title)) \
                and _close(f.time, root.time, 120):
            ref = ctx.ids.locate(rank=f.rank)
            if ref.host in (root.host, None):
                place(ctx, root, rank=f.rank, host=root.host)
                return


#: The line that opens a multi-line failure report, by the root cause's category, and whether the
#: first of several opens it: the kernel's OOM report starts with "invoked oom-killer" (the kill
#: comes after the memory dump; the nearest one, each kill has its own); a CUDA device-side assert
#: prints one ``Assertion `...` failed`` line per thread before the host raises (the first one).
OPENERS = {"host_oom": (re.compile(r"invoked oom-killer"), False),
           "application_error": (re.compile(r"\.cu:\d+: .*Assertion `"), True)}
#: A C++ exception that ends the process: ``what():`` is the second line of its report.
TERMINATE = re.compile(r"terminate called after throwing an instance of")
OPENER_WINDOW_LINES = 200  # a report's opener is at most this many lines above the line a rule read


def quote_lines(ctx: Context, root: Finding) -> None:
    """The root cause's quotes as the lines were printed: a rule that read a table row or a block
    (nvidia-smi, ibstat, sacct, an IPMI SEL) words its quotes in its own terms, but the engineer
    greps the file for the line, so each numbered quote carries the file's own text; and it
    starts where the failure's report starts (:data:`OPENERS`), not at the line that named it."""
    paths = {f.display: f.path for f in ctx.inputs.files}
    for i, ev in enumerate(list(root.quotes)):
        path = paths.get(ev.file)
        if path is None or not ev.line:
            continue
        first, above = lines_up_to(path, ev.line, OPENER_WINDOW_LINES + 1)
        raw = above[-1].strip() if above and first + len(above) - 1 == ev.line else None
        if not raw:
            continue
        if raw != ev.text:
            root.quotes[i] = Quote(ev.file, ev.line, raw)
        opener = _opener(root.category, above) if i == 0 else None
        if opener is not None:
            root.quotes.insert(0, Quote(ev.file, first + opener, above[opener].strip()))


def _opener(category: str | None, lines: list[str]) -> int | None:
    """Index in ``lines`` of the line that opens the report ending at ``lines[-1]``, or None."""
    last = len(lines) - 1
    if last >= 1 and TERMINATE.search(lines[last - 1]) and "what():" in lines[last]:
        return last - 1
    if (category or "") not in OPENERS:
        return None
    pattern, first = OPENERS[category]
    if pattern.search(lines[last]):
        return None
    order = range(last) if first else range(last - 1, -1, -1)
    return next((n for n in order if pattern.search(lines[n])), None)


def chain(ctx: Context, root: Finding) -> None:
    """Point every symptom, and every later cause at the same place, to the root."""
    for f in ctx.findings:
        if f is root or f.caused_by:
            continue
        if f.role == "symptom":
            f.caused_by = root.id  # it keeps its own category: a watchdog timeout is not a thermal fault
        elif f.role == "context" and _same_place(f, root) and f.category != "none":
            f.caused_by = root.id  # e.g. the process still holding the lost GPU, the memory pressure before an OOM
        elif f.role == "cause" and _same_place(f, root) and (
                (f.time or "~") >= (root.time or "") or (f.time_approx and _close(f.time, root.time, HW_PREFERENCE_S))):
            f.caused_by = root.id
            f.role = "symptom" if not f.hardware else "context"
    if not root.extra.get("hca_port"):  # the kernel says "link down", ibstat on the same host names the port
        root.extra["hca_port"] = next((f.extra["hca_port"] for f in ctx.findings if f.caused_by == root.id
                                       and f.host == root.host and f.extra.get("hca_port")), None)
        if root.extra["hca_port"] is None:
            del root.extra["hca_port"]


def drop_restatements(ctx: Context, root: Finding | None) -> None:
    """One fact once: a signature finding (``sig-hung-task``) and a kind-specific rule's finding of
    the same name (``hung-task``) on the same line are one fact read twice. The signature scan keeps
    its own reading until the verdict is made, because with no other cause its reading (a hung task
    means a wedged driver) can be the root cause; after it, the one that is not the root goes."""
    by_line: dict[tuple, list[Finding]] = {}
    for f in ctx.findings:  # any of its lines: a hang that names its GPU leads with the Xid before it
        for ev in {(e.file, e.line) for e in f.quotes if e.line is not None}:
            by_line.setdefault(ev, []).append(f)
    drop: set[str] = set()
    for same in by_line.values():
        for sig in (f for f in same if f.id.startswith("sig-")):
            rule = sig.id.removeprefix("sig-").rsplit("-", 1)[0]
            other = next((f for f in same if f is not sig and f.id.rsplit("-", 1)[0] == rule), None)
            if other is None:
                continue
            keep, gone = (sig, other) if sig is root else (other, sig)
            keep.quotes += [e for e in gone.quotes if e not in keep.quotes]
            drop.add(gone.id)
    ctx.findings[:] = [f for f in ctx.findings if f.id not in drop]


def weigh(ctx: Context, root: Finding | None) -> None:
    """Every finding's severity and actions follow the interruption it belongs to
    (:func:`gpulib.findings.weigh`), once the verdict is made: a soft cause is at most ``error`` and
    asks no drain; so is the cascade of a soft root cause (a ``CUDA error`` line a soft OOM caused);
    a hard root cause is ``critical``. Done after the root is chosen: the choice reads tiers and
    roles, and a cause's own rule says whether it is hard or soft."""
    soft_root = root is not None and root.interruption == "soft"
    for f in ctx.findings:
        cascade = soft_root and f.caused_by == root.id
        weigh_finding(f, f.interruption or ("soft" if cascade else None), root=f is root)
