"""Evidence as tables: path resolution and the topology matrix, from files written here."""

from __future__ import annotations

import pytest

from gpulib.notebook import steps as checks
from gpulib.notebook import tables as data
from gpulib import resources
from gpulib.errors import InputError
from tests.conftest import locked_folder

TOPO = """\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tSYS\tPXB\t0-55\t0\t\tN/A
GPU1\tNV18\t X \tNV18\tPXB\t0-55\t0\t\tN/A
GPU2\tSYS\tNV18\t X \tSYS\t56-111\t1\t\tN/A
NIC0\tPXB\tPXB\tSYS\t X \t\t\t\t

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NV#  = Bonded set of # NVLinks
"""


def test_topology_matrix_and_missing_nvlink_pair(tmp_path):
    node = tmp_path / "gpu-node-07"
    node.mkdir()
    (node / "topo-m.txt").write_text(TOPO)
    ev = data.open_evidence(str(tmp_path))
    matrix = ev.topology()
    assert list(matrix.index) == ["GPU0", "GPU1", "GPU2"] and matrix.loc["GPU0", "GPU2"] == "SYS"
    [hit] = checks.topology_findings(matrix, host="gpu-node-07")
    assert hit["category"] == "nvlink_error" and "GPU0-GPU2 (SYS)" in hit["title"]


def test_evidence_resolves_relative_to_the_repo_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert data.resolve_evidence(data.DEFAULT_EVIDENCE) == resources.data_root() / data.DEFAULT_EVIDENCE
    with pytest.raises(InputError, match="no evidence given"):
        data.resolve_evidence("  ")


def test_unreadable_folder_is_a_clear_error(tmp_path, run_without_root_read):
    locked = tmp_path / "locked"
    code = (
        "from gpulib.notebook import tables as data; from gpulib.errors import InputError\n"
        f"try:\n    data.open_evidence({str(locked)!r})\nexcept InputError as exc:\n    print(exc)\n"
    )
    with locked_folder(locked, {"dmesg.txt": "x"}):
        done = run_without_root_read(code)
    assert done.returncode == 0, done.stderr
    assert "cannot list" in done.stdout and str(locked) in done.stdout


def test_software_versions_of_a_fresh_capture_of_this_host(tmp_path):
    from importlib.metadata import PackageNotFoundError, version

    from gpulib.collect import collect

    try:
        expected = version("torch")
    except PackageNotFoundError:
        pytest.skip("torch is not installed")
    bundle = collect(tmp_path / "scene")
    versions = data.open_evidence(str(bundle)).software_versions()
    assert versions.loc[0, "torch"] == expected


def test_ranks_without_nccl_init_lines_is_an_empty_table(tmp_path):
    """NCCL_DEBUG=INFO off: version and transport lines but no rank placement."""
    (tmp_path / "train.log").write_text(
        "node-a:1234:1234 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "node-a:1234:1300 [0] NCCL INFO NET/IB : No device found.\n"
        "[rank0]: step 10 loss 2.0\n"
    )
    ranks = data.open_evidence(str(tmp_path)).ranks()
    assert ranks.empty and {"rank", "host", "transport"} <= set(ranks.columns)
