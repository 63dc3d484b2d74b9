"""A host stated in a framework's start banner: a ``key: value`` field of the line that opens the run
(mmengine/mmcv ``Start running, host: user@node, work_dir: ...``, ``hostname: node``, ``node: node``),
and values in that place that name no node of the job (an address, ``localhost``, a URL, a service's
``host:port``, a peer the line connects to). Own hosts, users, pids and paths."""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose
from gpulib.diagnose.stated_hosts import stated_host

MM_BANNER = ("2026-04-02 09:41:17,204 - mmdet - INFO - Start running, host: kvo@lab-gpu12, "
             "work_dir: /home/kvo/mmdet/work_dirs/faster_rcnn_r50\n")


@pytest.mark.parametrize("text, host", [
    (MM_BANNER, "lab-gpu12"),
    ("2026-04-02 09:41:17 INFO run started | hostname: lab-gpu12 | world_size: 2\n", "lab-gpu12"),
    ("node: lab-gpu12\nworld_size: 8\n", "lab-gpu12"),
    ("2026-04-02 09:41:17,204 - trainer - INFO - host_name=lab-gpu12, pid=4411, cuda=12.1\n", "lab-gpu12"),
    ('{"ts": "2026-04-02T09:41:17Z", "labels": {"host": "lab-gpu12", "job": "docker"}, "line": "x"}\n', "lab-gpu12"),
])
def test_a_start_banners_host_field_names_the_node(text, host):
    assert stated_host(text) == host


@pytest.mark.parametrize("text", [
    MM_BANNER.replace("kvo@lab-gpu12", "0.0.0.0"),
    MM_BANNER.replace("kvo@lab-gpu12", "localhost"),
    "server: host: http://lab-gpu12:8000/v1, model: x\n",
    "db settings, host: pg-main:5432, user: app\n",
    '{"labels": {"host": "127.0.0.1"}, "line": "x"}\n',
    "2026-04-02 09:41:17 WARNING Connecting to host: lab-gpu12 failed, retrying\n",
    "run started, host: kvo@lab-gpu12\nrun started, host: kvo@lab-gpu13\n",  # two nodes: neither
])
def test_values_in_a_banners_host_field_that_name_no_node(text):
    assert stated_host(text) is None


def test_the_oom_kill_of_a_banner_named_machine_names_it(tmp_path):
    """The kernel's OOM report (``dmesg -T``, no host in it) and the trainer's log of the same machine:
    the banner of the log names the node the kill happened on."""
    (tmp_path / "train.log").write_text(
        MM_BANNER
        + "2026-04-02 09:43:05,118 - mmdet - INFO - Epoch [1][50/5000]\tlr: 2.0e-03, time: 1.711, data_time: 0.52, "
          "loss: 1.2\n"
        "Traceback (most recent call last):\n"
        "  File \"/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py\", line 1133, in _try_get_data\n"
        "RuntimeError: DataLoader worker (pid 51207) is killed by signal: Killed. \n")
    (tmp_path / "dmesg-T.txt").write_text(
        "[Thu Apr  2 09:44:31 2026] python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), "
        "order=0, oom_score_adj=0\n"
        "[Thu Apr  2 09:44:31 2026] Out of memory: Killed process 51207 (python) total-vm:18112340kB, "
        "anon-rss:2210944kB, file-rss:0kB, shmem-rss:0kB, UID:1001 pgtables:6120kB oom_score_adj:0\n")
    d = diagnose([tmp_path])
    assert d.category == "host_oom"
    assert d.root_cause.host == "lab-gpu12"
