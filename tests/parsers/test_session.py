"""A pasted shell session cut at its prompts, each command's output read by its own parser.

The session layouts are the ones engineers paste (a prompt, the tool's output as printed, the
next prompt); hosts, PIDs, bus ids and readings are ours.
"""

from __future__ import annotations

from gpulib.parsers import registry, session
from gpulib.parsers.gpu_records import GpuState
from gpulib.parsers.nccl_tests import NcclTestsRun

SESSION = """\
[ops@gpu-b07 ~]$ ./build/all_reduce_perf -b 8 -e 1G -f 2 -g 4
# nThread 1 nGpus 4 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid  40112 on    gpu-b07 device  0 [0x1a] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid  40112 on    gpu-b07 device  1 [0x1d] NVIDIA A100-SXM4-80GB
gpu-b07: Test NCCL failure common.cu:1005 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '
[ops@gpu-b07 ~]$ nvidia-smi --query-gpu=index,pci.bus_id,memory.used,memory.total --format=csv
index, pci.bus_id, memory.used [MiB], memory.total [MiB]
0, 00000000:1A:00.0, 79120 MiB, 81920 MiB
1, 00000000:1D:00.0, 79118 MiB, 81920 MiB
[ops@gpu-b07 ~]$ uptime
 10:02:11 up 12 days,  3:10,  1 user,  load average: 0.31, 0.40, 0.38
"""


def test_each_output_is_read_by_its_own_parser_with_the_files_line_numbers():
    found = session.outputs(SESSION, "paste.txt", registry.Options())
    assert [(o.kind, o.first_line, o.last_line, o.host) for o in found] == [
        ("nccl_tests", 2, 7, "gpu-b07"), ("nvidia_smi_csv", 9, 11, "gpu-b07")]
    assert found[1].command.startswith("nvidia-smi --query-gpu")
    run = found[0].result.records[0]
    assert isinstance(run, NcclTestsRun) and run.failures[0].line == 7
    gpus = found[1].result.records
    assert all(isinstance(g, GpuState) for g in gpus) and [(g.index, g.line, g.mem_used_mib) for g in gpus] == [
        (0, 10, 79120), (1, 11, 79118)]


def test_kinds_to_skip_are_left_out():
    found = session.outputs(SESSION, "paste.txt", registry.Options(), skip=("nccl_tests",))
    assert [o.kind for o in found] == ["nvidia_smi_csv"]


def test_one_command_is_not_a_session_to_cut():
    one = "\n".join(SESSION.splitlines()[:7]) + "\n"
    assert session.outputs(one, "paste.txt", registry.Options()) == []
    assert session.outputs(SESSION.replace("[ops@gpu-b07 ~]$ ", ""), "p.txt", registry.Options()) == []  # no prompts


def test_bad_input_never_raises(monkeypatch):
    assert session.outputs("", "e.txt", registry.Options()) == []
    assert session.outputs("\x00\x01[root@x ~]# ls\n\x00", "b.bin", registry.Options()) == []
    cut = SESSION[:SESSION.index("1, 00000000:1D")]  # the paste stopped after the first CSV row
    assert [len(o.result.records) for o in session.outputs(cut, "p.txt", registry.Options())] == [1, 1]

    def broken(src, opts):
        raise RuntimeError("parser bug")

    spec = registry.BY_KIND["nvidia_smi_csv"]
    monkeypatch.setitem(registry.BY_KIND, "nvidia_smi_csv", registry.ParserSpec(spec.kind, spec.looks_like, broken))
    found = session.outputs(SESSION, "paste.txt", registry.Options())
    assert found[1].result.records == [] and "parser failed on the output of line 9" in found[1].result.problems[0].message


def test_a_command_typed_through_ssh_is_the_remote_hosts_output():
    from gpulib.parsers.unwrap import remote_host, unwrap

    assert [remote_host(c) for c in ("ssh gn-12 nvidia-smi", "ssh -p 2200 -o BatchMode=yes ops@gn-13 dmesg -T",
                                     "sudo ssh -t gn-14 nvidia-smi -q", "ssh gn-15", "nvidia-smi")] == [
        "gn-12", "gn-13", "gn-14", None, None]
    bare = unwrap("[ops@login1 ~]$ ssh gn-12 nvidia-smi -L\nGPU 0: NVIDIA A40 (UUID: GPU-00aa)\n"
                  "[ops@login1 ~]$ hostname\nlogin1\n")
    assert [(host, cmd.split()[0]) for _i, host, cmd in bare.commands] == [("gn-12", "ssh"), ("login1", "hostname")]
    assert bare.host == "gn-12"  # the text's head is the first command's output
