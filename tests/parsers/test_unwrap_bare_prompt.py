"""Prompts that name no user (``node $ cmd``, ``$ cmd``, ``# cmd``) cut a pasted session as
``user@host`` prompts do; prose, headings, comments, prices and regexes do not.

The layouts are the ones engineers paste into tickets; hosts and readings are ours.
"""

from __future__ import annotations

import pytest

from gpulib.parsers.unwrap import unwrap

CSV = "index, utilization.gpu [%], memory.used [MiB]\n0, 0 %, 10745 MiB\n"


@pytest.mark.parametrize(("line", "host", "typed"), [
    ("trn-c4 $ nvidia-smi --query-gpu=index,utilization.gpu --format=csv", "trn-c4",
     "nvidia-smi --query-gpu=index,utilization.gpu --format=csv"),
    ("$ mpirun -np 2 -H trn-c4:1,trn-c5:1 python fit.py", None, "mpirun -np 2 -H trn-c4:1,trn-c5:1 python fit.py"),
    ("# dmesg -T | grep -i xid", None, "dmesg -T | grep -i xid"),
    ("trn-c5 # ibstat", "trn-c5", "ibstat"),
    ("$ nvidia-smi", None, "nvidia-smi"),
    ("$ ssh trn-c9 nvidia-smi -q", "trn-c9", "ssh trn-c9 nvidia-smi -q"),
])
def test_a_prompt_without_user_is_a_command(line, host, typed):
    bare = unwrap(f"{line}\n{CSV}")
    assert bare.commands == [(0, host, typed)]
    assert bare.text.split("\n")[0] == ""  # the prompt is not the output's first line


@pytest.mark.parametrize("text", [
    "# Training notes\nThe job hung in epoch 1.\n",  # a markdown heading
    "# notes\nThe job hung in epoch 1.\n",  # a heading of one lower-case word
    "# pin the interface for NCCL\nexport NCCL_SOCKET_IFNAME=ib0\n",  # a comment, as prose
    "#!/bin/bash\n# launch -N 2 nodes\nsrun python fit.py\n",  # a script's comment, even one with an option
    "$ 12.50 per GPU-hour on the spot queue\n",  # a price
    "$5/hr reserved\n",
    "$ matches the end of the line in the pattern\n",  # a regex explained
    "    $ mpirun -np 2 python fit.py\n",  # indented: quoted in prose or a script, not a prompt
])
def test_prose_headings_comments_and_prices_are_not_prompts(text):
    bare = unwrap(text)
    assert bare.commands == [] and not bare.changed
