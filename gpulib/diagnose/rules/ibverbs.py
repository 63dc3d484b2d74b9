"""What the RDMA verbs layer said under NCCL: a queue pair that could not be set up, and the NIC's own events.

Two kinds of ``NET/IB`` line are not symptoms of another failure but the first failure itself:

* **A verbs call that failed while NCCL set up a connection** (``Call to ibv_modify_qp failed with
  110 Connection timed out, on dev mlx5_5:1, curr state INIT, next state RTR, local GID ...,
  remote GID ...``; likewise ``ibv_create_qp``, ``ibv_reg_mr``, ``ibv_query_gid``...). NCCL returns
  ``ncclSystemError`` and the collective fails. A queue pair that cannot reach RTR/RTS means the two
  ends cannot address each other as configured: the fabric's configuration (*soft*), not a broken
  card. On a rail-optimised RoCE fabric NIC index *i* of every node is on rail *i* and the rails do
  not reach each other; a connection from one node's NIC to another rail's NIC of its peer (NCCL
  pairs NICs across rails unless ``NCCL_CROSS_NIC=0``) times out exactly like this. The pasted rail
  map (:mod:`gpulib.diagnose.rdma_map`) says when the two GIDs are on NICs of different index.
* **An asynchronous event of the NIC** (``NET/IB : mlx5_4:1 Got async event : GID table change``)
  is the first failure on the node that printed it. Address events (GID table or LID change, a new
  subnet manager, a P_Key change) are *soft*: the port's addressing changed under the job, the
  queue pairs built on the old address no longer work, and a restart (with the GID chosen again) is
  the remedy; when ``show_gids`` is in the evidence, the node whose pinned ``NCCL_IB_GID_INDEX`` no
  longer holds a RoCE v2 IPv4 GID is named. A device fatal / catastrophic error or a port error is
  *hard* (the card or its link). An event printed after the job's normal end interrupted nothing.

This rule runs before the catalogue, which then leaves the lines cited here alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.diagnose import ends
from gpulib.diagnose.context import Context, place, quote
from gpulib.diagnose.rdma_map import RdmaMap, mapped_ipv4, read_map
from gpulib.evidence.gather import InputFile
from gpulib.findings import Pointers
from gpulib.parsers.signatures import Signal

#: How the catalogue names the lines read here (``gpulib/catalog/signatures.tsv``).
CONFIG, ASYNC, GID_INDEX = "ib-config", "ib-async-event", "nccl-ib-gid-index"
#: NCCL's own reports that a node's connections failed (``gpulib/catalog/signatures.tsv``).
FELT = frozenset({"ib-completion-error", "nccl-system-error", "remote-peer"})
#: Async events that say the port's addressing changed, not that the hardware failed.
ADDRESSING = frozenset({"GID table change", "LID change", "P_Key change", "SM change", "client reregistration"})
_ADDRESSING_ACTIONS = [
    "Check NCCL_IB_GID_INDEX against `show_gids` on both nodes: the index must hold the RoCE v2 GID of the "
    "routable IPv4 address on every node (or leave it unset: NCCL 2.21 and later pick it per node)",
    "Check that the two GIDs' subnets reach each other (`ping -I <netdev> <remote IP>`; on a rail-optimised fabric "
    "set NCCL_CROSS_NIC=0), and the port MTU on both ends"]
_RESOURCE_ACTIONS = [
    "Check the locked-memory limit where the ranks run: `ulimit -l` must be unlimited (a container needs "
    "--ulimit memlock=-1, a Slurm node PropagateResourceLimits / the systemd LimitMEMLOCK)",
    "For GPU buffers: the nvidia-peermem module loaded (`lsmod | grep peermem`) or a kernel with DMA-BUF support; "
    "NCCL_NET_GDR_LEVEL=LOC runs without GPUDirect RDMA to confirm"]
#: What a failing verbs call says about the set-up, and what to check: (verdict, actions).
CALLS = {
    "modify_qp": ("the two ends cannot address each other as configured (GID index, routing between their subnets)",
                  _ADDRESSING_ACTIONS),
    "create_ah": ("the address of the far end cannot be resolved as configured (GID index, routing)",
                  _ADDRESSING_ACTIONS),
    "query_gid": ("the configured GID index does not exist on this port", _ADDRESSING_ACTIONS),
    "reg_mr": ("the NIC could not register the buffer's memory (locked-memory limit, GPUDirect RDMA support)",
               _RESOURCE_ACTIONS),
    "reg_dmabuf_mr": ("the NIC could not register the GPU buffer through DMA-BUF (kernel or driver support)",
                      _RESOURCE_ACTIONS),
    "create_qp": ("the NIC refused a queue pair (locked-memory limit, the HCA's resource limits)", _RESOURCE_ACTIONS),
    "create_cq": ("the NIC refused a completion queue (locked-memory limit, the HCA's resource limits)",
                  _RESOURCE_ACTIONS),
    "alloc_pd": ("the NIC refused a protection domain (the device is not usable from the job)", _RESOURCE_ACTIONS),
}
_DEV = re.compile(r"\bon dev (?P<dev>[\w.-]+)(?::(?P<port>\d+))?")
_GIDS = re.compile(r"local GID (?P<local>[0-9a-fA-F:.]+), remote GID (?P<remote>[0-9a-fA-F:.]+)")
_STATES = re.compile(r"curr state (?P<curr>\w+), next state (?P<next>\w+)")
_ERRNO = re.compile(r"failed with (?P<num>\d+) (?P<what>[^,]+)")
_ASYNC_DEV = re.compile(r"NET/IB ?: ?(?P<dev>[\w.-]+):(?P<port>\d+) Got async")


def run(ctx: Context) -> None:
    calls = [(f, s) for f in ctx.inputs.files for s in f.signals if s.signature == CONFIG and s.fields.get("call")]
    events = [(f, s) for f in ctx.inputs.files for s in f.signals if s.signature == ASYNC]
    if not calls and not events:
        return
    rdma = read_map(ctx.inputs)
    if calls:
        _setup_failure(ctx, calls, rdma)
    if events:
        _async_events(ctx, events, rdma)


def _first(items: list[tuple[InputFile, Signal]]) -> tuple[InputFile, Signal]:
    return min(items, key=lambda fs: (fs[1].time_utc or "~", fs[0].display, fs[1].line))


@dataclass(frozen=True)
class Crossing:
    """A connection between two rails: the local device and address, the remote address and the
    device of the node that holds it."""

    local_dev: str
    local: str
    remote_host: str | None
    remote_dev: str
    remote: str

    def __str__(self) -> str:
        return (f"{self.local_dev} ({self.local}) -> {self.remote_dev} of "
                f"{self.remote_host or 'the peer'} ({self.remote})")


def _crossing(rdma: RdmaMap, text: str) -> Crossing | None:
    """Whether the failing connection joins two rails, as the pasted rail map shows: the local and
    remote GIDs are IPv4 addresses that the map places on NICs of different index."""
    gids = _GIDS.search(text)
    if not gids:
        return None
    local, remote = mapped_ipv4(gids["local"]), mapped_ipv4(gids["remote"])
    ours, theirs = (rdma.holder(local) if local else None), (rdma.holder(remote) if remote else None)
    if ours is None or theirs is None or ours[1] == theirs[1]:
        return None
    return Crossing(ours[1], str(local), theirs[0], theirs[1], str(remote))


def _setup_failure(ctx: Context, calls: list[tuple[InputFile, Signal]], rdma: RdmaMap) -> None:
    fl, s = _first(calls)
    host = s.host or fl.host
    dev = _DEV.search(s.text)
    states = _STATES.search(s.text)
    errno = _ERRNO.search(s.text)
    crossings = []
    for _f, x in calls:
        crossing = _crossing(rdma, x.text)
        if crossing and crossing not in crossings:
            crossings.append(crossing)
    step = f" ({states['curr']} -> {states['next']})" if states else ""
    why = f": {errno['num']} {errno['what'].strip()}" if errno else ""
    where = f" on {dev['dev']}" if dev else ""
    call = s.fields["call"]
    if crossings:
        verdict = (f"the connection joins two rails of a rail-optimised fabric ({crossings[0]}"
                   + (f", and {len(crossings) - 1} more" if len(crossings) > 1 else "")
                   + "): NICs of different rails have no path to each other")
        actions = ["Set NCCL_CROSS_NIC=0 so NCCL connects each NIC only to the same-index NIC of its peers, and relaunch",
                   "Check the rail map on every node (`ibdev2netdev` and `ip -br addr`): NIC index i must be on "
                   "rail i everywhere, and NCCL_IB_HCA must list the NICs in the same order on every node"]
    else:
        verdict, actions = CALLS.get(call, CALLS["modify_qp"])
    f = ctx.add("ib-qp-setup", severity="error", category="network_fabric", interruption="soft",
                title=f"NCCL could not set up an RDMA connection: ibv_{call} failed{why}{where}{step}; "
                      f"{verdict} (soft: a fabric configuration, no card or node is broken)",
                time=s.time_utc, quotes=[quote(x, y.line, y.text) for x, y in calls[:3]],
                pointers=Pointers(hosts={host} if host else set()), actions=actions)
    place(ctx, f, host=host, rank=s.rank)  # a launcher prefix's rank; NCCL's [n] is the device, not the rank
    if host:
        f.extra["identified_by"] = {"host": f"the host that printed the failing call ({fl.display}:{s.line})"}
    f.tier = 2


def _async_events(ctx: Context, events: list[tuple[InputFile, Signal]], rdma: RdmaMap) -> None:
    ended = ends.normal_ends(ctx)
    late = [(f, s) for f, s in events if f.display in ended and s.line > ended[f.display].since]
    live = [(f, s) for f, s in events if (f, s) not in late]
    if late:
        ctx.judged.update((f.display, s.line) for f, s in late)
        f0, s0 = late[0]
        end = ended[f0.display]
        ctx.add("ib-event-after-end", severity="warning", category="network_fabric", role="context",
                title=f"The NIC reported '{s0.fields.get('what')}' after the job's normal end ({end.how}: "
                      f"{end.file.display}:{end.line}): it interrupted nothing here",
                host=s0.host or f0.host, quotes=[quote(f0, s0.line, s0.text)],
                actions=["Check the port before the next job: `ibstat` (Active/LinkUp) and `show_gids`"])
    if not live:
        return
    addressing = [(f, s) for f, s in live if s.fields.get("what") in ADDRESSING]
    other = [(f, s) for f, s in live if (f, s) not in addressing]
    if other:
        _fatal(ctx, other)
    if addressing:
        _address_change(ctx, addressing, rdma)


def _fatal(ctx: Context, items: list[tuple[InputFile, Signal]]) -> None:
    fl, s = _first(items)
    host = s.host or fl.host
    dev = _ASYNC_DEV.search(s.text)
    f = ctx.add("ib-nic-event", severity="critical", category="network_fabric", interruption="hard",
                title=f"The NIC {dev['dev'] + ':' + dev['port'] + ' ' if dev else ''}reported "
                      f"'{s.fields.get('what')}': the card or its link failed (hard)",
                time=s.time_utc, quotes=[quote(x, y.line, y.text) for x, y in items[:3]],
                pointers=_felt(items, host),
                actions=["Drain the node; check `ibstat` / `ibv_devinfo` (port state, firmware), the cable and the "
                         "switch port (`mlxlink -d <dev>`), and the kernel log for mlx5_core errors; reset or "
                         "replace the HCA before giving the node back"])
    place(ctx, f, host=host, rank=s.rank)
    f.hardware, f.tier = True, 1


def _address_change(ctx: Context, items: list[tuple[InputFile, Signal]], rdma: RdmaMap) -> None:
    fl, s = _first(items)
    host = s.host or fl.host
    dev = _ASYNC_DEV.search(s.text)
    what = s.fields.get("what")
    pinned = _pinned_index(ctx)
    moved = [e for e in rdma.gids if pinned is not None and e.index == pinned and not e.routable_v2
             and (dev is None or e.dev == dev["dev"])]
    checked: set[str | None] = {e.host for e in rdma.gids if pinned is not None and e.index == pinned}
    quotes = [quote(x, y.line, y.text) for x, y in items[:2]]
    if moved:
        e = moved[0]
        now = next((g for g in rdma.gids if g.host == e.host and g.dev == e.dev and g.routable_v2), None)
        gid = (f": index {pinned} of {e.dev} on {e.host} now holds {e.gid} ({e.version}, no IPv4)"
               + (f", the RoCE v2 GID of {now.ipv4} moved to index {now.index}" if now else ""))
        host = e.host or host
    elif pinned is not None and checked:
        named = sorted(checked - {None})
        gid = (f"; `show_gids` shows index {pinned} still holding a RoCE v2 IPv4 GID"
               + (f" on {', '.join(named)}" if named else ""))
    else:
        gid = ""
    f = ctx.add("ib-address-change", severity="error", category="network_fabric", interruption="soft",
                title=f"The NIC {dev['dev'] + ':' + dev['port'] + ' ' if dev else ''}reported '{what}' under the "
                      f"running job: the port's addressing changed and the connections built on the old address "
                      f"failed{gid} (soft: the address configuration, not the hardware)",
                time=s.time_utc, quotes=quotes, pointers=_felt(items, host),
                actions=["Restart the job: a communicator that lost its GID does not recover",
                         f"On {host or 'the node'}: find what rewrote the port's addresses (NetworkManager, DHCP, an "
                         "address added or removed) and restore them (`show_gids` must list the RoCE v2 IPv4 GID "
                         "at the same index on every node); a node restart restores the order",
                         "Stop pinning the index: unset NCCL_IB_GID_INDEX (NCCL 2.21 and later select the RoCE v2 "
                         "GID per node), or pin the address family with NCCL_IB_ADDR_FAMILY=AF_INET"])
    place(ctx, f, host=host, rank=None if moved else s.rank)  # the rank printed the event, not the node named
    if moved:
        f.extra["identified_by"] = {"host": f"`show_gids` ({moved[0].where})"}


def _felt(items: list[tuple[InputFile, Signal]], host: str | None) -> Pointers:
    """The node itself, as a suspect, when its own connections failed after the event (NCCL's completion
    errors or system/remote errors printed by that node, later in the same log): then the event is why
    they failed. Without them the event is linked only as any other node-level cause is (a port error on
    a node other than the one whose ranks went missing is not the cause)."""
    for fl, s in items:
        at = s.host or fl.host
        if at and any(x.signature in FELT and x.line > s.line and (x.host or fl.host) == at for x in fl.signals):
            return Pointers(hosts={host} if host else {at})
    return Pointers()


def _pinned_index(ctx: Context) -> int | None:
    """The GID index the job pinned (``NCCL_IB_GID_INDEX``), when the evidence shows one setting."""
    values = {s.fields.get("num") for f in ctx.inputs.files for s in f.signals if s.signature == GID_INDEX}
    values.discard(None)
    return int(values.pop()) if len(values) == 1 else None
