"""The node of a Ray job's error, named by the IP Ray gives the worker that raised it: the nearest
RayTaskError header above the error (Ray nests a call chain outermost first) or the line's own
``(Actor pid=N, ip=A)`` prefix. Own actors, pids and addresses."""

from __future__ import annotations

from pathlib import Path

from gpulib.diagnose import diagnose
from gpulib.diagnose.stated_hosts import ray_task_host

CHAIN = (
    '(driver_loop pid=55120) iter:41 - loss:0.812 - step_s:33.1\n'
    'Traceback (most recent call last):\n'
    '  File "/opt/app/launch.py", line 30, in main\n'
    '    ray.get(coordinator.train.remote(cfg))\n'
    'ray.exceptions.RayTaskError(RuntimeError): ray::Coordinator.train() (pid=55120, ip=172.20.8.3'
    ', actor_id=a1b2c3d4e5f60718293a4b5c01000000, repr=<launch.Coordinator object at 0x7f00aa11bb20>)\n'
    'ray.exceptions.RayTaskError(RuntimeError): ray::ShardWorker.step() (pid=40917, ip=172.20.8.9'
    ', actor_id=0f1e2d3c4b5a69788796a5b401000000, repr=<workers.ShardWorker object at 0x7f11cc22dd30>)\n'
    '  File "/opt/app/workers.py", line 211, in step\n'
    '    loss.backward()\n'
    'RuntimeError: CUDA error: uncorrectable ECC error encountered\n'
)


def _rc(folder: Path, text: str) -> dict:
    (folder / "driver.log").write_text(text)
    return diagnose([folder]).to_dict()["root_cause"] or {}


def test_the_innermost_ray_task_error_names_the_worker_node(tmp_path):
    rc = _rc(tmp_path, CHAIN)
    assert rc["category"] == "gpu_memory_error" and rc["host"] == "172.20.8.9"
    assert rc["identified_by"]["host"].startswith("driver.log:6 ")


def test_a_forwarded_worker_line_names_its_node_by_its_prefix():
    text = "(ShardWorker pid=40917, ip=172.20.8.9) RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    assert ray_task_host(text, 1) == ("172.20.8.9", 1)


def test_the_driver_own_lines_name_no_node(tmp_path):
    rc = _rc(tmp_path, "(driver_loop pid=55120) iter:41 - loss:0.812\nTraceback (most recent call last):\n"
                       '  File "/opt/app/launch.py", line 30, in main\n'
                       "RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    assert rc["category"] == "gpu_memory_error" and rc["host"] is None


def test_a_header_far_above_is_another_error():
    text = CHAIN.splitlines()[5] + "\n" + "x\n" * 30 + "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    assert ray_task_host(text, 32) is None
