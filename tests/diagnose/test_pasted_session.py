"""A pasted shell session gathered as evidence: each tool output after a later prompt is an input too.

The session is the kind engineers paste into a ticket (a failing nccl-tests run, then nvidia-smi);
hosts, PIDs, bus ids and readings are ours.
"""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose
from gpulib.evidence.gather import gather
from tests.parsers.test_session import SESSION

KERNEL = ("[ops@gpu-b07 ~]$ sudo dmesg -T | grep -i xid\n"
          "[Thu Apr  9 10:01:52 2026] NVRM: Xid (PCI:0000:1a:00): 31, pid=40112, name=all_reduce_perf, Ch 00000008\n")


def test_each_output_is_an_input_of_its_kind_and_lines_are_scanned_once(tmp_path):
    (tmp_path / "ticket-4411.txt").write_text(SESSION + KERNEL)
    files = gather([tmp_path]).files
    assert [(f.display, f.kind, f.host) for f in files] == [  # the kernel log's lines: read with the whole file
        ("ticket-4411.txt", "nccl_tests", "gpu-b07"), ("ticket-4411.txt", "nvidia_smi_csv", "gpu-b07")]
    whole, part = files
    assert [g.line for g in part.records] == [10, 11]  # the file's own line numbers
    signals = [(s.signature, s.line) for f in files for s in f.signals]
    assert part.signals == [] and ("xid", 15) in signals and len(signals) == len(set(signals))  # scanned once


def test_report_counts_the_file_once(tmp_path):
    (tmp_path / "ticket-4411.txt").write_text(SESSION)
    assert "INPUTS: 1 file(s): 1 nccl_tests, 1 nvidia_smi_csv" in diagnose([tmp_path]).to_text()


def test_a_readme_is_not_cut_into_outputs(tmp_path):
    (tmp_path / "README.md").write_text(SESSION)  # notes for people: read as a whole, as before
    assert [f.kind for f in gather([tmp_path]).files] == ["nccl_tests"]


#: Two files pasted into one: three CSV rows behind a prompt without user@host, then the job's log
#: behind a bare ``$`` prompt (the layout of a ticket that pasted ``cat *``).
TABLE_THEN_LOG = """\
trn-c4 $ nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv
index, utilization.gpu [%], memory.used [MiB]
0, 0 %, 30211 MiB
$ mpirun -np 2 -H trn-c4:1,trn-c5:1 -x NCCL_DEBUG=INFO python fit.py
[1,0]<stdout>:Epoch 1/10
[1,1]<stderr>:Traceback (most recent call last):
[1,1]<stderr>:  File "fit.py", line 88, in <module>
[1,1]<stderr>:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
"""


@pytest.mark.parametrize(("log_line", "whole"), [
    ("", "text"),  # lines no parser knows: read as plain text
    ("[1,0]<stdout>:trn-c4:40112:40190 [0] NCCL INFO NET/Socket : Using [0]ib0:10.30.1.4<0>\n", "training_log")])
def test_a_table_ahead_of_a_job_log_does_not_hide_the_log(tmp_path, log_line, whole):
    """The file starts as an ``nvidia-smi`` CSV (read by structure alone, not scanned), but a job
    log follows a later prompt: the whole file is read as the log, so its lines are scanned, and
    the table is one of its outputs."""
    text = TABLE_THEN_LOG.replace("Epoch 1/10\n", "Epoch 1/10\n" + log_line)
    (tmp_path / "all.log").write_text(text)
    files = gather([tmp_path]).files
    assert [(f.kind, f.host) for f in files] == [(whole, "trn-c4"), ("nvidia_smi_csv", "trn-c4")]
    assert [g.line for g in files[1].records] == [3]
    assert any("OutOfMemoryError" in s.text for s in files[0].signals)
    assert diagnose([tmp_path]).to_dict()["verdict"]["category"] == "cuda_oom"
