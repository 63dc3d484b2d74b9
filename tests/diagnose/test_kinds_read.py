"""Rules read the kinds gathering assigns: power limits from ``nvidia-smi -q``, HCA ports from an
``ibstatus`` paste (two kinds once asked for under names no file ever had)."""

from __future__ import annotations

from pathlib import Path

from gpulib.diagnose import diagnose
from gpulib.diagnose.node_facts import node_configs
from gpulib.evidence import kinds
from gpulib.evidence.gather import gather

SMI_Q_GPU = """GPU 00000000:{bus}:00.0
    Product Name                          : NVIDIA GeForce RTX 4090
    Minor Number                          : {minor}
    GPU Power Readings
        Power Draw                        : 38.20 W
        Current Power Limit               : 450.00 W
        Default Power Limit               : 450.00 W
        Max Power Limit                   : 600.00 W

"""
SMI_Q = ("\n==============NVSMI LOG==============\n\nTimestamp                                 : Tue Mar  3 10:12:44 2026\n"
         "Driver Version                            : 550.54.15\n\nAttached GPUs                             : 2\n"
         + SMI_Q_GPU.format(bus="41", minor=0) + SMI_Q_GPU.format(bus="C1", minor=1))
DMIDECODE = ('[op@rigp3 ~]$ sudo dmidecode -t 39 | grep -E "Location|Max Power"\n'
             "\tLocation: PSU1\n\tMax Power Capacity: {watts} W\n")

IBSTATUS = """Infiniband device 'mlx5_0' port 1 status:
\tdefault gid:\t fe80:0000:0000:0000:0c42:a103:00de:a7f0
\tbase lid:\t 0x2c
\tsm lid:\t\t 0x1
\tstate:\t\t 1: DOWN
\tphys state:\t 2: Polling
\trate:\t\t 10 Gb/sec (4X SDR)
\tlink_layer:\t InfiniBand

Infiniband device 'mlx5_1' port 1 status:
\tdefault gid:\t fe80:0000:0000:0000:0c42:a103:00de:a7f1
\tbase lid:\t 0x2d
\tsm lid:\t\t 0x1
\tstate:\t\t 4: ACTIVE
\tphys state:\t 5: LinkUp
\trate:\t\t 200 Gb/sec (4X HDR)
\tlink_layer:\t InfiniBand
"""


def _node(tmp_path: Path, files: dict[str, str]) -> Path:
    node = tmp_path / "rigp3"
    node.mkdir()
    for name, text in files.items():
        (node / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_power_limits_from_nvidia_smi_q_size_the_supply(tmp_path):
    out = diagnose([_node(tmp_path, {"nvidia-smi-q.txt": SMI_Q, "dmidecode.txt": DMIDECODE.format(watts=1000)})]).to_dict()
    (psu,) = [f for f in out["findings"] if f["id"].startswith("psu-undersized")]
    assert psu["host"] == "rigp3" and "900 W" in psu["title"] and "90%" in psu["title"]


def test_a_supply_with_headroom_over_nvidia_smi_q_limits_is_not_blamed(tmp_path):
    out = diagnose([_node(tmp_path, {"nvidia-smi-q.txt": SMI_Q, "dmidecode.txt": DMIDECODE.format(watts=1600)})]).to_dict()
    assert not [f for f in out["findings"] if f["id"].startswith("psu-undersized")]


def test_an_ibstatus_paste_is_read_as_hca_ports(tmp_path):
    root = _node(tmp_path, {"ibstatus.txt": IBSTATUS})
    inputs = gather([root])
    (ib,) = [f for f in inputs.files if f.kind == kinds.IBSTAT]
    assert [(p.ca, p.state, p.physical_state, p.rate_gbps) for p in ib.records] == [
        ("mlx5_0", "Down", "Polling", 10.0), ("mlx5_1", "Active", "LinkUp", 200.0)]
    (down,) = [f for f in diagnose([root], inputs=inputs).to_dict()["findings"] if f["id"].startswith("ib-port")]
    assert "mlx5_0 port 1 is Down (Polling)" in down["title"] and down["host"] == "rigp3"
    assert (node_configs(inputs)["rigp3"].ib_ports_active, node_configs(inputs)["rigp3"].ib_rate_gbps) == ("1/2", "200")


def _kind(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text)
    return next(f.kind for f in gather([folder]).files if f.path.name == name)


def test_a_markdown_name_makes_a_document_only_when_the_content_is_one(tmp_path):
    """A name is a hint, the content decides: a log saved as ``.md`` is read as a log (its failure
    lines count), notes with a heading or a table stay documentation, a log between fences too."""
    log = "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)\n"
    for name, text, kind in [("a.md", log, kinds.TEXT), ("b.md", "```\n" + log + "```\n", kinds.TEXT),
                             ("c.md", "# Notes\n\n" + log, kinds.DOCUMENTATION),
                             ("d.md", "| GPU | temp |\n|---|---|\n| 0 | 85 C |\n", kinds.DOCUMENTATION),
                             ("e.log", "# Notes\n\n" + log, kinds.TEXT)]:
        folder = tmp_path / name
        folder.mkdir()
        assert _kind(folder, name, text) == kind, name


NCCL_WARN = ("node7:40188:40341 [3] transport/net_ib.cc:1297 NCCL WARN NET/IB : Got completion from peer "
             "10.0.0.8<51533> with error 12, opcode 0, len 0, vendor err 129 (Recv)\n")


def test_a_rank_in_the_file_name_is_taken_only_where_the_content_names_none(tmp_path):
    """``train_rank0.log`` whose own lines say ``[rank3]``: the file name is no evidence of the
    unranked NCCL line's rank. A per-rank file whose lines name no rank, or only its own: the name
    gives it."""
    watchdog = ("[rank{r}]:[E ProcessGroupNCCL.cpp:1182] [Rank {r}] NCCL watchdog thread terminated with exception: "
                "NCCL error: remote process exited\n")
    folders = {"said": ("train_rank0.log", NCCL_WARN + watchdog.format(r=3)), "silent": ("train_rank2.log", NCCL_WARN),
               "agrees": ("train_rank5.log", NCCL_WARN + watchdog.format(r=5))}
    for folder, (name, text) in folders.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text(text)
    ranks = {f.path.name: {s.rank for s in f.signals if s.text.startswith("node7:")}
             for f in gather([tmp_path / folder for folder in folders]).files}
    assert ranks == {"train_rank0.log": {None}, "train_rank2.log": {2}, "train_rank5.log": {5}}
