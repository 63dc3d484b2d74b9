"""One GPU that answers a query in seconds while its peers answer at once, and the controls.

The fixtures are per-GPU timing outputs as engineers paste them (an instrumented NVML sample
program after its shell prompt, a timing script); hosts, bus ids and timings are ours.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose


def _listing(times_ms: list[float], query: str = "calling NVLINK query") -> str:
    lines = ["ana@lab-ws3:~/nvml$ sudo ./example", f"Found {len(times_ms)} devices", "", "Listing devices:"]
    for i, ms in enumerate(times_ms):
        lines += [f"{i}. NVIDIA RTX A5000 [00000000:{0x17 + i * 0x48:02X}:00.0]", f"Start {query}:{7712000 + i}",
                  f"End {query}:{7712000 + i}", f"Elapsed time:{ms:g} ms"]
    return "\n".join(lines + ["All done."]) + "\n"


def _run(tmp_path, text: str):
    (tmp_path / "nvml-timings.txt").write_text(text)
    return diagnose([tmp_path])


def test_slow_nvlink_query_on_one_gpu_blames_its_link(tmp_path):
    d = _run(tmp_path, _listing([6120, 2]))
    root = d.root_cause
    assert (d.interruption, root.category, root.host, root.gpu_index, root.gpu_pci) == (
        "hard", "nvlink_error", "lab-ws3", 0, "0000:17:00.0")
    assert root.quotes[0].text == "Elapsed time:6120 ms" and root.quotes[0].line == 8


def test_slow_other_query_points_at_the_gpu_not_a_link(tmp_path):
    d = _run(tmp_path, _listing([3, 4, 2900, 3], query="calling ECC mode query"))
    assert (d.root_cause.category, d.root_cause.gpu_index) == ("gpu_firmware_error", 2)


def test_every_gpu_equally_slow_is_no_finding(tmp_path):
    d = _run(tmp_path, _listing([2400, 2550, 2300]))  # the machine, not one GPU: e.g. no persistence daemon
    assert not any(f.id.startswith("slow-query") for f in d.findings) and d.interruption == "none"


def test_fast_answers_and_a_lone_gpu_are_no_finding(tmp_path):
    assert not any(f.id.startswith("slow-query") for f in _run(tmp_path, _listing([40, 2])).findings)  # < 1 s
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "t.txt").write_text("GPU 0: NVIDIA L40S\n  nvmlDeviceGetNvLinkState took 7.5 s\n")
    assert not any(f.id.startswith("slow-query") for f in diagnose([lone]).findings)  # nothing to compare with
