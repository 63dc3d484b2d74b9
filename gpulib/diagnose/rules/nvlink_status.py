"""A GPU whose NVLinks are ``<inactive>`` while its peers' same links are up: an NVLink fault.

Why: ``nvidia-smi nvlink -s`` lists every link of every GPU with its speed. On an NVLink board
(SXM/HGX, or bridged pairs) the GPUs of one machine are wired alike, so they show the same number
of active links. A GPU with fewer active links than its peers has links that failed to train: a
damaged or unseated link, a bad NVSwitch port, a GPU that needs a reset. Nothing prints an error -
NCCL routes around the missing links and the job only runs slower (an all-reduce bus bandwidth a
fraction of a healthy node's), or hangs when a peer-to-peer path is needed - so this state is
itself the finding, and the node needs service before it runs jobs again.

Controls: every GPU with the same links inactive is how the board is wired (a bridge that uses
some links only), and a board without NVLink says so in words (``note``), never ``<inactive>``.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from gpulib.diagnose.context import Context, place, quote
from gpulib.parsers import nvsmi_nvlink
from gpulib.parsers.nvsmi_nvlink import NvlinkStatus


def run(ctx: Context) -> None:
    by_file: dict[str, list] = defaultdict(list)
    for file, rec in ctx.records(nvsmi_nvlink.KIND):
        if isinstance(rec, NvlinkStatus):
            by_file[file.display].append((file, rec))
    for listed in by_file.values():
        gpus = [(file, rec) for file, rec in listed if rec.links or rec.all_inactive]
        if len(gpus) < 2:
            continue  # one GPU alone: nothing to compare it with
        usual, count = Counter(rec.active_links for _f, rec in gpus).most_common(1)[0]
        if usual == 0 or count < 2:
            continue  # no GPU has links up, or no count that the peers share
        for file, rec in gpus:
            if rec.active_links < usual:
                _add(ctx, file, rec, usual)


def _add(ctx: Context, file, rec: NvlinkStatus, usual: int) -> None:
    down = sorted(n for n, speed in rec.links.items() if not speed)
    what = (f"links {', '.join(map(str, down))} inactive" if down else "all links inactive")
    title = (f"GPU {rec.gpu_index} has {rec.active_links} active NVLinks, its peers {usual} ({what}): "
             "links that failed to train - collectives run slower or hang on this node")
    quoted = [quote(file, rec.link_lines.get(n), f"Link {n}: <inactive>") for n in down[:3]]
    if not down:
        quoted = [quote(file, rec.line, rec.note or f"GPU {rec.gpu_index}: all links inactive")]
    f = ctx.add("nvlink-inactive", severity="critical", category="nvlink_error", interruption="hard", hardware=True,
                role="cause", title=title, host=file.host, gpu_index=rec.gpu_index, gpu_uuid=rec.uuid,
                quotes=[quote(file, rec.line, f"GPU {rec.gpu_index}: {rec.name} (UUID: {rec.uuid})"), *quoted],
                actions=["Drain the node; reset the GPU (`nvidia-smi -r -i N` with no processes on it) or reboot, "
                         "then check `nvidia-smi nvlink -s` shows every link up on every GPU",
                         "If the links stay inactive, run `dcgmi diag -r 3` and have the board (GPU, NVLink bridge or "
                         "NVSwitch tray) serviced"])
    place(ctx, f, host=file.host)
