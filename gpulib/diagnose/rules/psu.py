"""A power supply too small for its GPUs: ``dmidecode -t 39`` capacity against the GPUs' power limits.

Why: a GPU's draw spikes far above its power limit for milliseconds (load steps, a model being
loaded onto every GPU at once). A supply whose capacity the GPUs' limits alone nearly use up trips
on such a spike: the node goes dark with no panic, machine check, OOM or thermal line, its journal
stops mid-write and the next boot follows. Nothing in the kernel log says "power"; the sizing does.
So when the GPUs' limits take :data:`GPU_SHARE_OF_PSU` or more of what the supplies can deliver
(one supply held back when there are several: the usual N+1 redundancy), the supply is the first
suspect of an interruption that left no other trace, and the fix is a bigger supply or lower limits
(``nvidia-smi -pl``) before the next run.
"""

from __future__ import annotations

from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds

#: The GPUs' power limits may use at most this share of the supply's capacity: transients of 1.5-2x
#: the limit last milliseconds, and the CPU, memory and fans draw from the same supply.
GPU_SHARE_OF_PSU = 0.7
_SIGNATURE = "psu-capacity"
#: The files that carry the GPUs' power limits: a query CSV (``power.limit``), ``nvidia-smi -q``
#: (as text or XML: ``Current Power Limit``) and gpulib's NVML snapshot.
POWER_LIMIT_KINDS = (kinds.NVIDIA_SMI_CSV, kinds.NVIDIA_SMI_XML, kinds.NVIDIA_SMI_Q, kinds.NVML_SNAPSHOT)


def run(ctx: Context) -> None:
    supplies: dict[str | None, list] = {}
    for file in ctx.inputs.files:
        for s in file.signals:
            if s.signature == _SIGNATURE and s.fields.get("num"):
                supplies.setdefault(s.host or file.host, []).append((file, s, int(s.fields["num"])))
    if not supplies:
        return
    limits: dict[str | None, dict] = {}
    for file, rec in ctx.records(*POWER_LIMIT_KINDS):
        watts = getattr(rec, "power_limit_w", None)
        name = getattr(rec, "pci_bus_id", None) or getattr(rec, "index", None)
        if watts and name is not None:
            limits.setdefault(getattr(rec, "host", None) or file.host, {})[name] = (file, rec, watts)
    only = next(iter(supplies)) if len(supplies) == 1 else None
    for host, found in supplies.items():
        gpus = limits.get(host) or (limits.get(None) if host == only else None)
        if not gpus:
            continue
        ratings = sorted(w for _f, _s, w in found)
        usable_w = sum(ratings) - (ratings[-1] if len(ratings) > 1 else 0)
        gpu_w = sum(w for _f, _r, w in gpus.values())
        if usable_w <= 0 or gpu_w < GPU_SHARE_OF_PSU * usable_w:
            continue
        file, signal, _w = found[0]
        cites = [quote(file, signal.line, signal.text)] + [
            quote(f, getattr(r, "line", None), f"GPU {getattr(r, 'index', '?')}: power limit {w:g} W")
            for f, r, w in list(gpus.values())[:8]]
        ctx.judged |= {(f.display, s.line) for f, s, _w in found}
        ctx.add("psu-undersized", severity="error", category="power_fault", role="cause", hardware=True,
                title=f"The GPUs' power limits ({gpu_w:g} W) take {gpu_w / usable_w:.0%} of what the power "
                      f"supply delivers ({usable_w} W) on {host}: a GPU load spike can trip it",
                host=host, quotes=cites,
                actions=["Fit a larger power supply, or cap the GPUs (`nvidia-smi -pl <W>`) until the GPUs' "
                         f"limits stay under {GPU_SHARE_OF_PSU:.0%} of its capacity",
                         "If the node rebooted under the job with no panic/MCE/OOM line, treat it as a power trip"])
