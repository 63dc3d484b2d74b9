"""The network between the ranks: failures that NCCL reports from its transport, judged in context.

The signature catalogue reads each line alone, and alone these lines are symptoms: a refused
connection, an InfiniBand completion error or a reset socket is what a rank sees when *something*
went away. Their cause depends on what else the evidence shows, which is what this module decides:

* **At start-up** (before the first progress line) a connection that NCCL cannot make is the network
  or its set-up, not the training code: ``Connect to 10.0.0.7<41234> failed : Connection refused``
  to a peer the evidence names (a reverse lookup, NCCL's bootstrap lines) is that node's link or
  NCCL process, *hard*, on that node; ``unhandled system error`` with no peer named is the set-up,
  *soft*, and the questions to ask are those of the NCCL environment audit
  (:mod:`gpulib.preflight.nccl_env`: the interface, the HCA, IB switched off, the timeout).
* **IB asked for, sockets used**: the job set ``NCCL_IB_HCA`` / ``NCCL_IB_DISABLE=0`` or NCCL could not
  open the RDMA device, and NCCL then found none and fell back to TCP sockets: *soft*, the device is
  not reachable from where the job runs (a container without ``/dev/infiniband``, RDMA not enabled).
* **IB completion errors** (``Got completion from peer X with error 12 ... vendor err 129``: the
  transport retry counter ran out, the far end never acknowledged) and ``ncclRemoteError`` when
  nothing else failed: *hard* (the link, cable or port to that peer), unless the evidence shows a
  configuration error (a queue pair that could not be set up: GID index, MTU), then *soft*. The peer
  is named when the line or a lookup names it; otherwise the reporting end (host and device) is.

Each is a cause of its own tier: a crash, an OOM or a lost GPU elsewhere in the evidence still comes
first (a peer that died makes its partners print exactly these lines).
"""

from __future__ import annotations

import re

from gpulib.diagnose.addresses import AddressBook, Named, blamed_end
from gpulib.diagnose.context import Context, place, quote
from gpulib.evidence import kinds
from gpulib.evidence.gather import InputFile
from gpulib.findings import Finding, Pointers
from gpulib.parsers.signatures import Signal

#: What the NCCL environment audit (:func:`gpulib.preflight.nccl_env.audit`) asks, as the operator asks it.
AUDIT_QUESTIONS = [
    "Does NCCL_SOCKET_IFNAME name an interface that exists and is up on every node (not lo, docker0 or a "
    "bridge)? `ip -o link` on each node",
    "Does NCCL_IB_HCA name ports that are Active/LinkUp in `ibstat` on every node, and is IB switched on "
    "(NCCL_IB_DISABLE unset or 0, NCCL_NET not Socket)?",
    "In a container: are /dev/infiniband and IPC_LOCK passed in, and is the network the host's (--network=host)?",
    "Audit the job's environment against the nodes before relaunching: `gpulib run preflight -p job_env=job.env "
    "-p nccl_log=<this log>`",
]
#: Signatures that show the link itself failing: a completion error next to them is that failure.
LINK_SIGNATURES = frozenset({"ib-async-event", "ib-port-down"})
#: How the catalogue names what this module reads.
CONNECT, SYSTEM, COMPLETION, REMOTE = "nccl-connect-failed", "nccl-system-error", "ib-completion-error", "remote-peer"
ABSENT, WANTED, OPEN_FAILED, CONFIG = "nccl-ib-absent", "nccl-ib-wanted", "ib-open-failed", "ib-config"
STORE = "store-unreachable"
#: ibverbs completion statuses by the names transports other than NCCL print (TensorPipe's ibv
#: transport, UCX, MPI: ``ibv_wc_status_str`` or the enum), as NCCL's numbers.
IBV_STATUS = {"transport retry counter exceeded": "12", "IBV_WC_RETRY_EXC_ERR": "12",
              "RNR retry counter exceeded": "13", "IBV_WC_RNR_RETRY_EXC_ERR": "13"}
#: A Python exception that only quotes a transport's error is how that failure looked from Python.
_QUOTES_TRANSPORT = re.compile(r"NCCL|retry counter exceeded|IBV_WC_")
#: A remote error of NCCL's own transport (a c10d store's "Connection reset by peer" is not one).
_NCCL_REMOTE = re.compile(r"ncclRemoteError|remote process exited|socketProgress|NET/(?:IB|Socket)")


def run(ctx: Context) -> None:
    signals: dict[str, list[tuple[InputFile, Signal]]] = {}
    for f in ctx.inputs.files:
        for s in f.signals:
            signals.setdefault(s.signature, []).append((f, s))
    if not signals.keys() & {CONNECT, SYSTEM, COMPLETION, REMOTE, ABSENT, STORE}:
        return
    book = AddressBook(ctx.inputs, ctx.ids)
    first = _FirstStep(ctx)
    _store(ctx, signals, book, first)
    _socket_fallback(ctx, signals)
    _startup(ctx, signals, book, first)
    _completion(ctx, signals, book)


def _first(items: list[tuple[InputFile, Signal]]) -> tuple[InputFile, Signal]:
    return min(items, key=lambda fs: (fs[1].time_utc or "~", fs[0].display, fs[1].line))


class _FirstStep:
    """When the job first made progress: the earliest stamped step line, and per file the line of its
    first step (for lines without clocks). Read once: a large job's console holds ~100,000 steps."""

    def __init__(self, ctx: Context) -> None:
        self.time: str | None = None
        self.line: dict[str, int] = {}
        for sf, ev in ctx.records(kinds.TRAINING_LOG):
            if ev.kind != "step":
                continue
            if ev.time_utc and not ev.time_approx and (self.time is None or ev.time_utc < self.time):
                self.time = ev.time_utc
            self.line[sf.display] = min(self.line.get(sf.display, ev.line), ev.line)

    def before(self, fl: InputFile, s: Signal) -> bool:
        """Whether the line came before the job made any progress (a step earlier in time, or,
        without clocks, earlier in the same file)."""
        if s.time_utc and self.time:
            return s.time_utc < self.time
        return s.line < self.line.get(fl.display, s.line + 1)


def _other_causes(ctx: Context) -> list[Finding]:
    """Causes of any other kind already found (a bare exception that only quotes an NCCL or ibverbs
    error is not one: it is how the network failure looked from Python)."""
    return [f for f in ctx.findings if f.role == "cause" and f.interruption in ("hard", "soft")
            and not (f.id.startswith("sig-python-exception")
                     and any(_QUOTES_TRANSPORT.search(e.text) for e in f.quotes))]


def _store(ctx: Context, signals, book: AddressBook, first: _FirstStep) -> None:
    """A rank that cannot reach the c10d store before the job started: the peer holding the store
    (rank 0's node, MASTER_ADDR / the rendezvous endpoint) was not there - not up yet, crashed, or
    the address is wrong. Named when the evidence names the address's node; a launch setting to fix
    (soft) unless that node's own failure is in the evidence (then that failure is the cause)."""
    waits = [(fl, s) for fl, s in signals.get(STORE, []) if first.before(fl, s)]
    if not waits or _other_causes(ctx):
        return
    fl, s = _first(waits)
    peer = (s.fields.get("peer") or "").strip("[]")
    named = book.name_of(peer) if peer else None
    who = f"{named.host} ({peer})" if named else peer or "the store's address"
    what = s.fields.get("what") or s.fields.get("what2") or "timed out"
    f = ctx.add("store-unreachable", severity="error", category="application_error", interruption="soft",
                title=f"The c10d store at {who} could not be reached before the job started ({what}): the peer that "
                      "holds it (rank 0 / MASTER_ADDR) was not there - not up yet, crashed, or the address or port "
                      "is wrong" + ("" if named else "; no node of the evidence has that address"),
                host=named.host if named else None, time=s.time_utc, quotes=[quote(fl, s.line, s.text)],
                pointers=Pointers(hosts={named.host} if named else set()),
                actions=["Check MASTER_ADDR / --rdzv-endpoint and MASTER_PORT in the launch script against the node "
                         "that runs rank 0 (`hostname -I` there), and that the port is open between the nodes",
                         "If the address is right: read that node's log for why its rank 0 was not listening yet "
                         "(still staging data, crashed, never started)"])
    if named:
        f.extra["identified_by"] = {"host": named.source}


def _socket_fallback(ctx: Context, signals) -> None:
    absent = signals.get(ABSENT, [])
    asked = signals.get(OPEN_FAILED, []) + signals.get(WANTED, [])
    if not absent or not asked or not any("No device found" in s.text for _f, s in absent):
        return
    fl, s = _first(absent)
    failed = signals.get(OPEN_FAILED, [])
    why = (f"NCCL could not open the RDMA device ({_first(failed)[1].text.strip()[:80]})" if failed else
           "the job asked for InfiniBand/RoCE (NCCL_IB_HCA / NCCL_IB_DISABLE=0)")
    f = ctx.add("ib-fallback", severity="error", category="network_fabric", interruption="soft",
                title=f"NCCL fell back to TCP sockets: {why}, then found no IB device: the job runs 10-50x slower "
                      "over sockets and times out under load (soft: the device is not reachable from where the "
                      "job runs, the fabric itself may be fine)",
                host=s.host or fl.host, time=s.time_utc,
                quotes=[quote(x, y.line, y.text) for x, y in (_first(asked), (fl, s))],
                actions=["Expose the RDMA device to the job: in a container --device /dev/infiniband, --cap-add "
                         "IPC_LOCK, --network=host; on the node rdma-core and the IB driver loaded "
                         "(`ibv_devinfo` must list the HCA from inside the job's environment)", *AUDIT_QUESTIONS])
    f.tier = 3  # it slows the job; a process that died of something else died of that


def _startup(ctx: Context, signals, book: AddressBook, first: _FirstStep) -> None:
    connects = [(fl, s) for fl, s in signals.get(CONNECT, []) if first.before(fl, s)]
    systems = [(fl, s) for fl, s in signals.get(SYSTEM, []) if first.before(fl, s)]
    if not connects and not systems:
        return
    if connects:
        peers: dict[str, Named | None] = {}
        for _fl, s in connects:
            peer = (s.fields.get("peer") or "").split("<")[0]
            peers.setdefault(peer, book.name_of(peer))
        named = {n.host: n for n in peers.values() if n}
        fl, s = _first(connects)
        what = s.fields.get("what") or "failed"
        if len(named) == 1 and len(peers) == 1:
            (host, name), = named.items()
            addr = next(iter(peers))
            f = ctx.add("nccl-connect", severity="critical", category="network_fabric", interruption="hard",
                        title=f"At start-up NCCL could not connect to {host} ({addr}: {what}): that node's network "
                              "link, or its NCCL process, was not there (hard: a broken peer, named by "
                              f"{name.source})",
                        host=host, time=s.time_utc, quotes=[quote(fl, s.line, s.text)],
                        pointers=Pointers(hosts={host}),
                        actions=[f"Exclude {host} from the next run (`sbatch --exclude={host}`) and report it: check "
                                 f"its interfaces and `ibstat` there, and that it can reach and be reached by the "
                                 "other nodes (ping, the NCCL port range)"])
            f.extra["identified_by"] = {"host": name.source}
            f.hardware, f.tier = True, 2
            return
        title = (f"At start-up NCCL could not connect to {', '.join(sorted(peers)[:4])} ({what})"
                 + ("" if named else ": the address names no node in the evidence")
                 + "; a connection that cannot be made at init is the network set-up (soft)")
        f = ctx.add("nccl-connect", severity="error", category="network_fabric", interruption="soft", title=title,
                    host=s.host or fl.host, time=s.time_utc, quotes=[quote(fl, s.line, s.text)],
                    actions=["Resolve the peer address (`nslookup <addr>`) to see which node it is", *AUDIT_QUESTIONS])
        f.tier = 2
        return
    fl, s = _first(systems)
    f = ctx.add("nccl-init-system", severity="error", category="network_fabric", interruption="soft",
                title="NCCL failed with a system error while the communicator was set up (before the first step): "
                      "the network or its set-up, not the training code (soft until a broken peer is named)",
                host=s.host or fl.host, rank=s.rank, time=s.time_utc, quotes=[quote(fl, s.line, s.text)],
                actions=["Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET: the WARN line before the error names "
                         "the call that failed and the peer", *AUDIT_QUESTIONS])
    f.tier = 3  # a named cause (a full /dev/shm, a refused peer) is more specific


def _common_end(ctx: Context, items: list[tuple[InputFile, Signal]], book: AddressBook) -> Named | None:
    """With errors naming several peers: the host at one end of every failing connection
    (:func:`~gpulib.diagnose.addresses.blamed_end`), when the evidence names every end."""
    pairs = []
    for fl, s in items:
        far = book.name_of(s.fields.get("peer"))
        if far is None:
            return None
        pairs.append((ctx.ids.node_of(s.host or fl.host), far.host))
    end = blamed_end(pairs)
    return Named(end, f"the one end of all {len(pairs)} failing connections") if end else None


def _completion(ctx: Context, signals, book: AddressBook) -> None:
    completions = signals.get(COMPLETION, [])
    remote = [(fl, s) for fl, s in signals.get(REMOTE, []) if (fl.display, s.line) not in ctx.judged
              and _NCCL_REMOTE.search(s.text)]
    if not completions and not remote:
        return
    items = completions or remote
    peers = {(s.fields.get("peer") or "").split("<")[0] for _fl, s in items} - {""}
    named = {n.host: n for n in (book.name_of(p) for p in peers) if n}
    peer = next(iter(named.values())) if len(named) == 1 else _common_end(ctx, items, book)
    links = [f for f in ctx.findings if f.role == "cause" and f.category == "network_fabric" and f.interruption == "hard"]
    if links:  # the link's own failure is the cause; the completion errors say which node's it was
        for f in links:
            if f.host is None and peer is not None:
                f.host = peer.host
                f.extra.setdefault("identified_by", {})["host"] = f"the IB completion errors' peer ({peer.source})"
        return
    if _other_causes(ctx):
        return  # a peer that died of something else makes its partners print these lines
    fl, s = _first(items)
    config = signals.get(CONFIG, [])
    status = s.fields.get("num") or IBV_STATUS.get(s.fields.get("what") or "")
    what = (f"IB completion error {status}" + (" (transport retry counter exceeded: the far end never "
                                               "acknowledged)" if status == "12" else
                                               " (RNR retry counter exceeded: the far end had no receive posted)"
                                               if status == "13" else "")
            if completions else "ncclRemoteError: a peer's connection went away")
    if config:
        hard, why = False, f"soft: the evidence shows a configuration error ({_first(config)[1].text.strip()[:80]})"
    else:
        hard, why = True, ("hard: no configuration error (GID index, MTU, queue-pair set-up) and no crash of any "
                           "process is in the evidence, so the link, cable or port to the peer is the suspect")
    where = (f" with {peer.host}" if peer else f" seen from {s.host or fl.host}" if (s.host or fl.host) else "")
    f = ctx.add("ib-link", severity="critical" if hard else "error", category="network_fabric",
                interruption="hard" if hard else "soft",
                title=f"{what} on the link{where}; {why}",
                time=s.time_utc, quotes=[quote(x, y.line, y.text) for x, y in (items + config)[:3]],
                pointers=Pointers(hosts={peer.host} if peer else set()),
                actions=["Check the port and cable of the named end: `ibstat` (State Active, Physical state LinkUp), "
                         "`perfquery -x` / `ibdiagnet` error counters (symbol errors, link downed), the switch port; "
                         "drain the node whose counters climb",
                         "If only some node pairs fail: were the nodes provisioned on the same fabric / partition?"]
                + ([] if hard else ["Set NCCL_IB_GID_INDEX to the RoCE v2 GID of the routable address (`show_gids`) "
                                    "and the same MTU on both ends"]))
    if peer is not None:
        f.host = peer.host
        f.extra["identified_by"] = {"host": peer.source}
    else:
        place(ctx, f, host=s.host or fl.host, rank=s.rank, pid=s.pid)
        if f.gpu_index is None and s.gpu_index is not None:
            f.gpu_index = s.gpu_index
        if f.host:
            f.extra["identified_by"] = {"host": f"the host that reported it ({fl.display}:{s.line}); the peer is not "
                                                "named by host in the evidence"}
    f.hardware, f.tier = hard, 4
