"""CUDA errors whose class is "the driver is older than the runtime" (the CUDA error table,
gpulib/catalog/cuda_errors.tsv) are driver_mismatch / soft in any wording, and the node whose
``nvidia-smi`` CUDA version is below the job's build is named with both versions (rule cuda_stack).
Controls: an invalid device ordinal or an illegal memory access stays what it is; a new-enough
driver beside an unrelated error changes nothing."""

from __future__ import annotations

import pytest

from gpulib.catalog.cuda_errors import DRIVER_CLASSES, cuda_error_of, load_cuda_errors
from gpulib.catalog.signatures import load_signatures
from gpulib.diagnose import diagnose
from tests.diagnose.files import answer, write_tree


def _diagnose(tmp_path, files: dict[str, str]) -> dict:
    return diagnose([write_tree(tmp_path, files)]).to_dict()


def _banner(driver: str, cuda: str) -> str:
    return (f"+-----------------------------------------------------------------------------+\n"
            f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: {cuda}     |\n"
            f"|-------------------------------+----------------------+----------------------+\n")


def _traceback(error: str) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/srv/seg/train.py", line 41, in <module>\n'
            "    torch.distributed.barrier()\n"
            f"RuntimeError: CUDA error: {error}\n"
            "CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below "
            "might be incorrect.\n")


@pytest.mark.parametrize("error", [
    "the provided PTX was compiled with an unsupported toolchain.",
    "forward compatibility was attempted on non supported HW",
    "system has unsupported display driver / cuda driver combination",
    "CUDA driver version is insufficient for CUDA runtime version",
])
def test_a_driver_class_cuda_error_is_a_driver_mismatch(tmp_path, error):
    log = "(venv) ml@node-q7:~/seg$ torchrun --nproc_per_node=2 train.py\n" + _traceback(error)
    assert answer(_diagnose(tmp_path, {"train.log": log}))[:2] == ("soft", "driver_mismatch")


def test_the_driver_api_name_of_an_unsupported_ptx_reads_the_same(tmp_path):
    log = ("2026-05-11 08:14:02,771 ERROR worker.py:212 -- kernel load failed: "
           "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)\n")
    assert answer(_diagnose(tmp_path, {"svc.log": log}))[:2] == ("soft", "driver_mismatch")


def test_the_node_whose_driver_cuda_is_below_the_build_is_named_with_both_versions(tmp_path):
    log = "(venv) ml@node-q7:~/seg$ torchrun --nproc_per_node=2 train.py\n" + _traceback(
        "the provided PTX was compiled with an unsupported toolchain.")
    versions = ("(venv) ml@node-q7:~$ python -c 'import torch; print(torch.__version__)'\n2.1.2+cu121\n"
                "(venv) ml@node-q3:~$ nvidia-smi | head -3\n" + _banner("535.104.05", "12.2")
                + "(venv) ml@node-q7:~$ nvidia-smi | head -3\n" + _banner("470.199.02", "11.4"))
    got = _diagnose(tmp_path, {"train.log": log, "versions.txt": versions})
    assert answer(got) == ("soft", "driver_mismatch", "node-q7")
    cause = next(f for f in got["findings"] if f["category"] == "driver_mismatch")
    assert "470.199.02" in cause["title"] and "11.4" in cause["title"] and "12.1" in cause["title"]
    assert "node-q3" in cause["title"]  # the contrast: a node whose driver can run it


def test_an_unnamed_printer_takes_the_node_of_the_only_old_driver(tmp_path):
    log = ("2026-05-11T08:14:02.771Z ERROR shard-manager: launcher: Shard complete standard error:\n\n"
           "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.\n")
    smi = "[ops@infer-k2 ~]$ nvidia-smi\n" + _banner("450.80.02", "11.0")
    got = _diagnose(tmp_path, {"launcher.log": log, "smi.txt": smi, "image.txt": "ENV CUDA_VERSION=11.8.0\n"})
    assert answer(got) == ("soft", "driver_mismatch", "infer-k2")
    cause = next(f for f in got["findings"] if f["category"] == "driver_mismatch")
    assert "11.0" in cause["title"] and "11.8" in cause["title"]


@pytest.mark.parametrize("error, category", [
    ("invalid device ordinal", "application_error"),
    ("an illegal memory access was encountered", "application_error"),
])
def test_control_other_cuda_errors_keep_their_class(tmp_path, error, category):
    log = "(venv) ml@node-q7:~/seg$ torchrun --nproc_per_node=2 train.py\n" + _traceback(error)
    smi = "(venv) ml@node-q7:~$ nvidia-smi | head -3\n" + _banner("470.199.02", "11.4")
    got = _diagnose(tmp_path, {"train.log": log, "smi.txt": smi, "v.txt": "torch 2.1.2+cu121\n"})
    assert answer(got)[:2] == ("soft", category)
    assert not any(f["category"] == "driver_mismatch" for f in got["findings"])


def test_control_a_new_enough_driver_beside_an_unrelated_error_changes_nothing(tmp_path):
    log = "(venv) ml@node-q7:~/seg$ torchrun --nproc_per_node=2 train.py\n" + _traceback(
        "device-side assert triggered")
    smi = "(venv) ml@node-q7:~$ nvidia-smi | head -3\n" + _banner("550.54.15", "12.4")
    got = _diagnose(tmp_path, {"train.log": log, "smi.txt": smi, "v.txt": "torch 2.1.2+cu121\n"})
    assert answer(got)[:2] == ("soft", "application_error")
    assert not any("supports CUDA" in f["title"] for f in got["findings"])


def test_every_driver_wording_of_the_table_is_read_by_a_driver_signature():
    """The catalogue reads any file's lines; the table is the list of wordings: they must agree."""
    sigs = {s.id: s for s in load_signatures()}
    readers = [sigs["driver-too-old"], sigs["cuda-driver-mismatch"]]
    for row in load_cuda_errors():
        if row.klass not in DRIVER_CLASSES:
            continue
        for wording in (*row.phrases, *row.names()):
            assert any(s.pattern.search(wording) and any(k in wording for k in s.keywords) for s in readers), wording
            assert cuda_error_of(f"CUDA error: {wording}") == row


def test_unknown_error_is_a_lost_gpu_only_as_the_whole_error():
    assert cuda_error_of("unknown error").klass == "device_lost"
    assert cuda_error_of("kernel launch: unknown error in the plugin") is None


def test_the_same_old_driver_on_two_nodes_names_the_node_that_failed(tmp_path):
    log = "(venv) ml@node-q9:~/seg$ torchrun --nproc_per_node=2 train.py\n" + _traceback(
        "CUDA driver version is insufficient for CUDA runtime version")
    versions = ("(venv) ml@node-q8:~$ nvidia-smi | head -3\n" + _banner("470.199.02", "11.4")
                + "(venv) ml@node-q9:~$ nvidia-smi | head -3\n" + _banner("470.199.02", "11.4")
                + "(venv) ml@node-q9:~$ pip list | grep torch\ntorch                 2.1.2+cu121\n")
    got = _diagnose(tmp_path, {"train.log": log, "versions.txt": versions})
    assert answer(got) == ("soft", "driver_mismatch", "node-q9")
    assert "supports CUDA up to 11.4" in next(f for f in got["findings"] if f["category"] == "driver_mismatch")["title"]


def test_a_user_space_kernel_module_mismatch_makes_no_version_claim(tmp_path):
    log = "(venv) ml@node-q7:~/seg$ torchrun --nproc_per_node=2 train.py\n" + _traceback(
        "system has unsupported display driver / cuda driver combination")
    smi = "(venv) ml@node-q7:~$ nvidia-smi | head -3\n" + _banner("550.54.15", "12.4")
    got = _diagnose(tmp_path, {"train.log": log, "smi.txt": smi, "v.txt": "torch 2.1.2+cu121\n"})
    assert answer(got) == ("soft", "driver_mismatch", "node-q7")
    assert not any("supports CUDA" in f["title"] for f in got["findings"])
