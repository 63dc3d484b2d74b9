"""A process that cannot open a device index on a node that lists fewer GPUs than it should: a GPU is gone.

Why: ``CUDA_ERROR_INVALID_DEVICE`` / ``invalid device ordinal`` alone is a launch or code error - a
process asked for device 4 on a 4-GPU node. But when a GPU drops off the PCI bus and the node is
not rebooted, the driver renumbers the GPUs it still has (0-2 of what were 0-3), nothing logs an
Xid any more, and every job that asks for the last device fails at context creation. The only
sign is the count: ``nvidia-smi`` on that node lists fewer GPUs than the job was given
(``CUDA_VISIBLE_DEVICES=0,1,2,3``), than the scheduler's request (``#PBS -l ...:gpus=4``,
``#SBATCH --gres=gpu:4``, ``--gpus-per-node=4``) or than its sibling nodes list. Then the node is
the cause (hard: drain it, reboot, reseat or RMA the card) and the error is its symptom; with the
count complete the error stays the code's.
"""

from __future__ import annotations

import re

from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.parsers.base import read_text

#: The catalogue row of the error.
INVALID_DEVICE = "cuda-invalid-device"
#: How a job says how many GPUs it was given on its node: the visible-device list, the scheduler request.
_GIVEN = re.compile(r"\bCUDA_VISIBLE_DEVICES=(?P<list>\d+(?:,\d+)+)\b"
                    r"|(?:^#PBS\b.*?[:,]gpus=|^#SBATCH\s+(?:--gres=gpu(?::\w+)?[:=]|--gpus-per-node=(?:\w+:)?))"
                    r"(?P<n>\d+)\b", re.M)
#: The head of the failing job's log that is read for them (job scripts and launchers print them first).
HEAD_BYTES = 64 * 1024


def run(ctx: Context) -> None:
    errors = [(f, s) for f in ctx.inputs.files for s in f.signals if s.signature == INVALID_DEVICE]
    if not errors:
        return
    counts = _listed_counts(ctx)
    if not counts:
        return  # no node's GPU listing: nothing to count
    file, signal = min(errors, key=lambda fs: (fs[1].time_utc or "~", fs[0].display, fs[1].line))
    given = _given(file)
    job_host = signal.host or file.host
    for host, (listing, n) in sorted(counts.items(), key=lambda item: str(item[0])):
        if job_host and host != job_host:
            continue
        siblings = max((m for h, (_f, m) in counts.items() if h != host), default=0)
        expected = max(siblings, given[1] if given else 0)
        if n < expected:
            _add(ctx, host, n, expected, siblings, given, listing, file, signal)
            return


def _listed_counts(ctx: Context) -> dict:
    """Per host: the file of its fullest GPU listing (an nvidia-smi snapshot) and how many GPUs it lists."""
    counts: dict = {}
    for f in ctx.inputs.of_kind(*kinds.GPU_SNAPSHOT_ROWS):
        for listing in f.summary.listings if f.summary else ():
            host = listing.host or f.host
            n = len(set(listing.listed))
            if host and n and n > counts.get(host, (None, 0))[1]:
                counts[host] = (f, n)
    return counts


def _given(file) -> tuple[str, int] | None:
    """The line of the job's log that says how many GPUs it was given on its node, and the number."""
    if not file.path.is_file():
        return None
    text, _problems = read_text(file.path, cap_bytes=HEAD_BYTES)
    best = None
    for m in _GIVEN.finditer(text):
        n = len(m["list"].split(",")) if m["list"] else int(m["n"])
        if best is None or n > best[1]:
            best = (m[0].strip(), n)
    return best


def _add(ctx: Context, host: str, n: int, expected: int, siblings: int, given, listing, file, signal) -> None:
    basis = (f"the job was given {given[1]} ('{given[0]}')" if given and given[1] == expected else
             f"its sibling nodes list {siblings}")
    ctx.add("short-node", severity="critical", category="gpu_fell_off_bus", interruption="hard", hardware=True,
                title=f"{host} lists {n} GPU(s) where {basis}, and the job could not open a device there "
                      "(invalid device): a GPU is gone from the node (off the bus, not back since)",
                host=host, time=signal.time_utc,
                quotes=[quote(file, signal.line, signal.text),
                          quote(listing, None, f"nvidia-smi on {host}: {n} GPU(s) listed")],
                actions=["Drain the node; check `lspci | grep -i nvidia` and the kernel log for Xid 79 / AER on the "
                         "missing GPU, then power-cycle it; reseat or RMA the card if it does not come back",
                         "Resubmit the job away from this node"])
