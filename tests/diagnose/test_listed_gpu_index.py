"""A GPU the kernel names by PCI id gets its nvidia-smi index from the host's ``nvidia-smi -L``.

The Xid line names a GPU by PCI id (``NVRM: Xid (PCI:0000:ca:00): 79``); the operator drains and
resets it by index (``nvidia-smi -i 3``). ``nvidia-smi -L`` lists index and UUID but no PCI id, and
the driver's ``NVRM: GPU at PCI:0000:ca:00: GPU-<uuid>`` line ties that PCI id to the UUID: the UUID
joins the two, on the same host only. Hosts, UUIDs, times and bus ids are invented; the lines keep
the tools' layouts.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from tests.diagnose.files import write_tree

FAILED = "GPU-7e21c0d4-5a9b-4c3e-8f16-2b0d94a6c571"
OTHER = "GPU-0c93b5e2-d417-4a6f-9e20-61f8a3b7d402"
SPARE = "GPU-a4f06d19-3e82-4b57-b0c1-d95e27f4a836"
KERNEL = "".join(f"2026-11-20T03:41:17+00:00 trn-node-c4 kernel: NVRM: {message}\n" for message in (
    "GPU at PCI:0000:ca:00: {uuid}",
    "GPU Board Serial Number: 1654922017385",
    "Xid (PCI:0000:ca:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "GPU 0000:ca:00.0: GPU has fallen off the bus.",
))


def _listing(host: str, uuids: list[str], mig: bool = False) -> str:
    """``nvidia-smi -L`` typed at ``host``'s prompt: one line per GPU (MIG devices indented under it)."""
    lines = [f"root@{host}:~# nvidia-smi -L"]
    for index, uuid in enumerate(uuids):
        lines.append(f"GPU {index}: NVIDIA H100 80GB HBM3 (UUID: {uuid})")
        if mig:
            lines += [f"  MIG 3g.40gb     Device  {d}: (UUID: MIG-5d0e8a72-91c4-5f3b-a6d2-0b7e4c19f{index}{d}8)"
                      for d in (0, 1)]
    return "\n".join(lines) + "\n"


def _root(tmp_path, files: dict[str, str]) -> dict:
    write_tree(tmp_path, files)
    return diagnose([tmp_path]).to_dict()["root_cause"]


ORDER = [OTHER, SPARE, OTHER.replace("0c93", "1d04"), FAILED]  # the failed GPU is index 3


def test_the_listing_pasted_after_the_kernel_log_gives_the_index(tmp_path):
    root = _root(tmp_path, {"journal.txt": KERNEL.format(uuid=FAILED) + _listing("trn-node-c4", ORDER, mig=True)})
    assert (root["category"], root["host"], root["gpu_pci"]) == ("gpu_fell_off_bus", "trn-node-c4", "0000:ca:00.0")
    assert root["gpu_index"] == 3


def test_the_listing_in_its_own_file_gives_the_index(tmp_path):
    root = _root(tmp_path, {"journal.txt": KERNEL.format(uuid=FAILED), "gpus.txt": _listing("trn-node-c4", ORDER)})
    assert (root["host"], root["gpu_pci"], root["gpu_index"]) == ("trn-node-c4", "0000:ca:00.0", 3)


def test_another_hosts_listing_gives_no_index(tmp_path):
    root = _root(tmp_path, {"journal.txt": KERNEL.format(uuid=FAILED), "gpus.txt": _listing("trn-node-c5", ORDER)})
    assert (root["host"], root["gpu_pci"], root["gpu_index"]) == ("trn-node-c4", "0000:ca:00.0", None)


def test_a_uuid_the_listing_does_not_hold_gives_no_index(tmp_path):
    root = _root(tmp_path, {"journal.txt": KERNEL.format(uuid=FAILED),
                            "gpus.txt": _listing("trn-node-c4", [OTHER, SPARE])})
    assert (root["gpu_pci"], root["gpu_index"]) == ("0000:ca:00.0", None)


def test_two_listings_that_disagree_give_no_index(tmp_path):
    root = _root(tmp_path, {"journal.txt": KERNEL.format(uuid=FAILED),
                            "before.txt": _listing("trn-node-c4", ORDER),
                            "after.txt": _listing("trn-node-c4", [OTHER, FAILED, SPARE])})
    assert (root["gpu_pci"], root["gpu_index"]) == ("0000:ca:00.0", None)


PLUGIN = ("I1120 03:41:17.204118       1 health.go:151] XidCriticalError: Xid=79 on Device={uuid}, "
          "the device will go unhealthy.\n")


def test_a_gpu_named_by_uuid_alone_gets_the_listed_index(tmp_path):
    session = "$ kubectl -n kube-system logs nvidia-device-plugin-daemonset-x7k2p\n" + PLUGIN.format(uuid=FAILED)
    root = _root(tmp_path, {"plugin.txt": session + _listing("trn-node-c4", ORDER).replace("root@trn-node-c4:~#", "$")})
    assert (root["category"], root["gpu_uuid"], root["gpu_index"]) == ("gpu_fell_off_bus", FAILED, 3)


def test_a_uuid_named_gpu_takes_no_index_from_another_hosts_listing(tmp_path):
    root = _root(tmp_path, {"plugin.txt": PLUGIN.format(uuid=FAILED), "gpus.txt": _listing("trn-node-c5", ORDER)})
    assert (root["category"], root["gpu_index"]) == ("gpu_fell_off_bus", None)


def test_the_listing_pasted_into_the_job_log_gives_the_index(tmp_path):
    job = ("2026-11-20 03:41:18,502 - train.py:214 - ERROR - step 18211 failed\n"
           "RuntimeError: CUDA error: unspecified launch failure\n")
    root = _root(tmp_path, {"journal.txt": KERNEL.format(uuid=FAILED),
                            "train.log": job + _listing("trn-node-c4", ORDER)})
    assert (root["host"], root["gpu_pci"], root["gpu_index"]) == ("trn-node-c4", "0000:ca:00.0", 3)
