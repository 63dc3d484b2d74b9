"""NCCL's shared-memory transport needs room in /dev/shm: a container's 64 MiB default (a CI runner
pod, a Kubernetes pod without a memory-backed emptyDir) fails NCCL's segment creation, and the
ncclSystemError that follows is its cascade. Control: a DataLoader out of /dev/shm stays a data
pipeline failure (catalogue rows nccl-shm-segment and shm-bus-error); a Python process killed by SIGBUS
(fatal-bus-error) is a failure of its memory-mapped data or /dev/shm, never a PCIe bus error."""

from __future__ import annotations

from gpulib.diagnose import diagnose


def _write(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    got = diagnose([tmp_path]).to_dict()
    root = got.get("root_cause") or {}
    return got["verdict"]["interruption"], root.get("category") or got["verdict"]["category"], root.get("host")


NCCL_SHM = ("gpu-t4-03:5120:5209 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-Zr81xP to "
            "9637892 bytes, error: No space left on device (28)\n"
            "gpu-t4-03:5120:5120 [0] NCCL INFO ncclCommInitRank comm 0x55d1 rank 0 nranks 4 cudaDev 0 busId 1e0 - Init START\n"
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, unhandled system error (run "
            "with NCCL_DEBUG=INFO for details), NCCL version 2.27.3\n")
LOADER_SHM = ("Traceback (most recent call last):\n"
              "  File \"/opt/app/train.py\", line 88, in <module>\n"
              "RuntimeError: DataLoader worker (pid 7712) is killed by signal: Bus error. It is possible that dataloader's "
              "workers are out of shared memory. Please try to raise your shared memory limit.\n"
              "OSError: [Errno 28] No space left on device: '/dev/shm/torch_7712_3318'\n")


def test_nccl_shared_memory_segment_failure_is_the_cause_on_its_host(tmp_path):
    got = _write(tmp_path, {"job.log": NCCL_SHM})
    assert got == ("soft", "network_fabric", "gpu-t4-03")


def test_control_a_dataloader_out_of_shm_stays_a_data_pipeline_failure(tmp_path):
    got = _write(tmp_path, {"job.log": LOADER_SHM})
    assert got[1] == "data_pipeline_stall"


def test_a_python_process_killed_by_sigbus_is_a_data_path_failure(tmp_path):
    text = ("Running tokenizer on dataset (num_proc=16):  12%|█▏        | 6251/52002 [00:09<01:02, 731.20 examples/s]\n"
            "Fatal Python error: Bus error\n\nCurrent thread 0x00007f0ed3b5b740 (most recent call first):\n"
            '  File "/opt/conda/lib/python3.10/site-packages/datasets/arrow_writer.py", line 581 in write_batch\n')
    assert _write(tmp_path, {"train.log": text})[:2] == ("soft", "data_pipeline_stall")


def test_control_a_pcie_bus_error_is_not_a_sigbus(tmp_path):
    text = ("[Mar 4 09:12] pcieport 0000:40:01.1: AER: Corrected error received: 0000:40:01.1\n"
            "[  +0.000011] pcieport 0000:40:01.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
            "(Receiver ID)\n")
    assert _write(tmp_path, {"dmesg.txt": text})[1] != "data_pipeline_stall"
