"""Audit a job's NCCL/PyTorch environment against the nodes it will run on.

Why: most "NCCL error: unhandled system error" at init are configuration, not hardware. The
classic ones, each checked here with the exact line to change:

* ``NCCL_SOCKET_IFNAME`` naming an interface that does not exist or is down on some node (it
  exists on the login node where the script was written), or only ``lo`` on a multi-node job;
* ``NCCL_IB_HCA`` naming a port that is not ``Active`` in ibstat on some node;
* InfiniBand present and Active but switched off (``NCCL_IB_DISABLE=1``, ``NCCL_NET=Socket``),
  or an NCCL log that shows ``NET/Socket`` where IB exists: the job runs, 10-50x slower, and
  times out under load;
* ``NCCL_DEBUG`` unset: the next crash prints nothing about which rank or link failed;
* ``NCCL_IB_TIMEOUT`` too low for the job's scale (retries give up on a congested fabric), and
  PyTorch watchdog settings that make a failed collective hang instead of abort.

NCCL's list syntax (``NCCL_SOCKET_IFNAME``, ``NCCL_IB_HCA``): comma-separated names matched as
*prefixes*; a leading ``^`` excludes the listed names, a leading ``=`` requires exact names;
``NCCL_IB_HCA`` entries may carry a port (``mlx5_0:1``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.findings import Finding
from gpulib.parsers import infiniband, ip_link
from gpulib.parsers.base import read_text
from gpulib.parsers.infiniband import IbPort
from gpulib.parsers.ip_link import NetInterface
from gpulib.preflight.findings import env_finding

#: Interfaces NCCL itself skips when NCCL_SOCKET_IFNAME is unset (docker bridges, libvirt, veth).
_VIRTUAL = re.compile(r"^(lo|docker|virbr|veth|br-|cni|flannel|cali|ifb|tun|tap)")
#: NCCL's default NCCL_IB_TIMEOUT since 2.14; the runbook's value for large jobs.
IB_TIMEOUT_DEFAULT = 20
IB_TIMEOUT_LARGE = 22
#: Nodes from which the runbook's larger IB timeout is recommended.
LARGE_JOB_NODES = 16
_NET_SOCKET = re.compile(r"NCCL INFO (?:NET/Socket : Using|Using network Socket)")
_NET_IB = re.compile(r"NCCL INFO (?:NET/IB : Using|Using network IB)")


@dataclass
class NodeFacts:
    """What the audit needs to know about one node: its interfaces (``ip -o link`` or
    ``/sys/class/net``) and its HCA ports (``ibstat``)."""

    host: str
    interfaces: list[NetInterface] = field(default_factory=list)
    ib_ports: list[IbPort] = field(default_factory=list)

    def active_ib(self) -> list[IbPort]:
        return [p for p in self.ib_ports if p.up and not p.error]


@dataclass
class _Spec:
    names: list[str]
    exclude: bool
    exact: bool


def _spec(value: str) -> _Spec:
    value = value.strip()
    exclude = value.startswith("^")
    value = value.lstrip("^")
    exact = value.startswith("=")
    return _Spec([n.strip() for n in value.lstrip("=").split(",") if n.strip()], exclude, exact)


def _matches(spec: _Spec, name: str) -> bool:
    hit = any(name == n if spec.exact else name.startswith(n) for n in spec.names)
    return hit != spec.exclude


def audit(env: Mapping[str, str], nodes: list[NodeFacts], nccl_log: str | None = None) -> list[Finding]:
    """Every finding for ``env`` (the job's environment) on ``nodes``; ``nccl_log`` is the text
    of an ``NCCL_DEBUG=INFO`` log of a previous run, when there is one."""
    out: list[Finding] = []
    out += _debug(env)
    out += _socket_ifname(env, nodes)
    out += _ib_hca(env, nodes)
    out += _ib_switched_off(env, nodes, nccl_log)
    out += _ib_timeout(env, nodes)
    out += _torch_watchdog(env)
    if env.get("NCCL_P2P_DISABLE") == "1":
        out.append(env_finding("nccl-p2p-disabled", "info", "NCCL_P2P_DISABLE",
                               "NCCL_P2P_DISABLE=1: GPUs of one node exchange data through host memory, not NVLink/PCIe "
                               "peer-to-peer. Keep it only as a workaround for a known P2P fault.",
                               "unset NCCL_P2P_DISABLE"))
    return out


def _debug(env: Mapping[str, str]) -> list[Finding]:
    level = env.get("NCCL_DEBUG", "").upper()
    if level in ("INFO", "TRACE"):
        return []
    why = "unset" if not level else f"{level}"
    return [env_finding("nccl-debug-off", "warning" if not level or level == "VERSION" else "info", "NCCL_DEBUG",
                        f"NCCL_DEBUG is {why}: the next crash will not say which rank, GPU or network path failed "
                        "(init lines map ranks to hosts and GPUs; NET lines show IB vs socket).",
                        "export NCCL_DEBUG=INFO")]


def _candidates(node: NodeFacts) -> list[str]:
    return [i.name for i in node.interfaces if i.up and not _VIRTUAL.match(i.name)]


def _suggest_ifname(nodes: list[NodeFacts]) -> str | None:
    """An interface name (or shared prefix) up on every node: ib* first, as NCCL prefers."""
    common = set(_candidates(nodes[0])) if nodes else set()
    for node in nodes[1:]:
        common &= set(_candidates(node))
    if not common:
        return None
    return sorted(common, key=lambda n: (not n.startswith("ib"), n))[0]


def _socket_ifname(env: Mapping[str, str], nodes: list[NodeFacts]) -> list[Finding]:
    value = env.get("NCCL_SOCKET_IFNAME")
    if not value or not nodes:
        return []
    spec = _spec(value)
    suggestion = _suggest_ifname(nodes)
    fix = f"export NCCL_SOCKET_IFNAME={suggestion}" if suggestion else None
    out = []
    missing = {}
    for node in nodes:
        chosen = [i for i in node.interfaces if _matches(spec, i.name) and not (spec.exclude and i.is_loopback)]
        if not any(i.up for i in chosen):
            down = [i.name for i in chosen]
            missing[node.host] = (f"{', '.join(down)} down" if down else "no such interface") + \
                f" (up: {', '.join(_candidates(node)) or 'none'})"
    if missing:
        where = "; ".join(f"{h}: {why}" for h, why in sorted(missing.items()))
        out.append(env_finding("nccl-socket-ifname-no-match", "error", "NCCL_SOCKET_IFNAME",
                               f"NCCL_SOCKET_IFNAME={value} matches no interface that is up on {len(missing)} of "
                               f"{len(nodes)} node(s) ({where}); NCCL fails at init with 'unhandled system error' / "
                               "'no socket interface found' on those nodes.", fix, sorted(missing)))
    elif len(nodes) > 1 and not spec.exclude and all(n.startswith("lo") for n in spec.names):
        out.append(env_finding("nccl-socket-ifname-loopback", "error", "NCCL_SOCKET_IFNAME",
                               f"NCCL_SOCKET_IFNAME={value} on a {len(nodes)}-node job: ranks on other nodes cannot "
                               "reach a loopback address (connection refused / no route to host at init).", fix,
                               [n.host for n in nodes]))
    return out


def _ib_hca(env: Mapping[str, str], nodes: list[NodeFacts]) -> list[Finding]:
    value = env.get("NCCL_IB_HCA")
    if not value or not nodes or _spec(value).exclude:
        return []
    spec = _spec(value)
    bad: dict[str, str] = {}
    for node in nodes:
        for entry in spec.names:
            ca, _, port = entry.partition(":")
            ports = [p for p in node.ib_ports if (p.ca == ca if spec.exact else p.ca.startswith(ca))
                     and (not port or str(p.port) == port)]
            if not any(p.up for p in ports):
                states = ", ".join(f"{p.ca}:{p.port} {p.state}/{p.physical_state}" for p in ports) or "not present"
                bad.setdefault(node.host, f"{entry}: {states}")
    if not bad:
        return []
    common = None
    for node in nodes:
        names = {f"{p.ca}:{p.port}" for p in node.active_ib()}
        common = names if common is None else common & names
    fix = f"export NCCL_IB_HCA=={','.join(sorted(common))}" if common else None
    where = "; ".join(f"{h}: {why}" for h, why in sorted(bad.items()))
    return [env_finding("nccl-ib-hca-not-active", "error", "NCCL_IB_HCA",
                        f"NCCL_IB_HCA={value} names HCA ports that are not Active on {len(bad)} node(s) ({where}).",
                        fix, sorted(bad))]


def _ib_switched_off(env: Mapping[str, str], nodes: list[NodeFacts], nccl_log: str | None) -> list[Finding]:
    with_ib = [n.host for n in nodes if n.active_ib()]
    if not with_ib:
        return []
    if env.get("NCCL_IB_DISABLE") == "1":
        return [env_finding("nccl-ib-disabled", "warning", "NCCL_IB_DISABLE",
                            f"NCCL_IB_DISABLE=1 while {len(with_ib)} node(s) have Active InfiniBand ports: all traffic "
                            "goes over TCP sockets, many times slower, and collectives time out under load.",
                            "export NCCL_IB_DISABLE=0", with_ib)]
    if env.get("NCCL_NET", "").lower() == "socket":
        return [env_finding("nccl-net-socket", "warning", "NCCL_NET",
                            f"NCCL_NET={env['NCCL_NET']} forces TCP sockets while {len(with_ib)} node(s) have Active "
                            "InfiniBand ports.", "unset NCCL_NET", with_ib)]
    if nccl_log and _NET_SOCKET.search(nccl_log) and not _NET_IB.search(nccl_log):
        return [env_finding("nccl-fell-back-to-socket", "warning", "NCCL_IB_DISABLE",
                            "The NCCL log shows NET/Socket although the nodes have Active InfiniBand ports: NCCL found "
                            "no usable IB device (libibverbs/rdma-core missing in the container, /dev/infiniband not "
                            "mounted, or NCCL_IB_HCA excluding every port). Fix that, and state the intent:",
                            "export NCCL_IB_DISABLE=0", with_ib)]
    return []


def _ib_timeout(env: Mapping[str, str], nodes: list[NodeFacts]) -> list[Finding]:
    raw = env.get("NCCL_IB_TIMEOUT")
    fix = f"export NCCL_IB_TIMEOUT={IB_TIMEOUT_LARGE}"
    if raw is None:
        if len(nodes) >= LARGE_JOB_NODES and any(n.active_ib() for n in nodes):
            return [env_finding("nccl-ib-timeout-scale", "info", "NCCL_IB_TIMEOUT",
                                f"{len(nodes)} nodes on InfiniBand with NCCL's default NCCL_IB_TIMEOUT "
                                f"({IB_TIMEOUT_DEFAULT}, about 4.3 s per retry): the runbook raises it for large jobs.",
                                fix)]
        return []
    if not raw.strip().isdigit() or not 1 <= int(raw) <= 31:
        return [env_finding("nccl-ib-timeout-invalid", "error", "NCCL_IB_TIMEOUT",
                            f"NCCL_IB_TIMEOUT={raw!r} is not an integer 1..31 (the timeout is 4.096 us x 2^value).", fix)]
    value = int(raw)
    if value < IB_TIMEOUT_DEFAULT:
        seconds = 4.096e-6 * 2 ** value
        return [env_finding("nccl-ib-timeout-low", "warning", "NCCL_IB_TIMEOUT",
                            f"NCCL_IB_TIMEOUT={value} ({seconds:.2g} s per retry) is below NCCL's default "
                            f"{IB_TIMEOUT_DEFAULT}: on a busy fabric the IB retries give up and the job dies with "
                            "'NET/IB : Got completion with error 12'.", fix)]
    return []


def _torch_watchdog(env: Mapping[str, str]) -> list[Finding]:
    out = []
    for name in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"):
        if env.get(name) == "0":
            out.append(env_finding("torch-nccl-async-error-handling-off", "warning", name,
                                   f"{name}=0: a failed or timed-out collective is not aborted, so the job hangs until "
                                   "the scheduler's time limit instead of failing fast (and being restartable).",
                                   "export TORCH_NCCL_ASYNC_ERROR_HANDLING=3"))
    if env.get("TORCH_NCCL_ENABLE_MONITORING") == "0":
        out.append(env_finding("torch-nccl-monitoring-off", "warning", "TORCH_NCCL_ENABLE_MONITORING",
                               "TORCH_NCCL_ENABLE_MONITORING=0: nothing kills a process whose NCCL watchdog is itself "
                               "stuck; a hang stays a hang.", "unset TORCH_NCCL_ENABLE_MONITORING"))
    if env.get("TORCH_NCCL_TRACE_BUFFER_SIZE", "0") in ("", "0"):
        out.append(env_finding("torch-nccl-flight-recorder-off", "info", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                               "The NCCL flight recorder is off: after the next timeout there is no record of which "
                               "collective each rank was in. Turn it on, with a dump on timeout:",
                               "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1"))
    return out


def node_facts(folder: str | Path, host: str | None = None) -> NodeFacts:
    """The facts of one node from its evidence bundle (``network/ip-link.txt``,
    ``infiniband/ibstat.txt``); a missing file leaves that list empty. ``host`` defaults to the
    folder's name (bundles are named after their host by the fan-out rule)."""
    root = Path(folder)
    link_text, _ = read_text(root / "network" / "ip-link.txt")
    ib_text, _ = read_text(root / "infiniband" / "ibstat.txt")
    return NodeFacts(host or root.name, ip_link.parse(link_text).records if link_text else [],
                     infiniband.parse(ib_text).records if ib_text else [])


def bundle_nodes(path: str | Path) -> list[NodeFacts]:
    """Facts of every evidence bundle at ``path`` (the bundle itself, or its sub-folders)."""
    root = Path(path)
    folders = [root] if (root / "manifest.json").is_file() else sorted(
        p for p in (root.iterdir() if root.is_dir() else []) if (p / "manifest.json").is_file())
    return [node_facts(folder) for folder in folders]


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*?)\s*$")


def read_env(text: str) -> dict[str, str]:
    """A job's environment from ``env`` output or ``export KEY=VALUE`` lines (quotes removed);
    other lines (comments, commands) are skipped."""
    out = {}
    for line in text.splitlines():
        m = _ENV_LINE.match(line)
        if m:
            value = m["value"]
            out[m["key"]] = value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value
    return out
