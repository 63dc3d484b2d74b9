"""A GPU with fewer active NVLinks than its peers (``nvidia-smi nvlink -s``), and the controls.

Fixtures are ``nvidia-smi nvlink -s`` listings as the tool prints them (A100 SXM: 12 links of
25 GB/s), after a shell prompt as engineers paste them; hosts and UUIDs are ours.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose


def _listing(inactive: dict[int, set[int]], gpus: int = 4, links: int = 12) -> str:
    lines = ["ops@hgx-b14:~$ nvidia-smi nvlink -s"]
    for g in range(gpus):
        lines.append(f"GPU {g}: NVIDIA A100-SXM4-80GB (UUID: GPU-5a1c{g:04d}-0b7e-4f21-9d3a-7c2e61f0a{g:03d})")
        lines += [f"\t Link {n}: {'<inactive>' if n in inactive.get(g, set()) else '25 GB/s'}" for n in range(links)]
    return "\n".join(lines) + "\n"


def _run(tmp_path, text: str):
    (tmp_path / "nvlink.txt").write_text(text)
    return diagnose([tmp_path])


def _found(d) -> list:
    return [f for f in d.findings if f.id.startswith("nvlink-inactive")]


def test_one_gpu_with_inactive_links_is_an_nvlink_fault_on_that_gpu(tmp_path):
    d = _run(tmp_path, _listing({2: {4, 9}}))
    root = d.root_cause
    assert (d.interruption, root.category, root.host, root.gpu_index) == ("hard", "nvlink_error", "hgx-b14", 2)
    assert "10 active NVLinks, its peers 12" in root.title
    assert [e.text for e in root.quotes[1:]] == ["Link 4: <inactive>", "Link 9: <inactive>"]
    assert root.quotes[1].line == 1 + 2 * 13 + 1 + 5  # prompt, two GPU blocks, GPU 2's header, links 0-4


def test_all_links_inactive_on_one_gpu_is_the_same_fault(tmp_path):
    text = _listing({}, gpus=3).replace(
        "".join(f"\t Link {n}: 25 GB/s\n" for n in range(12)), "", 1)  # GPU 0 lists no links ...
    text = text.replace("\nGPU 1:", "\n\tNVML: Unable to retrieve NVLink information as all links are inactive\nGPU 1:", 1)
    found = _found(_run(tmp_path, text))
    assert [(f.gpu_index, f.category) for f in found] == [(0, "nvlink_error")]


def test_same_links_inactive_on_every_gpu_is_the_wiring_not_a_fault(tmp_path):
    d = _run(tmp_path, _listing({g: {10, 11} for g in range(4)}))
    assert not _found(d) and d.interruption == "none"


def test_all_links_up_a_lone_gpu_and_a_board_without_nvlink_are_no_finding(tmp_path):
    assert not _found(_run(tmp_path, _listing({})))
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "nvlink.txt").write_text(_listing({0: {3}}, gpus=1))
    assert not _found(diagnose([lone]))  # nothing to compare it with
    pcie = tmp_path / "pcie"
    pcie.mkdir()
    (pcie / "nvlink.txt").write_text("GPU 0: NVIDIA L40S (UUID: GPU-0d9e11aa-3b4c-4d5e-8f60-718293a4b5c6)\n"
                                     "\tDevice does not have or support Nvlink\n"
                                     "GPU 1: NVIDIA L40S (UUID: GPU-0d9e11aa-3b4c-4d5e-8f60-718293a4b5c7)\n"
                                     "\tDevice does not have or support Nvlink\n")
    assert not _found(diagnose([pcie]))
