"""Per-GPU query timings (an NVML test program's output, a timing script), and bad input.

The first layout follows the NVML sample program as engineers instrument it (a device listing,
the call it makes, ``Elapsed time: N ms``); the others are the wordings timing scripts use. GPU
names, bus ids and timings are ours.
"""

from __future__ import annotations

import pytest

from gpulib.parsers import gpu_query_time

NVML_SAMPLE = """\
Found 2 devices

Listing devices:
0. NVIDIA RTX A6000 [00000000:3B:00.0]
Start calling NVLINK query:90411201
SUPPORT P2P:1
End calling NVLINK query:90420877
Elapsed time:9676 ms
1. NVIDIA RTX A6000 [00000000:AF:00.0]
Start calling NVLINK query:90420880
SUPPORT P2P:1
End calling NVLINK query:90420881
Elapsed time:1 ms
All done.
"""

SCRIPT = """\
GPU 0: NVIDIA A100-SXM4-40GB
  nvmlDeviceGetEccMode took 0.002 s
GPU 1: NVIDIA A100-SXM4-40GB
  nvmlDeviceGetEccMode took 4.1 s
GPU 2: NVIDIA A100-SXM4-40GB
  nvmlDeviceGetEccMode took 1800 us
"""


def test_nvml_sample_listing():
    assert gpu_query_time.looks_like(NVML_SAMPLE)
    result = gpu_query_time.parse(NVML_SAMPLE, "nvml.txt")
    assert result.problems == []
    first, second = result.records
    assert (first.gpu_index, first.pci_bus_id, first.gpu_name, first.elapsed_ms) == (0, "0000:3b:00.0", "NVIDIA RTX A6000",
                                                                                      9676.0)
    assert (first.line, first.gpu_line, first.text) == (8, 4, "Elapsed time:9676 ms")
    assert first.query == "calling NVLINK query; SUPPORT P2P" == second.query  # counters dropped: one query
    assert second.elapsed_ms == 1.0 and second.pci_bus_id == "0000:af:00.0"


def test_script_wording_and_units():
    result = gpu_query_time.parse(SCRIPT, "t.txt")
    assert [(t.gpu_index, t.elapsed_ms) for t in result.records] == [(0, 2.0), (1, 4100.0), (2, 1.8)]
    assert {t.query for t in result.records} == {"nvmlDeviceGetEccMode"}  # named on the timing line itself
    assert all(t.pci_bus_id is None for t in result.records)


def test_one_gpu_or_a_numbered_list_is_not_timings():
    one = "0. NVIDIA L4 [00000000:01:00.0]\nElapsed time: 12 ms\n"
    steps = "1. Install the driver\nduration: 5 s\n2. Reboot the node\nduration: 60 s\n"
    assert not gpu_query_time.looks_like(one)
    assert not gpu_query_time.looks_like(steps)  # numbered items without a bus id are not GPUs
    assert gpu_query_time.parse(steps, "howto.md").records == []


def test_a_training_log_with_step_times_is_not_claimed():
    log = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5e1c0a7b-0000-0000-0000-000000000000)\n"
           " iteration      100/   5000 | elapsed time per iteration (ms): 812.4 | loss 2.1\n")
    assert not gpu_query_time.looks_like(log)


@pytest.mark.parametrize("text, why", [
    ("", "no per-GPU timings"),
    ("0. NVIDIA RTX A6000 [00000000:3B:00.0]\nStart calling NVLINK q", "no per-GPU timings"),  # cut before its time
    ("\x00\x01Elapsed time: 5 ms\x00", "binary data"),
])
def test_bad_input_is_a_problem_not_a_crash(text, why):
    result = gpu_query_time.parse(text, "nvml.txt")
    assert result.records == [] and why in result.problems[0].message
