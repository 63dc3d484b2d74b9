"""ibverbs completion statuses printed by transports other than NCCL's (PyTorch RPC's TensorPipe
``ibv`` transport, UCX, an MPI), by name rather than NCCL's number: the same fabric reading.

Fixtures are the libraries' message shapes (``ibv_wc_status_str`` text, the ``IBV_WC_*`` enum)
with our own worker names, hosts and paths; each mechanism has a control.
"""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose

RPC = ("2025-01-14T08:00:02.100000000Z [trainer3] iter   400 | loss 1.2034 | fetch 40.2 ms\n"
       "2025-01-14T08:00:03.500000000Z [W tensorpipe_agent.cpp:726] RPC agent for trainer3 encountered error when "
       "reading incoming request from ps1: {what} (this error originated at tensorpipe/transport/ibv/"
       "connection_impl.cc:478)\n"
       "2025-01-14T08:00:09.900000000Z Traceback (most recent call last):\n"
       "2025-01-14T08:00:09.900000001Z   File \"/srv/rl/worker.py\", line 88, in <module>\n"
       "2025-01-14T08:00:09.900000002Z     w = rpc.rpc_sync(\"ps1\", pull, args=(i,))\n"
       "2025-01-14T08:00:09.900000003Z RuntimeError: {what} (this error originated at tensorpipe/transport/ibv/"
       "connection_impl.cc:478)\n")
UCX = ("[1736841600.123456] [node-q4:40211:0]        ib_iface.c:746  UCX  ERROR ib_iface: send completion with "
       "error: IBV_WC_RETRY_EXC_ERR qpn 0x1a2b synd 0x81 vend_err 0x81\n"
       "[node-q4:40211] *** Process received signal ***\n")


def _verdict(tmp_path, text: str):
    (tmp_path / "worker.log").write_text(text)
    return diagnose([tmp_path])


@pytest.mark.parametrize("what, status", [("transport retry counter exceeded", "12"),
                                          ("RNR retry counter exceeded", "13")])
def test_tensorpipe_ibv_status_by_name_is_the_fabric_not_the_code(tmp_path, what, status):
    d = _verdict(tmp_path, RPC.format(what=what))
    assert (d.category, d.root_cause.category) == ("network_fabric", "network_fabric")
    assert f"IB completion error {status}" in d.root_cause.title
    assert "tensorpipe_agent.cpp:726" in d.root_cause.quotes[0].text  # the first report, not the traceback


def test_ucx_retry_exceeded_enum_is_the_fabric(tmp_path):
    d = _verdict(tmp_path, UCX)
    assert d.root_cause.category == "network_fabric" and "IB completion error 12" in d.root_cause.title


def test_other_tensorpipe_errors_stay_the_exception(tmp_path):
    d = _verdict(tmp_path, RPC.format(what="pipe closed").replace("/ibv/", "/uv/"))
    assert d.root_cause.category == "application_error"  # not an ibverbs status: no fabric reading


def test_a_crash_elsewhere_keeps_the_retry_errors_its_cascade(tmp_path):
    oom = "2025-01-14T08:00:01.000000000Z [ps1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.\n"
    d = _verdict(tmp_path, oom + RPC.format(what="transport retry counter exceeded"))
    assert d.category == "cuda_oom"
