"""A global rank at or above the world size: a wrong rank environment, the job hangs at init.

Ranks run 0..world-1. A process that prints rank >= world (a stale NODE_RANK, a --node_rank one
too high) waits for ranks that never come: application_error / soft, with the variables to check.
Hosts, PIDs and numbers are ours.
"""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose
from tests.diagnose.files import write_tree

LIGHTNING = """\
(vq) ml@ws-ampere2:~/vqgan$ python fit.py --gpus 0,1
GPU available: True, used: True
LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]
initializing ddp: GLOBAL_RANK: {r0}, MEMBER: {m0}/2
LOCAL_RANK: 1 - CUDA_VISIBLE_DEVICES: [0,1]
initializing ddp: GLOBAL_RANK: {r1}, MEMBER: {m1}/2
^C
Aborted!
"""
NCCL = ("[2026-06-03 08:11:0{n}] trn-k2:51{n}03:51{n}40 [{n}] NCCL INFO comm 0x55d1c3a0{n}e10 rank {r} nranks 8 "
        "cudaDev {n} nvmlDev {n} busId {n}1000 commId 0x7aa1d2e3f4a5b6c7 - Init START\n")
ENV = "[2026-06-03 08:10:58] launcher: MASTER_ADDR=trn-k1 MASTER_PORT=29511 RANK={r} WORLD_SIZE=8 LOCAL_RANK=1\n"


def _rank_finding(d):
    return next((f for f in d.findings if f.id.startswith("rank-outside-world")), None)


@pytest.mark.parametrize("text", [
    LIGHTNING.format(r0=2, m0=3, r1=3, m1=4),
    "".join(NCCL.format(n=n, r=n + 8) for n in range(2)),
    ENV.format(r=9) + "[2026-06-03 08:11:03] step 0 waiting for rendezvous\n",
])
def test_rank_at_or_above_the_world_size_is_a_launch_error(tmp_path, text):
    d = diagnose([write_tree(tmp_path, {"console.txt": text})])
    f = _rank_finding(d)
    assert f is not None and (d.interruption, d.category) == ("soft", "application_error")
    assert "NODE_RANK" in f.actions[0]


@pytest.mark.parametrize("text", [
    LIGHTNING.format(r0=0, m0=1, r1=1, m1=2),
    "".join(NCCL.format(n=n, r=n + 6) for n in range(2)),
    ENV.format(r=7),
])
def test_ranks_inside_the_world_say_nothing(tmp_path, text):
    assert _rank_finding(diagnose([write_tree(tmp_path, {"console.txt": text})])) is None
