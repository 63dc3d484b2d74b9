"""GPU-state rules over nvidia-smi snapshots and telemetry time series.

* lost GPUs ("GPU is lost", ERR!) and GPUs missing from a host's count;
* ECC: volatile DBE, uncorrectable remapped rows, remap/retirement pending or failed;
* throttling: HW slowdown, SW/HW thermal, power brake (the *reasons*, not just the clock), from a
  snapshot or - better - from the first throttled sample of a time series, which is when a rank
  started to become a straggler;
* SM clock far below max under load, temperature at the slowdown threshold, PCIe width/gen
  below the link's maximum;
* per-GPU memory imbalance (one GPU > 2 GiB above the others), a GPU idle while its peers are
  busy (its rank died or hangs), processes still holding GPUs after the job died.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median

from gpulib.diagnose.context import Context, place, quote, without_unknowns
from gpulib.evidence import kinds
from gpulib.findings import Pointers
from gpulib.parsers import gpu_series, prom_text
from gpulib.parsers.gpu_records import SLOWDOWN_REASONS, GpuSample
from gpulib.parsers.gpu_series import GpuSeries

LOW_CLOCK_RATIO = 0.6
LOW_PEER_CLOCK = 0.8  # below this share of the peers' median SM clock at the same moment
HOT_C = 80
HOTTER_THAN_PEERS_C = 8
POWER = {"hw_power_brake_slowdown"}
#: Kinds whose records are :class:`~gpulib.parsers.gpu_records.GpuState` snapshots.
SNAPSHOT_KINDS = kinds.GPU_SNAPSHOTS


def _throttle_category(reasons: list[str]) -> str:
    return "power_fault" if set(reasons) & POWER and not set(reasons) & {"sw_thermal_slowdown",
                                                                        "hw_thermal_slowdown"} else "thermal_throttling"


def _throttle_interruption(reasons: list[str]) -> str:
    """Hard or soft from the reason *class*, not from the clock. HW power brake (``0x80``) is asserted
    by a signal from outside the GPU - the system's power supply, a loose or missing PCIe power cable,
    the board's power sensing - so the machine needs a hand on it before the job can run (DCGM's
    power watch and the node-health checkers treat it as a fault). Heat (SW/HW thermal) is the
    GPU protecting itself: the job straggles, the hardware is not broken, so it stays soft; a SW
    power cap is an administrator's limit and is no slowdown reason at all
    (:data:`~gpulib.nvml_fields.SLOWDOWN_REASONS`)."""
    return "hard" if _throttle_category(reasons) == "power_fault" else "soft"


def _describe(state) -> str:
    return f"GPU {state.index if state.index is not None else '?'} ({state.pci_bus_id or 'unknown PCI'})"


def _line(file, state, what: str):
    return quote(file, state.line, f"{_describe(state)}: {what}")


def run(ctx: Context) -> None:
    snapshots: dict[tuple[str | None, str], list] = defaultdict(list)
    quiet: dict[tuple[str | None, str], tuple] = {}  # snapshots a digest summarised: their listing only
    for file in ctx.inputs.of_kind(*kinds.GPU_SNAPSHOT_ROWS):
        if file.summary_only:
            for listing in file.summary.listings:
                quiet[(listing.host or file.host, file.display)] = (file, listing)
                snapshots[(listing.host or file.host, file.display)] = []
            continue
        for rec in file.records:
            if hasattr(rec, "lost") and hasattr(rec, "processes"):
                snapshots[(rec.host or file.host, file.display)].append((file, rec))
    for (host, display), states in snapshots.items():
        if (host, display) in quiet:
            file, listing = quiet[(host, display)]
            _missing_job_gpus(ctx, host, ctx.utc(listing.captured_at, file), file, set(listing.listed), listing.present)
        else:
            _snapshot(ctx, host, states)
    _series(ctx)


def _snapshot(ctx: Context, host: str | None, states: list) -> None:
    captured = next((ctx.utc(s.captured_at, f) for f, s in states if s.captured_at), None)
    present = [s for _, s in states if not s.lost]
    for file, s in states:
        if s.lost:
            f = ctx.add("gpu-lost", severity="critical", category="gpu_fell_off_bus", interruption="hard",
                        hardware=True, title="", host=host, time=captured, observed=True,
                        actions=["Reboot or power-cycle the node; drain it until the GPU is back and passes "
                                 "`dcgmi diag -r 2`"])
            place(ctx, f, host=host, pci=s.pci_bus_id)
            what = f"GPU {f.gpu_index if f.gpu_index is not None else '?'} ({s.pci_bus_id})"
            f.title = f"{what} on {host} is lost to the driver"
            f.quotes.append(quote(file, s.line, f"{what}: {s.lost_reason or 'GPU is lost'}"))
            continue
        _ecc(ctx, host, captured, file, s)
        _hot(ctx, host, file, s, s.temp_c, captured, s.throttle_reasons, s.line)
        _power_unreadable(ctx, host, captured, file, s)
        _throttle_snapshot(ctx, host, captured, file, s)
        _pcie(ctx, host, captured, file, s)
    _missing_job_gpus(ctx, host, captured, states[0][0], {s.pci_bus_id for _, s in states if s.pci_bus_id},
                      any(not s.lost for _, s in states))
    indexes = sorted(s.index for s in present if s.index is not None)
    if indexes and indexes != list(range(len(indexes))) and indexes[-1] + 1 > len(indexes):
        missing = sorted(set(range(indexes[-1] + 1)) - set(indexes))
        file = states[0][0]
        ctx.add("gpu-missing", severity="critical", category="gpu_fell_off_bus", role="context", hardware=True,
                title=f"GPU index(es) {missing} missing from the count on {host}", host=host, time=captured, observed=True,
                quotes=[quote(file, None, f"indexes present: {indexes}")],
                actions=["Check `lspci | grep -i nvidia` and dmesg for Xid 79 / AER on the missing GPU"])
    _memory(ctx, host, captured, present, states)


def _hot(ctx: Context, host, file, rec, temp_c, when, reasons, line=None) -> None:
    """A GPU at or above ``temp_limit_c`` that no slowdown reason slows yet: the next degree costs
    it clock speed, and its rank becomes the straggler the other ranks time out on. Worth a look at
    the airflow before it happens (context, not a cause: nothing was slowed)."""
    limit = ctx.thresholds.temp_limit_c
    if not hot_unthrottled(temp_c, reasons, limit):
        return
    f = ctx.add("hot", severity="warning", category="thermal_throttling", role="context", hardware=True, title="",
                host=host, time=ctx.utc(when, file) if when else None, observed=True,
                quotes=[quote(file, line, f"GPU {rec.index}: {temp_c:.0f} C, no slowdown reason yet")],
                actions=["Check this GPU's airflow and fans (and its neighbours'): it is at its slowdown "
                         "temperature"])
    place(ctx, f, host=host, pci=rec.pci_bus_id or ctx.ids.pci_at(host, rec.index))
    if f.gpu_index is None:
        f.gpu_index = rec.index
    f.title = without_unknowns(f"GPU {f.gpu_index} ({f.gpu_pci}) on {host} reached {temp_c:.0f} C (limit "
                               f"{limit:g} C) without throttling yet")


def hot_unthrottled(temp_c: float | None, reasons, limit_c: float) -> bool:
    """At or above ``limit_c`` with no slowdown reason active (what :func:`_hot` reports)."""
    return temp_c is not None and temp_c >= limit_c and not set(reasons or ()) & SLOWDOWN_REASONS


def quiet_series(series: GpuSeries, limit_c: float) -> bool:
    """A GPU time series no rule here reports, whatever other files say about the same GPU: never
    throttled and never hot without a reason (the per-node digest leaves such records behind)."""
    return series.first_throttled is None and not hot_unthrottled(series.temp_c.max, series.reasons, limit_c)


def _power_unreadable(ctx: Context, host, captured, file, s) -> None:
    """``ERR!`` in a GPU's power draw while the driver still reads its temperature: the board's
    power telemetry (and with it often the fan controller) stopped answering. On a GPU that is
    otherwise alive this points at its power delivery - the PCIe power cables, the PSU rail feeding
    it - and such a GPU stalls its job without an error (the process hangs, Ctrl+C does nothing).
    A GPU whose every reading is ERR! is lost, which the lost-GPU rule says instead."""
    if "power_draw_w" not in s.unreadable:
        return
    what = " and ".join(n.removesuffix("_pct").removesuffix("_w").removesuffix("_c").replace("_", " ")
                     for n in s.unreadable)
    f = ctx.add("power-unreadable", severity="critical", category="power_fault", interruption="hard",
                hardware=True, title="", host=host, time=captured, observed=True,
                quotes=[quote(file, s.line, f"GPU {s.index}: ERR! in {what}")],
                actions=["Reseat the GPU's PCIe power cables and check the PSU feeding it (`ipmitool sdr`, "
                         "`ipmitool sel elist`); swap the card into another slot/PSU to tell board from supply",
                         "Drain the node until `nvidia-smi` reads the power draw again and `dcgmi diag -r 2` passes"])
    place(ctx, f, host=host, pci=s.pci_bus_id)
    f.title = without_unknowns(f"GPU {f.gpu_index} ({s.pci_bus_id}) on {host} reports ERR! for its {what}: its "
                               "power delivery is failing")


def _missing_job_gpus(ctx: Context, host, captured, file, listed: set[str], present: bool) -> None:
    """A GPU the job used on this host (NCCL busId) that the snapshot of ``file`` no longer lists at
    all (``listed``: the PCI ids it lists; ``present``: some GPU was readable): nvidia-smi renumbers
    the survivors, so only the PCI id says which one is gone."""
    used = {i.pci: i.rank for i in ctx.ids.ranks_on(host) if i.pci}
    if not used or not present:
        return  # no job GPUs here, or not a listing at all (only a "GPU is lost" message)
    for pci in sorted(set(used) - listed):
        f = ctx.add("gpu-missing", severity="critical", category="gpu_fell_off_bus", interruption="hard",
                    hardware=True, title=f"GPU {pci} of rank {used[pci]} on {host} is missing from nvidia-smi",
                    host=host, gpu_pci=pci, time=captured, observed=True,
                    quotes=[quote(file, None, f"{len(listed)} GPUs listed; the job's GPU {pci} is not among them")],
                    actions=["Check `lspci -d 10de:` and dmesg for Xid 79 / AER on that GPU; reboot or power-cycle"])
        place(ctx, f, host=host, pci=pci)


def _where_on(what: str, host: str | None) -> str:
    return f"{what} on {host}" if host else what


def _ecc(ctx: Context, host, captured, file, s) -> None:
    bad = []
    if s.ecc_volatile_dbe:
        bad.append(f"volatile DBE {s.ecc_volatile_dbe}")
    if s.remapped_rows_uncorrectable:
        bad.append(f"uncorrectable remapped rows {s.remapped_rows_uncorrectable}")
    if s.remapped_rows_pending:
        bad.append("row remap pending (reset required)")
    if s.remapped_rows_failure:
        bad.append("row remap FAILED")
    if s.retired_pages_pending:
        bad.append("page retirement pending")
    if not bad:
        return
    failed = bool(s.remapped_rows_failure)
    # a remap pending for a *correctable* error only: the data was corrected, the job is not hurt; the
    # remap waits for the next reset (NVIDIA: no impact on the application until then)
    benign = bad == ["row remap pending (reset required)"] and not s.remapped_rows_uncorrectable
    if _remapped_history(bad):
        _ecc_history(ctx, host, captured, file, s, bad)
        return
    f = ctx.add("ecc", severity="warning" if benign else "critical", category="gpu_memory_error",
                interruption=None if benign else "hard", role="context" if benign else "cause", hardware=True,
                title=_where_on(f"{_describe(s)}", host) + f": {', '.join(bad)}"
                + (" for a correctable error; no impact until the next reset" if benign else ""),
                host=host, time=captured, observed=True, quotes=[_line(file, s, ", ".join(bad))],
                actions=["RMA the GPU: row remapping failed" if failed else
                         "Reset the GPU (`nvidia-smi -r -i <index>` with no process on it) or reboot, so the "
                         "pending row remap takes effect; then confirm `Pending: No`"])
    place(ctx, f, host=host, pci=s.pci_bus_id)


def _remapped_history(bad: list[str]) -> bool:
    """Only "uncorrectable remapped rows N": rows that failed in the past and were already remapped.

    The remapped-row counts are the InfoROM's record over the GPU's life, not this boot. With no
    remap pending, none failed and no uncorrectable error since the last reset (volatile DBE 0),
    the GPU repaired itself: the spare rows are in use and the bad ones no longer reachable.
    NVIDIA's RMA policy keys on a remapping *failure*, and health checkers (gpud, DCGM) report
    such a GPU healthy. It is history to watch (a count that keeps growing is a failing HBM),
    not the cause of an interruption."""
    return len(bad) == 1 and bad[0].startswith("uncorrectable remapped rows")


def _ecc_history(ctx: Context, host, captured, file, s, bad: list[str]) -> None:
    f = ctx.add("ecc-history", severity="info", category="gpu_memory_error", role="context", hardware=True,
                title=_where_on(f"{_describe(s)}", host) + f": {bad[0]}, already remapped (nothing pending, no "
                      "failure): the GPU repaired itself",
                host=host, time=captured, observed=True, quotes=[_line(file, s, bad[0])],
                actions=["Nothing to do now; compare the count in the next snapshots - rows remapped again and "
                         "again on one GPU mean failing HBM (drain it and run `dcgmi diag -r 3`)"])
    place(ctx, f, host=host, pci=s.pci_bus_id)


def _throttle_snapshot(ctx: Context, host, captured, file, s) -> None:
    slowed = s.slowed_by
    hot = s.temp_c is not None and s.temp_slowdown_c is not None and s.temp_c >= s.temp_slowdown_c - 2
    low_clock = (s.util_gpu_pct or 0) >= 80 and s.sm_clock_mhz and s.sm_clock_max_mhz and \
        s.sm_clock_mhz < LOW_CLOCK_RATIO * s.sm_clock_max_mhz
    if not (slowed or hot or low_clock):
        return
    parts = []
    if slowed:
        parts.append("active: " + ", ".join(slowed))
    if s.temp_c is not None:
        parts.append(f"{s.temp_c:.0f} C" + (f" (slowdown at {s.temp_slowdown_c:.0f} C)" if s.temp_slowdown_c else ""))
    if s.sm_clock_mhz and s.sm_clock_max_mhz:
        parts.append(f"SM {s.sm_clock_mhz:.0f}/{s.sm_clock_max_mhz:.0f} MHz")
    f = ctx.add("throttle", severity="error" if slowed else "warning", category=_throttle_category(slowed),
                interruption=_throttle_interruption(slowed) if slowed else None,
                role="cause" if slowed else "context", hardware=True,
                title=f"{_describe(s)} on {host} throttled: {'; '.join(parts)}", host=host, time=captured, observed=True,
                quotes=[_line(file, s, "; ".join(parts))], actions=_throttle_actions(slowed))
    place(ctx, f, host=host, pci=s.pci_bus_id)


def _throttle_actions(reasons) -> list[str]:
    if set(reasons) & POWER:
        return ["Power brake (asserted from outside the GPU): drain the node, reseat this GPU's PCIe/12V power "
                "cables, then check the PSUs and the BMC SEL (`ipmitool sel list`) before it runs jobs again"]
    return ["Check the GPU's airflow/fans and inlet temperature (`ipmitool sdr type Temperature`); drain the node "
            "if one GPU runs much hotter than its neighbours",
            "Relaunch without this node, or exclude it, so one slow rank does not stall every collective"]


def _pcie(ctx: Context, host, captured, file, s) -> None:
    narrow = s.pcie_width_current and s.pcie_width_max and s.pcie_width_current < s.pcie_width_max
    slow = s.pcie_gen_current and s.pcie_gen_max and s.pcie_gen_current < s.pcie_gen_max and (s.util_gpu_pct or 0) >= 50
    if narrow or slow:
        what = f"PCIe gen {s.pcie_gen_current}/{s.pcie_gen_max} width x{s.pcie_width_current}/x{s.pcie_width_max}"
        f = ctx.add("pcie-degraded", severity="warning", category="gpu_fell_off_bus", role="context", hardware=True,
                    title=f"{_describe(s)} on {host}: {what}", host=host, time=captured, observed=True,
                    quotes=[_line(file, s, what)],
                    actions=["Reseat the GPU/riser; a degraded link often precedes a fall off the bus"])
        place(ctx, f, host=host, pci=s.pci_bus_id)


def _memory(ctx: Context, host, captured, present, states) -> None:
    """A GPU using ``imbalance_gib`` more than every peer (data-parallel ranks hold the same model:
    an outlier holds more activations, leaks, or shares its GPU with a stray process), and an
    empty, idle GPU among busy peers (its rank is gone)."""
    used = [(s, s.mem_used_mib) for s in present if s.mem_used_mib is not None]
    if len(used) < 2:
        return
    gap_mib = ctx.thresholds.imbalance_gib * 1024
    file = states[0][0]
    for s, mib in used:
        others = [m for o, m in used if o is not s]
        mid = median(others)
        busy_peers = median([o.util_gpu_pct or 0 for o, _ in used if o is not s])
        if mib > mid + gap_mib and all(m < mib - gap_mib for m in others):
            f = ctx.add("mem-imbalance", severity="warning", category="cuda_oom", role="context",
                        title=f"{_describe(s)} on {host} uses {mib:.0f} MiB, more than {ctx.thresholds.imbalance_gib:g} GiB "
                              f"above the others "
                              f"(median {mid:.0f} MiB)", host=host, time=captured, observed=True,
                        quotes=[_line(file, s, f"{mib:.0f} MiB used")],
                        actions=["Uneven sharding or a stray process on that GPU; check its process list"])
            place(ctx, f, host=host, pci=s.pci_bus_id)
        elif len(used) >= 3 and mib < mid - gap_mib and busy_peers >= 50 and (s.util_gpu_pct or 0) < 10:
            f = ctx.add("gpu-idle", severity="warning", category="application_error", role="symptom",
                        title=f"{_describe(s)} on {host} is idle and empty ({mib:.0f} MiB) while its peers are busy: "
                              "its rank is gone", host=host, time=captured, observed=True,
                        quotes=[_line(file, s, f"{mib:.0f} MiB used, {s.util_gpu_pct or 0:.0f} % util")])
            place(ctx, f, host=host, pci=s.pci_bus_id)
            f.pointers = Pointers(gpus={(host, f.gpu_pci)} if f.gpu_pci else set(),
                                  ranks={f.rank} if f.rank is not None else set())


def _series(ctx: Context) -> None:
    """The first throttled sample of each GPU's time series: when its rank began to straggle.
    Samples are folded per GPU and file (:func:`gpu_series.summarize`; :func:`~gpulib.evidence.gather.gather`
    has usually done so already), then the files of one GPU are combined."""
    raw: dict[int, tuple] = {}  # id(file) -> (file, [samples]) still to fold
    per_gpu: dict[tuple, list] = defaultdict(list)  # (host, GPU) -> [(file, GpuSeries)]
    blind: dict[tuple, list] = defaultdict(list)  # (host, GPU) -> [(file, sample)] without reason bits
    for file, rec in ctx.records(*kinds.GPU_SERIES) + prom_text.gpu_samples(
            ctx.records(kinds.DCGM_EXPORTER)):
        if isinstance(rec, GpuSeries):
            per_gpu[(rec.host or file.host, rec.pci_bus_id or rec.index)].append((file, rec))
        elif isinstance(rec, GpuSample):
            raw.setdefault(id(file), (file, []))[1].append(rec)
    for file, samples in raw.values():
        gpus: dict[tuple, list] = defaultdict(list)
        for s in samples:
            gpus[(s.host or file.host, s.pci_bus_id or s.index)].append(s)
        for key, mine in gpus.items():
            (series,) = gpu_series.summarize(mine)
            if series.reasons_reported:
                per_gpu[key].append((file, series))
            else:
                blind[key].extend((file, s) for s in mine)
    blind = {key: samples for key, samples in blind.items() if key not in per_gpu}
    if blind:
        _hot_and_slow(ctx, blind)
    for (host, _gpu), parts in per_gpu.items():
        throttled = [(f, s) for f, s in parts if s.first_throttled is not None]
        if not throttled:
            file, hottest = max(parts, key=lambda fs: fs[1].temp_c.max if fs[1].temp_c.max is not None else -1e9)
            _hot(ctx, host, file, hottest, hottest.temp_c.max, hottest.last_time_utc, hottest.reasons)  # seen by then
            continue
        file, first = min(((f, s.first_throttled) for f, s in throttled), key=lambda fs: fs[1].time_utc or "")
        worst = min(((f, s.slowest_throttled) for f, s in throttled), key=lambda fs: (fs[1].sm_clock_mhz or 1e9,
                                                                                        fs[1].time_utc or ""))
        reasons = sorted(set().union(*(s.reasons for _, s in throttled)))
        hottest = max((s.hottest_throttled_c for _, s in throttled if s.hottest_throttled_c is not None), default=None)
        lowest = worst[1].sm_clock_mhz
        cmax = first.sm_clock_max_mhz
        what = (f"{sum(s.throttled for _, s in throttled)} of {sum(s.samples for _, s in parts)} samples throttled "
                f"({', '.join(reasons)})"
                + (f", up to {hottest:.0f} C" if hottest is not None else "")
                + (f", SM clock down to {lowest:.0f}/{cmax:.0f} MHz" if lowest and cmax else ""))
        f = ctx.add("throttle", severity="error", category=_throttle_category(reasons),
                    interruption=_throttle_interruption(reasons),
                    hardware=True, title=f"GPU {first.index} ({first.pci_bus_id or first.uuid}) on {host}: {what}", host=host,
                    time=ctx.utc(first.time_utc, file),
                    quotes=[quote(file, first.line, f"first throttled sample: mask "
                                                         f"{first.throttle_bitmask:#x} "
                                                         f"({', '.join(first.slowed_by)}), {first.temp_c} C, "
                                                         f"SM {first.sm_clock_mhz} MHz")],
                    actions=_throttle_actions(reasons))
        f.quotes.append(quote(worst[0], worst[1].line, f"slowest sample: SM {worst[1].sm_clock_mhz} MHz, "
                                                            f"mask {worst[1].throttle_bitmask:#x}"))
        place(ctx, f, host=host, pci=first.pci_bus_id or ctx.ids.pci_at(host, first.index))
        if f.gpu_index is None:
            f.gpu_index = first.index


def _hot_and_slow(ctx: Context, per_gpu: dict[tuple, list]) -> None:
    """Telemetry without throttle-reason bits (``nvidia-smi dmon``): a GPU that runs much hotter and
    much slower than its peers at the same moment is thermally throttled, reasons or not."""
    by_moment: dict[tuple, list] = defaultdict(list)
    for (host, _gpu), samples in per_gpu.items():
        for file, sample in samples:
            if sample.time_utc and sample.sm_clock_mhz and sample.temp_c is not None:
                by_moment[(host, sample.time_utc)].append((file, sample))
    marked: dict[tuple, list] = defaultdict(list)
    for (host, _when), group in by_moment.items():
        if len(group) < 3:
            continue
        clock = median(s.sm_clock_mhz for _, s in group)
        temp = median(s.temp_c for _, s in group)
        for file, s in group:
            if s.sm_clock_mhz < LOW_PEER_CLOCK * clock and s.temp_c >= max(HOT_C, temp + HOTTER_THAN_PEERS_C):
                marked[(host, s.pci_bus_id or s.index)].append((file, s))
    for (host, _gpu), hits in marked.items():
        if len(hits) < 2:
            continue
        hits.sort(key=lambda fs: fs[1].time_utc)
        file, first = hits[0]
        f = ctx.add("throttle", severity="error", category="thermal_throttling", interruption="soft", hardware=True,
                    title=f"GPU {first.index} on {host} ran hot and slow against its peers in {len(hits)} samples "
                          f"(from {first.temp_c:.0f} C at SM {first.sm_clock_mhz:.0f} MHz; no reason bits in "
                          "this telemetry)", host=host, time=ctx.utc(first.time_utc, file),
                    quotes=[quote(file, first.line, f"GPU {first.index}: {first.temp_c} C, SM "
                                                         f"{first.sm_clock_mhz} MHz")],
                    actions=_throttle_actions(["hw_thermal_slowdown"]))
        place(ctx, f, host=host, pci=first.pci_bus_id or ctx.ids.pci_at(host, first.index))
        if f.gpu_index is None:
            f.gpu_index = first.index


def zombies(ctx: Context, after: str | None) -> None:
    """Processes still on a GPU in a snapshot taken after the job failed: a reboot may be needed."""
    if after is None:
        return
    for file, rec in ctx.records(*SNAPSHOT_KINDS):
        captured = ctx.utc(getattr(rec, "captured_at", None), file)
        if not captured or captured <= after or not getattr(rec, "processes", None):
            continue
        pids = ", ".join(str(p.pid) for p in rec.processes)
        f = ctx.add("zombie", severity="warning", category="application_error", role="context",
                    title=f"{_describe(rec)} on {rec.host or file.host} still held by pid {pids} after the job failed",
                    host=rec.host or file.host, time=captured, observed=True, quotes=[_line(file, rec, f"processes: {pids}")],
                    actions=[f"Kill the leftover processes (`kill -9 {pids}`) before relaunch; if they are in D "
                             "state, reboot the node"])
        f.extra["pids"] = [int(p.pid) for p in rec.processes if p.pid is not None]  # the remediation's kill list
        place(ctx, f, host=rec.host or file.host, pci=rec.pci_bus_id)

