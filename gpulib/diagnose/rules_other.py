"""Rules over the remaining evidence kinds: slurm ``sinfo -R``, ``dcgmi diag``, flight-recorder
dumps, ``ibstat`` port states and ``fuser`` (who still holds /dev/nvidiaN)."""

from __future__ import annotations

from collections import defaultdict

from gpulib.diagnose.context import Context, evidence, place
from gpulib.diagnose.model import Pointers

_DIAG_CATEGORY = (("memory", "gpu_memory_error"), ("pcie", "gpu_fell_off_bus"), ("nvlink", "nvlink_error"),
                  ("thermal", "thermal_throttling"), ("power", "power_fault"), ("inforom", "gpu_firmware_error"))


def run(ctx: Context) -> None:
    _sinfo(ctx)
    _dcgmi(ctx)
    _flight_recorder(ctx)
    _ibstat(ctx)
    _fuser(ctx)


def _sinfo(ctx: Context) -> None:
    for file, rec in ctx.records("slurm_sinfo"):
        reason = rec.reason.lower()
        if "not responding" in reason or "no_respond" in reason or "unexpectedly rebooted" in reason:
            for node in rec.nodes:
                ctx.add("node-lost", severity="critical", category="node_lost", interruption="hard", hardware=True,
                        title=f"Slurm: {node} {rec.reason}", host=node, time=rec.time_utc,
                        evidence=[evidence(file, rec.line, f"{rec.reason} ({rec.user}) {node}")],
                        actions=["Check power/BMC of the node (`ipmitool sel list`) and its console log"])
        else:
            ctx.add("slurm-drain", severity="warning", category="application_error", role="symptom",
                    title=f"Slurm drained {', '.join(rec.nodes)}: {rec.reason}", time=rec.time_utc,
                    host=rec.nodes[0] if len(rec.nodes) == 1 else None,
                    evidence=[evidence(file, rec.line, f"{rec.reason} ({rec.user}) {','.join(rec.nodes)}")],
                    pointers=Pointers(hosts=set(rec.nodes)) if "kill task failed" in reason else Pointers(),
                    actions=["'Kill task failed' = a process stuck in the GPU driver: reboot the node before "
                             "resuming it (`scontrol update nodename=... state=resume`)"])


def _dcgmi(ctx: Context) -> None:
    for file, rec in ctx.records("dcgmi_diag"):
        if rec.verdict != "fail":
            continue
        category = next((c for k, c in _DIAG_CATEGORY if k in rec.test.lower()), "gpu_memory_error")
        for gpu in rec.gpus or [None]:
            f = ctx.add("dcgm-diag", severity="critical", category=category, interruption="hard", hardware=True,
                        title=f"dcgmi diag: {rec.test} FAILED" + (f" on GPU {gpu}" if gpu is not None else "")
                              + (f" on {file.host}" if file.host else ""),
                        host=file.host, gpu_index=gpu, evidence=[evidence(file, rec.line, f"{rec.test}: Fail "
                                                                                          f"{rec.message}")],
                        actions=["Drain the node; attach the dcgmi diag output to the RMA request"])
            if gpu is not None:
                f.gpu_pci = ctx.ids.index_pci.get((file.host, gpu))
                place(ctx, f, host=file.host, pci=f.gpu_pci)


def _flight_recorder(ctx: Context) -> None:
    dumps = [(file, rec) for file, rec in ctx.records("flight_recorder") if rec.rank is not None]
    if len(dumps) < 2:
        return
    completed: dict[str, dict[int, int]] = defaultdict(dict)
    for _file, rec in dumps:
        for pg, status in rec.pg_status.items():
            if status.get("last_completed_collective") is not None:
                completed[pg][rec.rank] = status["last_completed_collective"]
    ranks_with_dump = {rec.rank for _, rec in dumps}
    world = ctx.ids.world_size or max(ranks_with_dump) + 1
    missing = set(range(world)) - ranks_with_dump
    for pg, per_rank in completed.items():
        if len(set(per_rank.values())) < 2 and not missing:
            continue
        low = min(per_rank.values())
        behind = {r for r, c in per_rank.items() if c == low and low < max(per_rank.values())}
        file = dumps[0][0]
        ctx.add("flight-recorder", severity="error", category="application_error", role="symptom",
                title=f"Flight recorder (PG {pg}): rank(s) {sorted(behind | missing)} behind - last completed "
                      f"collective {low} vs {max(per_rank.values())}"
                      + (f"; no dump from rank(s) {sorted(missing)}" if missing else ""),
                evidence=[evidence(file, None, f"last completed per rank: {dict(sorted(per_rank.items()))}")],
                pointers=Pointers(ranks=behind | missing))


def _ibstat(ctx: Context) -> None:
    for file, rec in ctx.records("ibstat", "ibstatus"):
        state = str(getattr(rec, "state", "") or "").lower()
        link = str(getattr(rec, "link_layer", "") or "InfiniBand")
        if "down" not in state and "init" not in state and "polling" not in str(getattr(rec, "physical_state", "")).lower():
            continue
        if link.lower() != "infiniband":
            continue
        ca = getattr(rec, "ca", None) or getattr(rec, "device", None) or "HCA"
        port = getattr(rec, "port", None)
        ctx.add("ib-port", severity="critical", category="network_fabric", interruption="soft", hardware=True,
                title=f"{file.host or 'host'}: {ca} port {port} is {getattr(rec, 'state', '?')} "
                      f"({getattr(rec, 'physical_state', '?')})", host=file.host,
                evidence=[evidence(file, getattr(rec, "line", None), f"{ca} port {port}: State "
                                                                    f"{getattr(rec, 'state', '?')}, Physical state "
                                                                    f"{getattr(rec, 'physical_state', '?')}")],
                actions=["Reseat/replace the cable or transceiver; the port must be Active/LinkUp before relaunch"])


def _fuser(ctx: Context) -> None:
    for file, rec in ctx.records("fuser"):
        pid = getattr(rec, "pid", None)
        device = str(getattr(rec, "device", "") or getattr(rec, "path", ""))
        if pid is None or not device.rstrip("0123456789").endswith("nvidia"):
            continue
        f = ctx.add("gpu-held", severity="warning", category="application_error", role="context",
                    title=f"pid {pid} ({getattr(rec, 'command', '?')}) still holds {device} on {file.host}",
                    host=file.host, evidence=[evidence(file, getattr(rec, "line", None), f"{device}: {pid}")],
                    actions=[f"Kill pid {pid} before relaunch; if it is in D state (stuck in the driver), reboot"])
        place(ctx, f, host=file.host, pid=pid)
