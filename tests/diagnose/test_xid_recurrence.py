"""Xid 94 and Xid 31, read soft by NVIDIA's catalogue ("restart the application"), turn hard only
on what the evidence shows about the GPU (``gpulib.diagnose.recurrence``): the driver's own reset
verdict or a repeat for Xid 94; faults for many processes on one GPU only for Xid 31. Every rule
has its negative controls: one event, one burst, one process, faults on every GPU, one GPU.

``dmesg -T`` lines in the driver's layout (R535); hosts, PIDs, PCI ids and times are invented.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

PROMPT = "root@pq-h07:~# dmesg -T | grep NVRM\n"


def _xid94(when: str, pci: str, reset: str = "RST: No, D-RST: No") -> str:
    return f"[{when}] NVRM: Xid (PCI:0000:{pci}): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). {reset}\n"


def _xid31(when: str, pci: str, pid: int) -> str:
    return (f"[{when}] NVRM: Xid (PCI:0000:{pci}): 31, pid={pid}, name=python3, Ch 00000008, intr 00000000. "
            "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_4 faulted @ 0x7f22_40000000. Fault is of type FAULT_PDE "
            "ACCESS_TYPE_VIRT_READ\n")


def _xid43(when: str, pci: str, pid: int) -> str:
    return f"[{when}] NVRM: Xid (PCI:0000:{pci}): 43, pid={pid}, name=python3, Ch 00000008\n"


def _answer(tmp_path, text: str) -> tuple:
    (tmp_path / "dmesg-T.txt").write_text(PROMPT + text)
    doc = diagnose([tmp_path]).to_dict()
    return doc["verdict"]["category"], doc["verdict"]["interruption"], doc["root_cause"]["gpu_pci"]


# ------------------------------------------------ Xid 94
def test_one_contained_error_whose_line_says_no_reset_stays_soft(tmp_path):
    assert _answer(tmp_path, _xid94("Mon Jun  2 04:11:09 2025", "9a:00")) == ("gpu_memory_error", "soft", "0000:9a:00.0")


def test_a_contained_error_whose_line_asks_for_a_reset_is_hard(tmp_path):
    text = _xid94("Mon Jun  2 04:11:09 2025", "9a:00", "RST: Yes, D-RST: No")
    assert _answer(tmp_path, text) == ("gpu_memory_error", "hard", "0000:9a:00.0")


def test_a_contained_error_repeated_on_one_gpu_hours_apart_is_hard(tmp_path):
    text = _xid94("Mon Jun  2 04:11:09 2025", "9a:00") + _xid94("Mon Jun  2 09:47:30 2025", "9a:00")
    assert _answer(tmp_path, text) == ("gpu_memory_error", "hard", "0000:9a:00.0")


def test_the_lines_of_one_burst_are_one_event_and_stay_soft(tmp_path):
    text = _xid94("Mon Jun  2 04:11:09 2025", "9a:00") * 2
    assert _answer(tmp_path, text)[:2] == ("gpu_memory_error", "soft")


def test_contained_errors_on_two_gpus_once_each_stay_soft(tmp_path):
    text = _xid94("Mon Jun  2 04:11:09 2025", "9a:00") + _xid94("Mon Jun  2 09:47:30 2025", "1b:00")
    assert _answer(tmp_path, text)[:2] == ("gpu_memory_error", "soft")


# ------------------------------------------------ Xid 31
OTHER_GPU_RAN = _xid43("Sat Jun  7 18:20:02 2025", "4e:00", 40112) + _xid43("Sat Jun  7 19:01:44 2025", "4e:00", 40770)


def test_mmu_faults_for_three_processes_on_one_gpu_only_are_the_device(tmp_path):
    faults = "".join(_xid31(f"Sun Jun  8 0{h}:15:3{h} 2025", "c1:00", pid) for h, pid in ((1, 5120), (2, 6344), (4, 9071)))
    assert _answer(tmp_path, OTHER_GPU_RAN + faults) == ("gpu_memory_error", "hard", "0000:c1:00.0")


def test_mmu_faults_of_one_process_stay_the_programs(tmp_path):
    faults = "".join(_xid31(f"Sun Jun  8 0{h}:15:3{h} 2025", "c1:00", 5120) for h in (1, 2, 4))
    assert _answer(tmp_path, OTHER_GPU_RAN + faults)[:2] == ("application_error", "soft")


def test_mmu_faults_on_two_gpus_stay_the_programs(tmp_path):
    faults = "".join(_xid31(f"Sun Jun  8 0{h}:15:3{h} 2025", "c1:00", pid) for h, pid in ((1, 5120), (2, 6344), (4, 9071)))
    faults += _xid31("Sun Jun  8 05:02:11 2025", "4e:00", 9502)
    assert _answer(tmp_path, OTHER_GPU_RAN + faults)[:2] == ("application_error", "soft")


def test_mmu_faults_on_a_node_whose_other_gpus_are_not_seen_stay_the_programs(tmp_path):
    faults = "".join(_xid31(f"Sun Jun  8 0{h}:15:3{h} 2025", "c1:00", pid) for h, pid in ((1, 5120), (2, 6344), (4, 9071)))
    assert _answer(tmp_path, faults)[:2] == ("application_error", "soft")
