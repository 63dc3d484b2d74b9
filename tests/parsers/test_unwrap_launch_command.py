"""A pasted console keeps a distributed launch typed at its prompt (the rendezvous endpoint names
the store's host); other commands typed at a prompt are still removed, line for line."""

from __future__ import annotations

from gpulib.parsers import unwrap


def test_launch_command_at_a_prompt_is_kept_and_names_the_prompt_host():
    text = ("ops@node-q7:~/run$ torchrun --nnodes 2 --rdzv_endpoint node-q1:29400 train.py\n"
            "step 1 loss 3.2\n")
    got = unwrap.unwrap(text)
    assert got.text.splitlines()[0] == "torchrun --nnodes 2 --rdzv_endpoint node-q1:29400 train.py"
    assert got.host == "node-q7"
    assert got.commands[0][1:] == ("node-q7", "torchrun --nnodes 2 --rdzv_endpoint node-q1:29400 train.py")


def test_control_other_commands_and_launches_without_an_endpoint_leave_an_empty_line():
    text = ("ops@node-q7:~/run$ nvidia-smi -q | grep -i ecc\n"
            "    ECC Mode\n"
            "ops@node-q7:~/run$ torchrun --standalone --nproc_per_node 8 train.py\n")
    lines = unwrap.unwrap(text).text.splitlines()
    assert lines[0] == "" and lines[2] == "" and lines[1] == "    ECC Mode"
