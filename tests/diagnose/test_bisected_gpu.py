"""The GPU a failing test run added to a passing one in a pasted session (bisected_gpu): taken only
when the passing and failing runs on one host leave exactly one GPU. Own hosts, tools and values."""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.diagnose.bisected_gpu import bisected_gpu

PASS = "[ops@rk7-g05 ~]# {cmd}\n# Using devices\n#  Rank  0 Pid  5120 on rk7-g05 device  2 [0x3b] NVIDIA A100\n" \
       "# Avg bus bandwidth    : 228.911\n"
FAIL = "[ops@rk7-g05 ~]# {cmd}\nrk7-g05: Test CUDA failure common.cu:1007 'CUDA-capable device(s) is/are busy or " \
       "unavailable'\n"
DMESG = ("[ops@rk7-g05 ~]# dmesg -T | tail -n 2\n"
         "[Mon Feb  2 09:14:07 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required "
         "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874\n")


def test_the_gpu_the_failing_run_added_is_the_faulty_one(tmp_path):
    text = PASS.format(cmd="gpu-check nccl -g 0,2,3,4,5,6,7") + FAIL.format(cmd="gpu-check nccl -g 5,1") + DMESG
    (tmp_path / "session.txt").write_text(text)
    rc = diagnose([tmp_path]).to_dict()["root_cause"]
    assert rc["category"] == "gpu_firmware_error" and rc["gpu_index"] == 1
    assert rc["identified_by"]["gpu_index"] == "session.txt (the GPU its failing test runs added)"


def test_cuda_visible_devices_selects_gpus_too():
    text = (PASS.format(cmd="CUDA_VISIBLE_DEVICES=0,1,2 ./all_reduce_perf -b 8 -e 1G")
            + FAIL.format(cmd="CUDA_VISIBLE_DEVICES=2,6 ./all_reduce_perf -b 8 -e 1G"))
    assert bisected_gpu(text) == 6


def test_no_passing_run_names_no_gpu():
    assert bisected_gpu(FAIL.format(cmd="gpu-check nccl -g 5,1") + DMESG) is None


def test_two_added_gpus_name_neither():
    assert bisected_gpu(PASS.format(cmd="gpu-check nccl -g 0,2") + FAIL.format(cmd="gpu-check nccl -g 0,1,3")) is None


def test_a_gpu_count_is_not_a_selection():
    # nccl-tests' -g is a GPU count per thread: '-g 4' passing and '-g 8' failing name no GPU
    assert bisected_gpu(PASS.format(cmd="./all_reduce_perf -g 4") + FAIL.format(cmd="./all_reduce_perf -g 8")) is None


def test_runs_on_two_hosts_name_no_gpu():
    text = PASS.format(cmd="gpu-check nccl -g 0,2") + FAIL.format(cmd="gpu-check nccl -g 0,1").replace("rk7-g05", "rk7-g06")
    assert bisected_gpu(text) is None


def test_a_pass_that_counts_no_errors_is_still_a_pass():
    text = (PASS.format(cmd="CUDA_VISIBLE_DEVICES=0,1,2 ./all_reduce_perf -b 8 -e 1G") + "# Errors: 0, 0 failures\n"
            + FAIL.format(cmd="CUDA_VISIBLE_DEVICES=2,6 ./all_reduce_perf -b 8 -e 1G"))
    assert bisected_gpu(text) == 6
