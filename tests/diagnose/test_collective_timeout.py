"""A collective time-out with no visible cause: "NCCL timeout, cause not shown", the silent rank named.

The rank that times out is the one that *waited*; the suspect is the rank it waited for, which is
elsewhere (in its own loop, in I/O, dead) and usually prints nothing. A real two-rank torchrun run
on gloo, in which rank 1 stops calling collectives, must name rank 1, never rank 0 that raised.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib.diagnose import diagnose

HANG = '''
import datetime, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
rank = dist.get_rank()
t = torch.ones(4)
for step in range(3):
    dist.all_reduce(t)
    print(f"step {step} rank {rank} ok", flush=True)
if rank == 1:
    while True:  # rank 1 is busy in its own loop and never reaches the next collective
        time.sleep(0.1)
dist.all_reduce(t)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def hang_console(tmp_path_factory) -> Path:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: no real torchrun run")
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    folder = tmp_path_factory.mktemp("hang")
    (folder / "hang.py").write_text(HANG)
    console = folder / "evidence" / "console.log"
    console.parent.mkdir()
    with console.open("w") as out:
        run = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
                              str(_free_port()), str(folder / "hang.py")], stdout=out, stderr=subprocess.STDOUT,
                             timeout=180, cwd=folder)
    assert run.returncode != 0, console.read_text()[-2000:]
    return console


def test_the_silent_rank_is_the_suspect_not_the_rank_that_waited(hang_console):
    d = diagnose([hang_console])
    text = hang_console.read_text()
    assert "Timed out waiting" in text, text[-2000:]
    assert d.interruption == "unknown", d.summary
    assert d.root_cause is None or d.root_cause.rank != 0, d.summary
    assert "cause not shown" in d.summary and "rank(s) 1" in d.summary, d.summary
    assert any("rank(s) 1" in step for step in d.next_steps), d.next_steps


def test_an_nccl_timeout_cascade_with_no_cause_names_the_rank_that_never_arrived(tmp_path):
    ranks = [r for r in range(4) if r != 2]
    lines = [f"[rank{r}]:[E0504 02:41:07.{r:06d}118 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
             f"operation timeout: WorkNCCL(SeqNum=4411, OpType=ALLREDUCE, NumelIn=2048, NumelOut=2048, "
             f"Timeout(ms)=600000) ran for 600031 milliseconds before timing out." for r in ranks]
    path = tmp_path / "job.log"
    path.write_text("\n".join(["[rank2]:step 4410 loss 1.92", *lines]) + "\n")
    d = diagnose([path])
    assert d.interruption == "unknown"
    assert d.summary.startswith("NCCL timeout, cause not shown") and "rank(s) 2" in d.summary, d.summary
