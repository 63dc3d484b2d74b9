"""Which node a job console's lines without a host of their own belong to.

Lines are written in the launchers' and the CUDA runtime's layouts with invented hosts.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

ECC = ("Accelerator Fatal Error: call to cuCtxCreate returned error 214 (CUDA_ERROR_ECC_UNCORRECTABLE): "
       "uncorrectable ECC error encountered")


def test_a_console_that_names_one_node_places_its_hostless_lines_there(tmp_path):
    (tmp_path / "slurm-771.out").write_text(f"+ hostname\ngpu-z-14\n{ECC}\n"
                                            "srun: error: gpu-z-14: task 0: Exited with exit code 1\n")
    doc = diagnose([tmp_path]).to_dict()
    assert (doc["root_cause"]["category"], doc["root_cause"]["host"]) == ("gpu_memory_error", "gpu-z-14")


def test_a_console_that_names_two_nodes_places_nothing(tmp_path):
    (tmp_path / "slurm-772.out").write_text(f"{ECC}\nsrun: error: gpu-z-14: task 0: Exited with exit code 1\n"
                                            "srun: error: gpu-z-15: task 8: Exited with exit code 1\n")
    doc = diagnose([tmp_path]).to_dict()
    assert doc["root_cause"]["category"] == "gpu_memory_error" and doc["root_cause"]["host"] is None


def test_the_node_srun_names_does_not_depend_on_the_file_name(tmp_path):
    """The same console saved as ``notes.txt`` (not read as a job log): srun's line still names the node."""
    (tmp_path / "notes.txt").write_text(f"{ECC}\nsrun: error: gpu-z-14: task 0: Exited with exit code 1\n")
    doc = diagnose([tmp_path]).to_dict()
    assert (doc["root_cause"]["category"], doc["root_cause"]["host"]) == ("gpu_memory_error", "gpu-z-14")
