"""A rank that died of SIGSEGV on one node; the other node's NCCL 'remote peer' errors are its cascade.

Lines are written in torch's, faulthandler's and NCCL's layouts with invented hosts, pids and
values. Negative control: the same NCCL errors with no crash anywhere name no segfault.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

PEER = ["gn-a7:3301:3390 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer gn-b2<40122>",
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, internal error, "
        "NCCL version 2.14.3",
        "ncclInternalError: Internal check failed."]
CRASH = ["Fatal Python error: Segmentation fault",
         "",
         "Current thread 0x00007f3b8d1f6740 (most recent call first):",
         "  File \"/work/train.py\", line 74 in forward",
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
         "============================================================",
         "/work/train.py FAILED",
         "------------------------------------------------------------",
         "Failures:",
         "  <NO_OTHER_FAILURES>",
         "------------------------------------------------------------",
         "Root Cause (first observed failure):",
         "[0]:",
         "  time      : 2026-03-01_22:47:31",
         "  host      : gn-b2",
         "  rank      : 5 (local_rank: 1)",
         "  exitcode  : -11 (pid: 7781)",
         "  error_file: <N/A>",
         "  traceback : Signal 11 (SIGSEGV) received by PID 7781",
         "============================================================"]


def _run(tmp_path, files: dict[str, list[str]]) -> dict:
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    return diagnose([tmp_path]).to_dict()


def test_the_crashed_rank_is_the_cause_and_the_peer_errors_its_cascade(tmp_path):
    doc = _run(tmp_path, {"gn-a7.out": PEER, "gn-b2.out": CRASH})
    rc = doc["root_cause"]
    assert (doc["verdict"]["interruption"], rc["category"]) == ("soft", "application_error")
    assert (rc["host"], rc["rank"]) == ("gn-b2", 5)
    assert rc["finding"].startswith("sig-fatal-segfault")


def test_peer_errors_alone_name_no_segfault(tmp_path):
    doc = _run(tmp_path, {"gn-a7.out": PEER})
    assert not any(f["id"].startswith("sig-fatal-segfault") for f in doc["findings"])
