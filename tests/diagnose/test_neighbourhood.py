"""The root cause's missing names from its neighbourhood (neighbourhood.fill): its own line, its
file, the files beside it; a name is taken only when the place names exactly one value, and the
root cause says where each came from. Own hosts, pids and PCI ids."""

from __future__ import annotations

from pathlib import Path

from gpulib.diagnose import diagnose

ECC = ("RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
       "CUDA kernel errors might be asynchronously reported at some other API call.\n\n")


def _rc(folder: Path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        (folder / name).write_text(text)
    return diagnose([folder]).to_dict()["root_cause"] or {}


def test_rank_from_the_watchdog_line_of_the_same_file(tmp_path):
    rc = _rc(tmp_path, {"console.log": ECC + "[E ProcessGroupNCCL.cpp:916] [Rank 3] NCCL watchdog thread terminated "
                                             "with exception: CUDA error: uncorrectable ECC error encountered\n"})
    assert rc["category"] == "gpu_memory_error" and rc["rank"] == 3
    assert rc["identified_by"]["rank"].startswith("console.log")


def test_two_ranks_in_the_file_name_neither(tmp_path):
    rc = _rc(tmp_path, {"console.log": ECC + "[Rank 3] NCCL watchdog thread terminated\n[Rank 6] NCCL watchdog "
                                             "thread terminated\n"})
    assert rc["category"] == "gpu_memory_error" and rc["rank"] is None


def test_gpu_index_from_the_xid_text_itself(tmp_path):
    rc = _rc(tmp_path, {"kern.log": "[2026-01-05T02:10:11Z] NVRM: Xid (PCI:0000:4c:00): 119, pid=2211, name=python, "
                                    "Timeout after 45s of waiting for RPC response from GPU5 GSP!\n"})
    assert (rc["gpu_pci"], rc["gpu_index"]) == ("0000:4c:00.0", 5)
    assert rc["identified_by"]["gpu_index"].startswith("kern.log:1")


def test_gpu_below_a_failing_root_port_is_the_one_its_driver_names(tmp_path):
    rc = _rc(tmp_path, {"dmesg.txt": "[  +0.000001] pcieport 0000:00:02.0: AER: Multiple Uncorrected (Fatal) error "
                                     "received: 0000:00:02.0\n"
                                     "[  +0.000844] nvidia 0000:41:00.0: AER: can't recover (no error_detected "
                                     "callback)\n[  +0.000008] pcieport 0000:00:02.0: AER: device recovery failed\n"})
    assert rc["category"] == "gpu_fell_off_bus" and rc["gpu_pci"] == "0000:41:00.0"


def test_a_root_port_alone_names_no_gpu(tmp_path):
    rc = _rc(tmp_path, {"dmesg.txt": "[  +0.000001] pcieport 0000:00:02.0: AER: Multiple Uncorrected (Fatal) error "
                                     "received: 0000:00:02.0\n"})
    assert rc["category"] == "gpu_fell_off_bus" and rc["gpu_pci"] in (None, "0000:00:02.0")
    assert "gpu_pci" not in rc.get("identified_by", {})


def test_host_from_the_shell_prompt_of_a_file_beside_it(tmp_path):
    rc = _rc(tmp_path, {"job.err": ECC, "session.txt": "ops@gpu-r4-n12:~$ nvidia-smi -L\nGPU 0: NVIDIA H100 80GB "
                                                       "HBM3 (UUID: GPU-0000aaaa-1111-2222-3333-444455556666)\n"})
    assert rc["category"] == "gpu_memory_error" and rc["host"] == "gpu-r4-n12"
    assert rc["identified_by"]["host"] == "session.txt"


def test_srun_labels_name_the_rank_when_they_all_agree(tmp_path):
    labels = "".join(f"7: line {k} of the traceback\n" for k in range(3))
    rc = _rc(tmp_path, {"slurm.out": labels + "7: " + ECC})
    assert rc["rank"] == 7


RAMP = ("| elapsed | GPU0 | GPU1 | fan (GPU0) | SM clock (GPU0) |\n|---:|---:|---:|---:|---:|\n"
        "| 60 s | 84 °C | 80 °C | 61% | 1410 MHz |\n")


def test_gpu_from_the_table_column_whose_cell_says_it(tmp_path):
    rc = _rc(tmp_path, {"ramp.md": RAMP + "| 95 s | 86 °C | **thermal slowdown active** | 66% | 1395 MHz |\n"})
    assert rc["category"] == "thermal_throttling" and rc["gpu_index"] == 1
    assert "table column" in rc["identified_by"]["gpu_index"]


def test_a_table_row_that_says_it_on_two_gpus_names_neither(tmp_path):
    rc = _rc(tmp_path, {"ramp.md": RAMP + "| 95 s | **thermal slowdown active** | **thermal slowdown active** | 66% "
                                          "| 1395 MHz |\n"})
    assert rc["category"] == "thermal_throttling" and rc["gpu_index"] is None


def test_gpu_pci_from_lspci_when_it_lists_one_nvidia_device(tmp_path):
    rc = _rc(tmp_path, {"job.err": ECC, "lspci.txt": "00:1f.3 Audio device: Intel Corporation Device 7ad0\n"
                                                     "2a:00.0 3D controller: NVIDIA Corporation GH100 [H100 PCIe] "
                                                     "(rev a1)\n"})
    assert (rc["category"], rc["gpu_pci"]) == ("gpu_memory_error", "0000:2a:00.0")  # the node's only GPU
    assert rc["identified_by"]["gpu_pci"] == "lspci.txt"


def test_lspci_of_a_node_with_two_gpus_names_neither(tmp_path):
    rc = _rc(tmp_path, {"job.err": ECC, "lspci.txt": "2a:00.0 3D controller: NVIDIA Corporation GH100 (rev a1)\n"
                                                     "3a:00.0 3D controller: NVIDIA Corporation GH100 (rev a1)\n"})
    assert rc["category"] == "gpu_memory_error" and rc["gpu_pci"] is None


def test_torchelastic_folders_are_not_hosts(tmp_path):
    """<log_dir>/<run id>/attempt_<n>/<local rank>/error.json: the rank is the folder, the node the folder above."""
    rank_dir = tmp_path / "trn-n5" / "torchelastic_q1w2" / "none_ab12cd" / "attempt_0" / "3"
    rank_dir.mkdir(parents=True)
    (rank_dir / "error.json").write_text(
        '{"message": {"message": "RuntimeError: CUDA error: uncorrectable ECC error encountered", "extraInfo": '
        '{"py_callstack": "Traceback (most recent call last):\\nRuntimeError: CUDA error: uncorrectable ECC error '
        'encountered\\n", "timestamp": "1767225600"}}}')
    rc = diagnose([tmp_path]).to_dict()["root_cause"]
    assert (rc["category"], rc["host"], rc["rank"]) == ("gpu_memory_error", "trn-n5", 3)


TF_CTX = ("2025-11-20 08:01:07.441920: F tensorflow/stream_executor/lib/statusor.cc:34] Attempting to fetch value "
          "instead of handling error Internal: failed initializing StreamExecutor for CUDA device ordinal {n}: "
          "Internal: failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error "
          "encountered\n")


def test_gpu_index_from_the_cuda_device_ordinal_of_a_context_error(tmp_path):
    rc = _rc(tmp_path, {"train.out": TF_CTX.format(n=2)})
    assert rc["category"] == "gpu_memory_error" and rc["gpu_index"] == 2
    assert rc["identified_by"]["gpu_index"].startswith("train.out:1")


def test_two_device_ordinals_name_neither(tmp_path):
    rc = _rc(tmp_path, {"train.out": TF_CTX.format(n=2) + TF_CTX.format(n=5)})
    assert rc["category"] == "gpu_memory_error" and rc["gpu_index"] is None
