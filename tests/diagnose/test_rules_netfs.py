"""File-system errors on a network file system (:mod:`gpulib.diagnose.rules.netfs`).

Lines are written in the layouts of Python tracebacks, ``mount``, ``/proc/mounts`` and ``df -T``
with invented hosts, paths and values. Negative controls: a missing file on a local disk, a missing
file on NFS outside any checkpoint step, and an unrelated error beside an NFS mount.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

MOUNT = "fs07.lab:/vol/train on /shared/team type nfs (rw,relatime,vers=3,rsize=65536,wsize=65536,hard,proto=tcp)\n"
PROC_MOUNTS = "gcsfuse-ckpt /gcs/ckpt fuse.gcsfuse rw,nosuid,nodev,relatime,user_id=0,group_id=0 0 0\n"
DF_T = ("Filesystem             Type   1K-blocks       Used   Available Use% Mounted on\n"
        "/dev/nvme0n1p2         ext4   920284832  112345678  761234567  13% /\n"
        "10.9.1.5@o2ib:/proj    lustre 9876543210 4567890123 5308653087  47% /lus/proj\n")
DCP_SAVE = """[rank12]: Traceback (most recent call last):
[rank12]:   File "/opt/train/pretrain.py", line 311, in <module>
[rank12]:     dcp.save(state, checkpoint_id=out_dir)
[rank12]:   File "/usr/lib/python3/site-packages/torch/distributed/checkpoint/filesystem.py", line 517, in _write_files
[rank12]:     with open(path, "wb") as stream:
[rank12]: FileNotFoundError: [Errno 2] No such file or directory: '/shared/team/ckpt/run7/step_4000/__12_0.distcp'
"""


def _run(tmp_path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return diagnose([tmp_path]).to_dict()


def _answer(doc: dict) -> tuple:
    return doc["verdict"]["interruption"], doc["root_cause"]["category"]


def test_a_missing_file_of_a_checkpoint_on_nfs_is_the_storage(tmp_path):
    doc = _run(tmp_path, {"train-rank12.log": DCP_SAVE, "mounts.txt": MOUNT})
    assert _answer(doc) == ("soft", "data_pipeline_stall")
    assert doc["root_cause"]["finding"].startswith("netfs-error")
    assert any("actimeo=0" in a for f in doc["findings"] if f["id"].startswith("netfs") for a in f["actions"])


def test_an_io_error_on_a_lustre_path_from_df_t_is_the_storage(tmp_path):
    log = "OSError: [Errno 5] Input/output error: '/lus/proj/webdata/shard_0192.tar'\n"
    doc = _run(tmp_path, {"worker.log": log, "df-T.txt": DF_T})
    assert _answer(doc) == ("soft", "data_pipeline_stall")


def test_a_lost_fuse_server_is_the_storage_wherever_it_is(tmp_path):
    log = "OSError: [Errno 107] Transport endpoint is not connected: '/gcs/ckpt/run3/latest'\n"
    for files in ({"worker.log": log}, {"worker.log": log, "proc-mounts.txt": PROC_MOUNTS}):
        assert _answer(_run(tmp_path, files)) == ("soft", "data_pipeline_stall"), files


def test_a_missing_file_on_a_local_disk_stays_the_jobs_error(tmp_path):
    """Negative control: the NFS mount is elsewhere; a wrong path in the config is the job's."""
    local = DCP_SAVE.replace("/shared/team/ckpt/run7", "/home/kim/ckpt/run7")
    doc = _run(tmp_path, {"train-rank12.log": local, "mounts.txt": MOUNT})
    assert _answer(doc) == ("soft", "application_error")
    assert not any(f["id"].startswith("netfs") for f in doc["findings"])


def test_a_missing_file_on_nfs_outside_a_checkpoint_stays_the_jobs_error(tmp_path):
    """Negative control: a config naming a file that is not there, on shared storage."""
    log = ("Traceback (most recent call last):\n  File \"/opt/train/data.py\", line 40, in build\n"
           "FileNotFoundError: [Errno 2] No such file or directory: '/shared/team/tokenizers/bpe-64k.json'\n")
    doc = _run(tmp_path, {"worker.log": log, "mounts.txt": MOUNT})
    assert _answer(doc) == ("soft", "application_error")


def test_an_unrelated_error_beside_an_nfs_mount_stays_the_jobs_error(tmp_path):
    """Negative control: the mount is listed, the error has nothing to do with it."""
    log = "[rank3]: KeyError: 'decoder.layers.11.mlp.weight' while loading /shared/team/ckpt/run7/step_4000\n"
    doc = _run(tmp_path, {"worker.log": log, "mounts.txt": MOUNT})
    assert _answer(doc) == ("soft", "application_error")
