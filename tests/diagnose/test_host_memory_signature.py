"""Uncorrectable errors of a host DIMM (BMC logs, EDAC) are a lost node, not a GPU memory fault.

Lines as a Supermicro BMC, an HPE iLO IML and the kernel's EDAC print them; slots and times are ours.
"""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose

BMC = ("Event ID\tTime Stamp\tSeverity\tSensor Name\tSensor Type\tDescription\n"
       "12\t2026/05/16 09:27:21\tCritical\tMemory\tMemory\t"
       "Uncorrectable ECC / other uncorrectable memory error @P1-DIMMC1(CPU1) - Assertion\n")
ILO = "07/02/2026 04:11  Critical  Memory  DIMM Failure - Uncorrectable Memory Error (Processor 1, DIMM 7)\n"
EDAC_UE = ("[Tue Jun  2 02:57:14 2026] EDAC MC1: 1 UE memory read error on CPU_SrcID#0_MC#1_Chan#0_DIMM#0 "
           "(channel:0 slot:0 page:0x4a1c2 offset:0x0 grain:32)\n")


@pytest.mark.parametrize("text", [BMC, ILO, EDAC_UE])
def test_host_dimm_uncorrectable_is_a_lost_node(tmp_path, text):
    (tmp_path / "events.txt").write_text(text)
    assert diagnose([tmp_path]).category == "node_lost"


def test_corrected_dimm_errors_are_not(tmp_path):
    (tmp_path / "dmesg.txt").write_text(EDAC_UE.replace("1 UE memory", "1 CE memory"))
    assert diagnose([tmp_path]).category != "node_lost"


def test_gpu_uncorrectable_ecc_stays_a_gpu_memory_error(tmp_path):
    (tmp_path / "train.log").write_text("RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    assert diagnose([tmp_path]).category == "gpu_memory_error"
