"""A job script that echoes its node (``echo "Node: $(hostname)"``, ``Running on host ...``) names
the host of its log's hostless lines, whatever the file is called; a line that only looks alike
(``Running on cpu``, ``Node: 2 of 4``) names none."""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose

OOM = ("Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.02 GiB is free.\n")


@pytest.mark.parametrize(("first", "host"), [
    ("Node: gpu-a17", "gpu-a17"),
    ("Hostname=gpu-a17.cluster.local", "gpu-a17.cluster.local"),
    ("Running on host gpu-a17", "gpu-a17"),
    ("SLURMD_NODENAME=gpu-a17", "gpu-a17"),
    ("Running on cpu and cuda", None),
    ("Node: 2 of 4", None),
    ("Host memory: 512 GiB", None),
])
def test_an_echoed_node_places_the_log(tmp_path, first, host):
    (tmp_path / "job_20260301.txt").write_text(f"{first}\nstep 10 loss 2.31\n{OOM}")
    root = diagnose([tmp_path]).to_dict()["root_cause"]
    assert root["category"] == "cuda_oom" and root["host"] == host
