"""An invalid-device error on a node that lists fewer GPUs than the job was given or its siblings
list (a GPU gone from the node), and the controls where the count is complete.

Fixtures: nvidia-smi tables and job logs in the shapes the tools print them (a table typed through
``ssh`` from a login node, Slurm job headers, a torch traceback); hosts, paths and ids are ours.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from tests.diagnose.files import write_tree

BUSES = ("1B", "43", "52", "9D", "C3", "D1", "DA", "E5")


def _table(gpus: int, prompt: str = "[kai@login2 ~]$ ssh hx-c04 nvidia-smi\n") -> str:
    rows = "".join(
        f"|   {i}  NVIDIA H100 80GB HBM3          On  |   00000000:{BUSES[i]}:00.0 Off |                    0 |\n"
        "| N/A   31C    P0             70W /  700W |       1MiB /  81559MiB |      0%      Default |\n"
        "|                                         |                        |             Disabled |\n"
        "+-----------------------------------------+------------------------+----------------------+\n"
        for i in range(gpus))
    return (prompt + "Tue Jan 14 09:12:44 2025\n"
            "+-----------------------------------------------------------------------------------------+\n"
            "| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |\n"
            "|-----------------------------------------+------------------------+----------------------+\n"
            "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
            "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n"
            "|                                         |                        |               MIG M. |\n"
            "|=========================================+========================+======================|\n"
            + rows + "[kai@login2 ~]$ exit\n")


def _job(gres: int | None = 8) -> str:
    header = "#!/bin/bash\n#SBATCH -J pretrain-7b\n" + (f"#SBATCH --gres=gpu:{gres}\n" if gres else "")
    return (header + "#SBATCH -N 1\n"
            "Traceback (most recent call last):\n"
            "  File \"/work/kai/pretrain.py\", line 51, in <module>\n"
            "    torch.cuda.set_device(local_rank)\n"
            "RuntimeError: CUDA error: invalid device ordinal\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
            "might be incorrect.\n")



def _short(d) -> list:
    return [f for f in d.findings if f.id.startswith("short-node")]


def test_invalid_device_on_a_node_listing_fewer_gpus_than_requested_is_a_lost_gpu(tmp_path):
    d = diagnose([write_tree(tmp_path, {"slurm-88121.out": _job(8), "smi.txt": _table(7)})])
    root = d.root_cause
    assert (d.interruption, root.category, root.host) == ("hard", "gpu_fell_off_bus", "hx-c04")
    assert "lists 7 GPU(s) where the job was given 8 ('#SBATCH --gres=gpu:8')" in root.title


def test_a_sibling_listing_more_gpus_sets_the_count(tmp_path):
    files = {"slurm-88121.out": _job(None), "hx-c04/smi.txt": _table(3),
             "hx-c05/smi.txt": _table(4, prompt="[kai@login2 ~]$ ssh hx-c05 nvidia-smi\n")}
    d = diagnose([write_tree(tmp_path, files)])
    assert (d.root_cause.category, d.root_cause.host) == ("gpu_fell_off_bus", "hx-c04")
    assert "its sibling nodes list 4" in d.root_cause.title


def test_invalid_device_on_a_complete_node_stays_the_code(tmp_path):
    d = diagnose([write_tree(tmp_path, {"slurm-88121.out": _job(8), "smi.txt": _table(8)})])
    assert not _short(d) and (d.interruption, d.category) == ("soft", "application_error")


def test_no_listing_or_no_error_is_no_lost_gpu(tmp_path):
    alone = diagnose([write_tree(tmp_path / "a", {"slurm-88121.out": _job(8)})])
    assert not _short(alone) and alone.category == "application_error"  # nothing to count
    quiet = diagnose([write_tree(tmp_path / "b", {"slurm-88121.out": _job(8).split("Traceback")[0], "smi.txt": _table(7)})])
    assert not _short(quiet)  # a short listing without the error is not this reading
