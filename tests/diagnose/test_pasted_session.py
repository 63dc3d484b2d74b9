"""A pasted shell session gathered as evidence: each tool output after a later prompt is an input too.

The session is the kind engineers paste into a ticket (a failing nccl-tests run, then nvidia-smi);
hosts, PIDs, bus ids and readings are ours.
"""

from __future__ import annotations

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
