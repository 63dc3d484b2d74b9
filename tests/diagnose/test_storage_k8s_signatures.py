"""Signatures for stalls and kills that are not the GPU's fault (NFS, Lustre, Kubernetes OOMKilled) and for
nvidia-smi finding no GPU at all: each alone must name its category, never a silent 'none'."""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose

CASES = {
    "nfs": ("dmesg.txt", "[Wed Nov  1 13:42:31 2017] nfs: server fs9 not responding, still trying\n",
            "data_pipeline_stall", "soft"),
    "lustre": ("kern.log", "Mar 04 02:11:09 n12 kernel: Lustre: work-OST0003-osc-ffff8a: Connection to work-OST0003 "
               "(at 10.9.0.21@o2ib) was lost; in progress operations using this service will wait for recovery to "
               "complete\n", "data_pipeline_stall", "soft"),
    "oomkilled": ("describe.txt", "    Last State:     Terminated\n      Reason:       OOMKilled\n"
                  "      Exit Code:    137\n", "host_oom", "soft"),
    "no-devices": ("session.txt", "u@n12:~$ nvidia-smi\nNo devices were found\n", "gpu_fell_off_bus", "hard"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_line_names_its_category(tmp_path, name):
    fname, text, category, interruption = CASES[name]
    (tmp_path / fname).write_text(text)
    got = diagnose([tmp_path]).to_dict()
    assert (got["verdict"]["category"], got["verdict"]["interruption"]) == (category, interruption)


def test_nfs_recovery_line_alone_is_no_failure(tmp_path):
    (tmp_path / "dmesg.txt").write_text("[Wed Nov  1 13:49:02 2017] nfs: server fs9 OK\n")
    assert diagnose([tmp_path]).to_dict()["verdict"]["category"] != "data_pipeline_stall"
