"""Who printed a line: the NCCL ``host:pid:tid [dev]`` prefix, whatever the host's name looks like.

Lines are written in NCCL's layout with invented hosts and pids.
"""

from __future__ import annotations

from datetime import timezone

import pytest

from gpulib.parsers.line_identity import LineReader


@pytest.mark.parametrize("host", ["gpu-a07", "3fa90c71d5be", "10.40.2.17"])
def test_nccl_prefix_names_the_host_even_a_container_id(host):
    facts = LineReader(tz=timezone.utc).read(f"{host}:412:418 [3] include/socket.h:311 NCCL WARN Socket creation "
                                             "failed : Address family not supported by protocol")
    assert (facts.host, facts.pid, facts.device) == (host, 412, 3)


def test_a_traceback_location_is_not_an_nccl_prefix():
    facts = LineReader(tz=timezone.utc).read('  File "train.py", line 88, in <module>')
    assert facts.host is None and facts.pid is None


def test_a_pcie_ports_own_line_names_no_gpu():
    port = LineReader(tz=timezone.utc).read("[Tue Mar 10 04:21:07 2026] pcieport 0000:00:03.0: AER: Corrected error")
    gpu = LineReader(tz=timezone.utc).read("[Tue Mar 10 04:21:07 2026] nvidia 0000:5e:00.0: AER: can't recover")
    assert (port.pci, gpu.pci) == (None, "0000:5e:00.0")
