"""Hardware rules learned from real threads: a link that went down and its echo across the rack, a
power supply too small for its GPUs, a GPU named by index from a sampled CSV, and journals printed in
another locale. Each rule has its negative control.

Lines are in the tools' layouts; hosts, PCI ids, times and values are invented.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.parsers.kernel_prefix import split_prefix
from gpulib.parsers.line_identity import LineReader

RLW = "RLW_RXPIPE Nonfatal XC0 i0 Link 07 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)"
DOWN = "NETIR_LINK_DOWN Fatal XC0 i0 Link 14 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"


def _xid(host: str, pci: str, clock: str, code: int, what: str) -> str:
    return f"{host}: Oct 02 11:20:{clock} {host} kernel: NVRM: Xid (PCI:{pci}): {code}, {what}"


def _run(tmp_path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return diagnose([tmp_path]).to_dict()


def test_the_link_that_went_down_is_the_cause_not_the_echo_printed_before_it(tmp_path):
    lines = [_xid("nv-a03", "0018:01:00", "31", 145, RLW), _xid("nv-a11", "0009:01:00", "31", 145, RLW),
             _xid("nv-a07", "0008:01:00", "31", 149, DOWN), _xid("nv-a02", "0008:01:00", "32", 145, RLW)]
    out = _run(tmp_path, {"pdsh-xid.txt": "\n".join(lines) + "\n"})
    root = out["root_cause"]
    assert (root["category"], root["host"], root["gpu_pci"]) == ("nvlink_error", "nv-a07", "0008:01:00.0")
    echoes = [f for f in out["findings"] if f["title"].startswith("Xid 145")]
    assert len(echoes) == 3 and all(f["caused_by"] == root["finding"] for f in echoes)


def test_non_fatal_link_errors_far_from_a_link_down_stay_causes(tmp_path):
    early = _xid("nv-a03", "0018:01:00", "01", 145, RLW).replace("11:20:", "11:12:")
    lines = [early, _xid("nv-a07", "0008:01:00", "31", 149, DOWN)]
    out = _run(tmp_path, {"pdsh-xid.txt": "\n".join(lines) + "\n"})
    assert (out["root_cause"]["host"], out["root_cause"]["gpu_pci"]) == ("nv-a03", "0018:01:00.0")
    assert all(f["caused_by"] is None for f in out["findings"] if f["title"].startswith("Xid 1"))


def test_non_fatal_link_errors_alone_stay_the_cause(tmp_path):
    out = _run(tmp_path, {"pdsh-xid.txt": "\n".join([_xid("nv-a03", "0018:01:00", "31", 145, RLW),
                                                     _xid("nv-a11", "0009:01:00", "31", 145, RLW)]) + "\n"})
    assert out["root_cause"]["category"] == "nvlink_error" and out["root_cause"]["host"] == "nv-a03"


SESSION = """[ana@ws-7:~]$ sudo dmidecode -t 39 | grep -E 'Location|Max Power'
\tLocation: PSU1
\tMax Power Capacity: {psu} W
[ana@ws-7:~]$ nvidia-smi --query-gpu=index,name,power.limit --format=csv
index, name, power.limit [W]
0, NVIDIA GeForce RTX 4090, 450.00 W
1, NVIDIA GeForce RTX 4090, 450.00 W
"""


def test_a_supply_the_gpu_limits_nearly_use_up_is_the_power_suspect(tmp_path):
    out = _run(tmp_path, {"session.txt": SESSION.format(psu=1000)})
    assert out["verdict"]["interruption"] != "none" and out["verdict"]["category"] == "power_fault"
    (psu,) = [f for f in out["findings"] if f["id"].startswith("psu-undersized")]
    assert psu["host"] == "ws-7" and "90%" in psu["title"]


def test_a_supply_with_headroom_is_not_blamed(tmp_path):
    out = _run(tmp_path, {"session.txt": SESSION.format(psu=1600)})
    assert not [f for f in out["findings"] if f["id"].startswith("psu-undersized")]
    assert out["verdict"]["interruption"] == "none"


def test_redundant_supplies_count_without_the_spare(tmp_path):
    two = SESSION.format(psu=1000).replace("\tMax Power Capacity: 1000 W\n",
                                           "\tMax Power Capacity: 1000 W\n\tMax Power Capacity: 1000 W\n")
    out = _run(tmp_path, {"session.txt": two})
    assert [f for f in out["findings"] if f["id"].startswith("psu-undersized")]  # 1+1: one supply carries all


CSV = """timestamp, index, pci.bus_id, temperature.gpu, power.draw [W]
2026/05/04 09:00:01.101, 0, 00000000:3B:00.0, 70, 250.10 W
2026/05/04 09:00:01.101, 1, 00000000:5E:00.0, 72, 251.30 W
2026/05/04 09:01:01.105, 0, 00000000:3B:00.0, 71, 249.80 W
2026/05/04 09:01:01.105, 1, 00000000:5E:00.0, 72, 252.00 W
"""


def test_a_sampled_query_csv_names_the_lost_gpu_by_index(tmp_path):
    out = _run(tmp_path, {"gpu-log.csv": CSV, "terminal.txt": "u@rig-2:~$ nvidia-smi\nUnable to determine the "
                                                              "device handle for GPU 0000:5E:00.0: Unknown Error\n"})
    root = out["root_cause"]
    assert (root["category"], root["gpu_pci"], root["gpu_index"]) == ("gpu_fell_off_bus", "0000:5e:00.0", 1)


def test_a_gpu_absent_from_the_samples_gets_no_index(tmp_path):
    out = _run(tmp_path, {"gpu-log.csv": CSV, "terminal.txt": "u@rig-2:~$ nvidia-smi\nUnable to determine the "
                                                              "device handle for GPU 0000:AF:00.0: Unknown Error\n"})
    assert (out["root_cause"]["gpu_pci"], out["root_cause"]["gpu_index"]) == ("0000:af:00.0", None)


def test_journal_months_in_other_locales():
    for line, month in (("kwi 15 07:56:59 stacja kernel: NVRM: Xid (PCI:0000:07:00): 38, x", 4),
                        ("Mär  3 10:11:12 knoten1 kernel: NVRM: x", 3), ("июл 27 14:08:03 lap kernel: x", 7),
                        ("août  2 01:02:03 poste kernel: x", 8), ("dic 30 23:59:59 nodo kernel: x", 12)):
        p = split_prefix(line)
        assert (p.clock, p.month, p.message[:1]) == ("syslog", month, line.split("kernel: ", 1)[1][:1]), line
    assert split_prefix("Epoch 12 10:11:12 loss 0.3").clock == "none"  # a word that is no month
    assert split_prefix("Error 12 10:11:12 something").clock == "none"


def test_a_localised_journal_names_its_host(tmp_path):
    out = _run(tmp_path, {"journalctl-k.txt": "kwi 15 07:56:59 stacja-2 kernel: NVRM: Xid (PCI:0000:07:00): 79, "
                                              "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"})
    assert (out["root_cause"]["host"], out["root_cause"]["category"]) == ("stacja-2", "gpu_fell_off_bus")


def test_nixos_prompt_names_the_host():
    reader = LineReader(tz=None)
    assert reader.read("[ana@ws-7:~]$ nvidia-smi").command and reader.session_host == "ws-7"
    assert not reader.read("[12:01:02] [rank0]: step 10").command


CONTAINED = ("E0905 17:34:36.549117 4262 gpu_cudamallocasync_allocator.cc:414] Failed to free: CUDA_ERROR_CONTAINED: "
             "Invalid access of peer GPU memory over nvlink or a hardware error\n")


def test_one_folder_per_node_names_the_host_of_a_job_log_that_names_none(tmp_path):
    for node in ("gb-n04", "gb-n11"):
        (tmp_path / node).mkdir()
        (tmp_path / node / "task.log").write_text("I0905 17:19:31.100000 4262 train.py:311] step 65069 loss=2.08\n")
    (tmp_path / "gb-n04" / "task.log").write_text(CONTAINED)
    out = diagnose([tmp_path]).to_dict()
    assert (out["root_cause"]["category"], out["root_cause"]["host"]) == ("nvlink_error", "gb-n04")
    assert {i["host"] for i in out["inputs"]} == {"gb-n04", "gb-n11"}


def test_a_job_log_alone_in_a_folder_or_under_logs_keeps_no_host(tmp_path):
    (tmp_path / "gb-n04").mkdir()
    (tmp_path / "gb-n04" / "task.log").write_text(CONTAINED)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "other.log").write_text("I0905 17:19:31.100000 4262 train.py:311] step 65069 loss=2.08\n")
    out = diagnose([tmp_path]).to_dict()
    assert out["root_cause"]["category"] == "nvlink_error" and out["root_cause"]["host"] is None


def test_within_one_second_the_node_whose_clock_ran_first_is_the_culprit(tmp_path):
    for node, usec in (("gb-a", "900211"), ("gb-b", "100734"), ("gb-c", "455012")):
        (tmp_path / node).mkdir()
        (tmp_path / node / "task.log").write_text(CONTAINED.replace("549117", usec))
    out = diagnose([tmp_path]).to_dict()
    root = out["root_cause"]
    assert (root["host"], root["time"][:19]) == ("gb-b", f"{root['time'][:4]}-09-05T17:34:36")


LINKS = """index, pci.bus_id, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max
0, 00000000:01:00.0, 3, 3, 16, 16
1, 00000000:03:00.0, 1, 3, 1, 16
"""
STEPS = "".join(f" {i}: 0.91, 1.02 avg loss, 0.001000 rate, 4.1 seconds, {i * 64} images\n" for i in range(310, 316))


def test_a_job_log_that_stops_beside_a_gpu_on_an_x1_link_is_unknown_not_none(tmp_path):
    out = _run(tmp_path, {"train_output.txt": STEPS, "pcie.csv": LINKS})
    assert (out["verdict"]["interruption"], out["verdict"]["category"]) == ("unknown", "gpu_fell_off_bus")


def test_a_run_that_ends_normally_on_the_same_links_is_none(tmp_path):
    out = _run(tmp_path, {"train_output.txt": STEPS + "Training completed. Saved weights to backup/final.weights\n",
                          "pcie.csv": LINKS})
    assert out["verdict"]["interruption"] == "none"
