"""The GPU of a CUDA error on a machine whose CUDA inventory counts one GPU (numba's ``cuda.detect()``,
the CUDA samples' deviceQuery): the error can be on no other. For a cause that is not a GPU's own
fault, only this inventory names a GPU, and only when the cause is a CUDA call's error. Own paths,
models and UUIDs."""

from __future__ import annotations

from pathlib import Path

from gpulib.diagnose import diagnose
from gpulib.diagnose.neighbourhood import _inventory_index

TIMEOUT = ("kai@bench-ws2:~/proj$ python integrate.py\n"
           "Traceback (most recent call last):\n"
           '  File "/home/kai/proj/integrate.py", line 88, in <module>\n'
           "    host = d_acc.copy_to_host()\n"
           "numba.cuda.cudadrv.driver.CudaAPIError: [702] Call to cuMemcpyDtoH results in CUDA_ERROR_LAUNCH_TIMEOUT\n")
DETECT = ("kai@bench-ws2:~/proj$ python -c \"from numba import cuda; cuda.detect()\"\n"
          "Found {n} CUDA devices\n"
          "{rows}"
          "Summary:\n\t{n}/{n} devices are supported\n")
ROW = ("id {i}    b'NVIDIA GeForce RTX 3060'                              [SUPPORTED]\n"
       "                                    UUID: GPU-7a1c00e2-4d5b-11f0-9c3a-0242ac1200{i:02d}\n"
       "                                Watchdog: Enabled\n")


def _rc(folder: Path, text: str) -> dict:
    (folder / "session.txt").write_text(text)
    return diagnose([folder]).to_dict()["root_cause"] or {}


def test_a_cuda_error_on_a_one_gpu_machine_is_on_that_gpu(tmp_path):
    rc = _rc(tmp_path, TIMEOUT + DETECT.format(n=1, rows=ROW.format(i=0)))
    assert rc["category"] == "application_error" and rc["gpu_index"] == 0 and rc["host"] == "bench-ws2"
    assert rc["identified_by"]["gpu_index"].startswith("session.txt")


def test_a_machine_with_two_gpus_names_neither(tmp_path):
    rc = _rc(tmp_path, TIMEOUT + DETECT.format(n=2, rows=ROW.format(i=0) + ROW.format(i=1)))
    assert rc["gpu_index"] is None


def test_a_python_error_beside_a_one_gpu_inventory_names_no_gpu(tmp_path):
    text = ("kai@bench-ws2:~/proj$ python integrate.py\nTraceback (most recent call last):\n"
            '  File "/home/kai/proj/integrate.py", line 12, in <module>\n    cfg = load(path)\n'
            "KeyError: 'dt'\n")
    rc = _rc(tmp_path, text + DETECT.format(n=1, rows=ROW.format(i=0)))
    assert rc.get("gpu_index") is None


def test_device_query_counts_the_machine_gpus():
    one = 'Detected 1 CUDA Capable device(s)\n\nDevice 0: "NVIDIA RTX A4000"\n  CUDA Driver Version: 12.4\n'
    two = 'Detected 2 CUDA Capable device(s)\n\nDevice 0: "NVIDIA RTX A4000"\nDevice 1: "NVIDIA RTX A4000"\n'
    assert (_inventory_index(one), _inventory_index(two)) == (0, None)
