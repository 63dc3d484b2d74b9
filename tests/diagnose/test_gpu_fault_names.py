"""A GPU fault's index and rank from the evidence beside it.

* an ``nvidia-smi --query-gpu=index,pci.bus_id`` table pasted under the command that printed it
  maps the Xid's PCI id to nvidia-smi's index (the command line's commas are not the header);
* the one rank whose own CUDA error of the same kind came with the Xid is the GPU's rank; two
  such ranks name none.

Lines are written in the driver's, nvidia-smi's and torch's layouts with invented hosts, PCI ids,
pids and times.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.parsers.nvsmi_csv import parse

TABLE = ("index, pci.bus_id, ecc.errors.uncorrected.aggregate.total\n0, 00000000:1B:00.0, 0\n"
         "1, 00000000:4E:00.0, 0\n2, 00000000:8C:00.0, 1\n3, 00000000:AD:00.0, 0\n")
ECHO = "$ nvidia-smi --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.aggregate.total --format=csv\n"
XID = ("[Tue Apr  8 02:10:05 2025] NVRM: Xid (PCI:0000:8c:00): 48, pid=40417, name=python3, Ch 00000010, An "
       "uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2.\n")
RANK_ERROR = ("[rank{r}]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
STEP = "[2025-04-08 02:09:58,001] [INFO] [logging.py:96:log_dist] [Rank 0] step=880, skipped=0, lr=[0.0001]\n"


def test_a_command_line_above_the_table_is_not_its_header():
    for text in (TABLE, ECHO + TABLE):
        states = [r for r in parse(text).records if getattr(r, "pci_bus_id", None)]
        assert {s.pci_bus_id: s.index for s in states}["0000:8c:00.0"] == 2


def _run(tmp_path, ranks) -> dict:
    node = tmp_path / "node-q4"
    node.mkdir()
    (node / "dmesg.txt").write_text(XID)
    (node / "gpus.csv").write_text(ECHO + TABLE)
    (tmp_path / "train.log").write_text(STEP + "".join(RANK_ERROR.format(r=r) for r in ranks))
    return diagnose([tmp_path]).to_dict()["root_cause"]


def test_the_one_rank_that_saw_the_ecc_error_is_the_gpus_rank(tmp_path):
    root = _run(tmp_path, [6])
    assert (root["category"], root["gpu_index"], root["rank"]) == ("gpu_memory_error", 2, 6)


def test_two_ranks_that_saw_it_name_no_rank(tmp_path):
    root = _run(tmp_path, [6, 7])
    assert (root["category"], root["gpu_index"], root["rank"]) == ("gpu_memory_error", 2, None)
