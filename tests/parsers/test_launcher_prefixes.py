"""Launcher prefixes: mpirun --tag-output ``[1,3]<stderr>:``, horovodrun's ``[3]<stderr>:`` and either
behind --timestamp-output's ``date`` stamp name the rank (and the stamp the time) of the line;
``kubectl logs --prefix``'s ``[pod/<pod>/<container>]`` names the pod the line came from."""

from __future__ import annotations

from datetime import timezone

import pytest

from gpulib.parsers.line_identity import LineReader
from gpulib.parsers.training_log import parse, strip_prefixes

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 2 has a total capacity of "
       "15.77 GiB of which 612.00 MiB is free.")


@pytest.mark.parametrize("prefix", ["[1,2]<stderr>:", "[2]<stderr>:", "Tue Mar  3 11:20:44 2026[1,2]<stderr>:",
                                    "Fri Sep 25 16:52:53 2026[2]<stdout>:"])
def test_every_mpi_tag_layout_names_the_rank(prefix):
    body, hints = strip_prefixes(prefix + OOM)
    assert body == OOM and hints["rank"] == 2


def test_timestamp_output_gives_the_event_its_time():
    (ev,) = [e for e in parse("Tue Mar  3 11:20:44 2026[1,2]<stderr>:" + OOM + "\n").records if e.kind == "cuda_oom"]
    assert (ev.rank, ev.time_utc) == (2, "2026-03-03T11:20:44Z")


def test_control_a_date_line_without_a_tag_is_left_alone():
    _body, hints = strip_prefixes("Tue Mar  3 11:20:44 2026 loss 0.41 [1,2] batches")
    assert "stamp" not in hints and "rank" not in hints


def test_line_identity_keeps_the_stamp_split_off_with_the_tag():
    facts = LineReader(tz=timezone.utc).read("Tue Mar  3 11:20:44 2026[1,2]<stderr>:" + OOM)
    assert (facts.rank, facts.time_utc) == (2, "2026-03-03T11:20:44Z")


def test_kubectl_logs_prefix_names_the_pod_and_leaves_the_rank_prefix():
    body, hints = strip_prefixes("[pod/ptjob-llm-worker-1/pytorch] [rank5]: " + OOM)
    assert (body, hints["prefix_host"], hints["rank"]) == (OOM, "ptjob-llm-worker-1", 5)


def test_a_fanout_host_may_start_with_a_digit_before_a_known_layer():
    """A container's hex host name (``5c2e9a0b71f4``) in pdsh's ``host: `` prefix, before an NCCL line;
    a digit-first word before plain prose is not a host."""
    nccl = "5c2e9a0b71f4:812:901 [1] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'"
    body, hints = strip_prefixes("5c2e9a0b71f4: " + nccl)
    assert (body, hints.get("prefix_host")) == (nccl, "5c2e9a0b71f4")
    body, hints = strip_prefixes("3rd epoch: loss 0.41")
    assert (body, hints.get("prefix_host")) == ("3rd epoch: loss 0.41", None)
