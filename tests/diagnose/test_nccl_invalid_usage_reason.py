"""An NCCL invalid-usage error is explained by the WARN line NCCL printed just before it.

Lines are written in NCCL's and torch's layouts with invented hosts, pids and values. Negative
controls: no WARN line, or one too far before the error to belong to it.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

WARN = "trn-w1:27:27 [0] init.cc:873 NCCL WARN Invalid rank requested : 4/4"
ERROR = ("RuntimeError: NCCL error in: /opt/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, invalid usage, "
         "NCCL version 2.7.8")
FILLER = "Epoch 1 batch {n}: loss 0.41"


def _run(tmp_path, lines: list[str]) -> dict:
    (tmp_path / "worker.log").write_text("\n".join(lines) + "\n")
    return diagnose([tmp_path]).to_dict()


def test_the_warn_line_before_an_invalid_usage_error_is_the_first_failure(tmp_path):
    doc = _run(tmp_path, [WARN, "Traceback (most recent call last):", ERROR])
    rc = doc["root_cause"]
    assert (doc["verdict"]["interruption"], rc["category"]) == ("soft", "application_error")
    assert rc["evidence"][0]["text"] == WARN


def test_without_a_warn_line_close_before_it_the_error_line_is_cited(tmp_path):
    for lines in ([ERROR], [WARN, *(FILLER.format(n=n) for n in range(60)), ERROR]):
        rc = _run(tmp_path, lines)["root_cause"]
        assert rc["category"] == "application_error"
        assert rc["evidence"][0]["text"] == ERROR, len(lines)


def test_the_warn_line_alone_is_a_launch_misconfiguration_not_the_network(tmp_path):
    rc = _run(tmp_path, ["trn-w1:27:27 [0] NCCL INFO NET/Socket : Using [0]eth0:10.9.0.4<0>", WARN])["root_cause"]
    assert rc is not None and rc["category"] == "application_error"
