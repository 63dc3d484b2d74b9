"""Two ranks of a training script under a real ``torchrun`` (gloo on a loopback port): how the
multi-rank checkpoint tests make and resume their checkpoints."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def torchrun_two(tmp: Path, name: str, script_text: str, *args: str) -> subprocess.CompletedProcess:
    """Write ``script_text`` to ``tmp/name`` and run it as 2 ranks in ``tmp``; the finished process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    script = tmp / name
    script.write_text(script_text)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-addr=127.0.0.1",
                           f"--master-port={port}", str(script), *args], capture_output=True, text=True, cwd=tmp,
                          timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"})
