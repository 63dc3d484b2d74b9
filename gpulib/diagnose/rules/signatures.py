"""Findings from the signature catalogue: what the kind-specific rules did not already say.

Every line of every text file was matched against :mod:`gpulib.catalog.signatures` while the
evidence was gathered. The kind-specific rules (kernel, GPU state, job) ran first and know more
structure (Xid folding, watchdog pointers, OOM numbers); this module

1. lends their findings the identity the line itself carried (host from a pdsh or NCCL prefix,
   rank from ``[1,12]<stdout>:``, GPU from ``GPU 2;``) where they had none, and
2. turns the matches no rule explained into findings: one per fact, however many ranks printed
   it (``Cuda failure 'out of memory'`` on 7 ranks is one finding with 7 ranks), placed on the
   earliest rank that printed it.

So a file read as "unknown kind" still counts, and a failure line never ends in a silent "none".
"""

from __future__ import annotations

import re
from collections import defaultdict

from gpulib.catalog import xid_info
from gpulib.catalog.signatures import Signature, load_signatures, render
from gpulib.diagnose.context import Context, place, quote
from gpulib.findings import Finding, Pointers
from gpulib.parsers.signatures import Signal, printers_of
from gpulib.vocabulary import GPU_CATEGORIES

#: Categories whose hard findings are the machine's fault (drain, reset, RMA), not the job's.
HARDWARE = {"gpu_fell_off_bus", "gpu_memory_error", "gpu_firmware_error", "nvlink_error", "power_fault",
            "node_lost", "network_fabric", "thermal_throttling"}
#: Exceptions that report another failure (the cascade), never a cause of their own: a launcher's or
#: a spawn wrapper's report of a child that failed (``ProcessRaisedException`` carries the child's
#: traceback, read on its own lines), a collective that failed because a peer did.
CASCADE_EXCEPTIONS = frozenset({"DistBackendError", "ChildFailedError", "DistStoreError", "DistNetworkError",
                                "RendezvousClosedError", "KeyboardInterrupt", "SignalException",
                                "ProcessExitedException", "ProcessRaisedException", "CalledProcessError"})


#: Exceptions that a signature of their own reads (with their numbers): the bare class adds nothing.
OWN_SIGNATURE = ("OutOfMemoryError",)


def _catalogue() -> dict[str, Signature]:
    return {s.id: s for s in load_signatures()}


def _meaning(sig: Signature, s: Signal) -> tuple[str | None, str | None, str, str, str]:
    """(category, interruption, severity, role, title) of one match; an Xid's come from the Xid table
    (a 45 "caused by previous Xid 149" is the 149)."""
    if sig.id.startswith("xid"):
        code = int(s.fields.get("prev") or s.fields["xid"])
        info = xid_info(code)
        if info is None:
            return "gpu_firmware_error", None, "warning", "context", f"Xid {code} (not in the catalog)"
        cause = info.interruption in ("hard", "soft")
        severity = "critical" if info.interruption == "hard" else "error" if cause else "warning"
        title = (f"Xid {s.fields['xid']} caused by Xid {code} ({info.name})" if s.fields.get("prev")
                 else f"Xid {code} ({info.name})")
        return info.category, info.interruption if cause else None, severity, "cause" if cause else "context", title
    if sig.id == "python-exception" and s.fields.get("what", "").rsplit(".", 1)[-1] in OWN_SIGNATURE:
        return None, None, "info", "benign", ""
    if sig.id == "python-exception" and s.fields.get("what", "").rsplit(".", 1)[-1] in CASCADE_EXCEPTIONS:
        return "application_error", None, "warning", "symptom", render(sig.title, s.fields)
    return sig.category, sig.interruption, sig.severity, sig.role, render(sig.title, s.fields)


def _group_key(sig: Signature, s: Signal, category: str | None) -> tuple:
    if sig.id.startswith("xid"):
        return (sig.id, s.host, s.gpu_pci or s.fields.get("uuid"), s.fields.get("prev") or s.fields.get("xid"))
    if category in HARDWARE and sig.id not in ("ib-completion-error", "remote-peer"):
        return (sig.id, s.host, s.gpu_pci or s.gpu_index)
    if sig.id == "python-exception":
        return (sig.id, s.fields.get("what"))
    return (sig.id,)


def _pid_ranks(signals: list[tuple]) -> dict[tuple, int]:
    """(host, pid) -> rank from any line that said both (NCCL's ``from rank 93``, an init line)."""
    out = {}
    for _f, s in signals:
        for rank, pid, host in printers_of(s):
            if pid is not None and rank is not None:
                out.setdefault((host, pid), rank)
    return out


def _nearby_ranks(signals: list[tuple], single_node: bool) -> dict[tuple[str, int], int]:
    """(file, line) -> rank named by an identity line up to 3 lines away: torch prints the rank on
    the line after the error ("... did not receive grad for rank 2"), a launcher the command line
    with ``--local_rank=1`` before a wrapped "exits with return code = -9"."""
    out = {}
    for f, s in signals:
        if s.signature not in NEARBY_IDENTITY:
            continue
        rank = s.rank if s.rank is not None else s.local_rank if single_node else None
        if rank is None:
            continue
        for distance in (1, 2, 3):
            for line in (s.line - distance, s.line + distance):
                out.setdefault((f.display, line), rank)
    return out


#: Benign signatures that, in the same file, turn a failure signature into history: a PSU that is
#: "Fully Redundant" again, a fabric manager that failed only because there is no NVSwitch to manage.
RESOLVED_BY = {"power-restored": "power-supply", "fm-nothing-to-do": "fabric-manager"}

#: Identity signatures whose rank belongs to the error printed a line or two away.
NEARBY_IDENTITY = {"no-grad-rank", "launcher-local-rank"}




#: The clock a line printed (``17:34:36.549117``). Stamps are kept to the second, and year-less ones
#: (glog) not at all when no file gives the year; the nodes of one NVLink domain or the ranks of a job
#: report one fault within the same second: their own clocks still say who was first.
_CLOCK = re.compile(r"\b\d\d:\d\d:\d\d(?:[.,]\d{1,9})?")


def _clock(s: Signal) -> str:
    """The order of lines whose stamps tie (the same second, or none): the clock text they printed."""
    m = _CLOCK.search(s.text[:80])
    return m[0].replace(",", ".") if m else "~"


def _cited(ctx: Context) -> dict[tuple[str, int], Finding]:
    return {(e.file, e.line): f for f in ctx.findings for e in f.quotes if e.line is not None}


def _lend_identity(matches: list[tuple[Finding, Signal]]) -> None:
    """A finding of a kind-specific rule takes the identity its lines carried, where it had none:
    a rank only when all its lines were printed by that one rank (a finding that cites two ranks'
    lines - the two sides of a collective mismatch - is about neither alone), and never to a finding
    about a whole node (``extra["scope"] == "node"``: every rank there printed the same line)."""
    finding, s = matches[0]
    finding.host = finding.host or s.host
    ranks = {m.rank for _f, m in matches if m.rank is not None}
    if finding.rank is None and len(ranks) == 1 and finding.extra.get("scope") != "node":
        finding.rank = ranks.pop()
    if finding.category not in GPU_CATEGORIES:
        return  # a PCI id on a NIC's line (mlx5_core 0000:5c:00.0) is the NIC's, not a GPU's
    finding.gpu_pci = finding.gpu_pci or s.gpu_pci
    if finding.gpu_index is None and s.gpu_index is not None and finding.category in (
            "cuda_oom", "gpu_fell_off_bus", "gpu_memory_error", "thermal_throttling"):
        finding.gpu_index = s.gpu_index


def _explained(ctx: Context, category: str | None, role: str, members: list) -> bool:
    """Another rule already reported this fact (same category and role at a compatible place)."""
    _f, first = members[0]
    for f in ctx.findings:
        if f.category != category or f.role != role:
            continue
        if first.host and f.host and first.host != f.host:
            continue
        if first.gpu_pci and f.gpu_pci and first.gpu_pci != f.gpu_pci:
            continue
        return True
    return False


def run(ctx: Context) -> None:
    catalogue = _catalogue()
    signals = [(f, s) for f in ctx.inputs.files for s in f.signals]
    if not signals:
        return
    pid_rank = _pid_ranks(signals)
    single_node = len({s.host or f.host for f, s in signals} - {None}) <= 1 and not ctx.ids.world_size
    after = _nearby_ranks(signals, single_node)
    cited = _cited(ctx)
    resolved = {(f.display, RESOLVED_BY[s.signature]) for f, s in signals if s.signature in RESOLVED_BY}
    groups: dict[tuple, list] = defaultdict(list)
    meanings: dict[tuple, tuple] = {}
    lent: dict[int, list] = defaultdict(list)  # finding -> the matches of the lines it cites
    for f, s in signals:
        if s.rank is None and s.pid is not None:
            s.rank = pid_rank.get((s.host, s.pid))
        if s.rank is None:
            s.rank = after.get((f.display, s.line))
        if s.rank is None and single_node and s.local_rank is not None:
            s.rank = s.local_rank  # one node: the local rank is the global rank
        s.host = s.host or f.host
        sig = catalogue.get(s.signature)
        if sig is None or sig.role in ("benign", "completion", "identity", "setting", "failure", "teardown"):
            continue
        if (f.display, s.line) in ctx.judged:
            continue  # a kind-specific rule placed this line in time and judged it (SEL history)
        hit = cited.get((f.display, s.line))
        if hit is not None:
            lent[id(hit)].append((hit, s))
        meaning = _meaning(sig, s)
        if meaning[3] == "benign":
            continue
        if (f.display, sig.id) in resolved:  # e.g. the PSU came back (Fully Redundant) in the same event log
            meaning = (meaning[0], None, "warning", "context", meaning[4] + " (resolved later in the same log)")
        key = _group_key(sig, s, meaning[0])
        # a line another rule cited explains this match only if that rule read it the same way (an
        # Xid 45 "caused by previous Xid 149" read as a bare 45 still has its NVLink cause to tell);
        # the same fact told twice is dropped once the root cause is known (verdict.drop_restatements)
        # a bare exception class (tier 5) on a line a rule read as a wait says nothing that rule did not:
        # gloo's "RuntimeError: Timed out waiting ... for recv operation" is the rank's wait, not its bug
        same_reading = hit is not None and (sig.id == "python-exception" and hit.role == "symptom" or (
            hit.category == meaning[0] and (hit.role == "cause" or meaning[3] != "cause")))
        groups[key].append((f, s, same_reading))
        meanings.setdefault(key, (sig, *meaning))
    for matches in lent.values():
        _lend_identity(matches)
    def order(fs) -> tuple:
        return fs[1].time_utc or "~", _clock(fs[1]), fs[1].line

    # facts in the order they were first printed: of two tied to the second, the one whose clock ran first
    for key, members in sorted(groups.items(), key=lambda kv: min(order(m) for m in kv[1])):
        if any(was_cited for *_x, was_cited in members):
            continue
        sig, category, interruption, severity, role, title = meanings[key]
        members = sorted(((f, s) for f, s, _c in members), key=order)
        if role in ("cause", "symptom") and _explained(ctx, category, role, members):
            continue
        _add(ctx, sig, category, interruption, severity, role, title, members)


def _add(ctx: Context, sig: Signature, category, interruption, severity, role, title, members) -> Finding:
    f0, s0 = members[0]
    ranks = sorted({r for _f, s in members for r, _pid, _host in printers_of(s) if r is not None})
    hosts = sorted({s.host for _f, s in members if s.host})
    if len(ranks) > 1:
        title += f" on {len(ranks)} ranks ({', '.join(map(str, ranks[:8]))}{', ...' if len(ranks) > 8 else ''})"
    elif len(hosts) > 1:
        title += f" on {len(hosts)} hosts ({', '.join(hosts[:6])})"
    pointers = Pointers()
    if role == "symptom":
        pointers.peer_addrs |= {s.fields["peer"].split("<")[0] for _f, s in members if s.fields.get("peer")}
    finding = ctx.add(f"sig-{sig.id}", severity=severity, category=category or "none", title=title, role=role,
                      interruption=interruption if role == "cause" else None, host=s0.host,
                      gpu_index=s0.gpu_index if (category in HARDWARE or category == "cuda_oom") else None,
                      gpu_pci=s0.gpu_pci, rank=s0.rank, time=s0.time_utc,
                      quotes=[quote(f, s.line, s.text) for f, s in members[:3]],
                      actions=[sig.action] if sig.action else [], pointers=pointers)
    finding.hardware = interruption == "hard" and category in HARDWARE
    finding.tier = sig.tier if not sig.id.startswith("xid") else (1 if interruption == "hard" else 2)
    # a line that names only the process (torchrun's "Signal 11 (SIGSEGV) received by PID 51878") is
    # placed through the pid, when the fact's lines name a single one
    pids = {s.pid for _f, s in members if s.pid is not None and s.host == s0.host}
    place(ctx, finding, rank=s0.rank, host=s0.host, pci=s0.gpu_pci, pid=pids.pop() if len(pids) == 1 else None,
          uuid=s0.fields.get("uuid"))
    return finding
