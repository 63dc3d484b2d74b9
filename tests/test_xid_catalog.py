"""The Xid catalog data file: agrees with the reference sources, keeps provenance and conflicts."""

from __future__ import annotations

import csv
import io

import pytest

from gpulib.catalog import build, load_catalog, xid_info
from tests.conftest import REPO, SHARED

SHARED_REFERENCE = SHARED / "reference"
VOCABULARY = {"gpu_fell_off_bus", "gpu_memory_error", "gpu_firmware_error", "nvlink_error", "thermal_throttling",
              "power_fault", "cuda_oom", "host_oom", "network_fabric", "driver_mismatch", "application_error",
              "data_pipeline_stall", "node_lost", "none"}


@pytest.fixture(scope="module")
def reference():
    """The reference sources shipped in the package (the build's default: nothing outside the repo)."""
    return build.REFERENCE_DIR


def test_data_file_is_what_the_build_makes_from_the_references(reference, capsys):
    assert build.main(["--check", "--reference", str(reference)]) == 0, capsys.readouterr().err
    assert build.main(["--check"]) == 0, capsys.readouterr().err


def test_shipped_references_are_the_shared_ones():
    """The package's copy of the reference sources is the shared reference, byte for byte (the Xid
    files) and section 3 of health-checks-and-xid.md (the only part the build reads)."""
    if not (SHARED_REFERENCE / "xid").is_dir():
        pytest.skip(f"shared reference not found at {SHARED_REFERENCE}")
    for name in ("nvidia_xid_catalog_via_gpud.tsv", "xid_crossref.csv"):
        assert (build.REFERENCE_DIR / "xid" / name).read_bytes() == (SHARED_REFERENCE / "xid" / name).read_bytes()
    shared = build.read_reference_table(SHARED_REFERENCE / "health-checks-and-xid.md")
    assert build.read_reference_table(build.REFERENCE_DIR / "health-checks-and-xid.md") == shared


def test_every_nvidia_catalog_code_is_present_with_nvidia_names_and_buckets(reference):
    with open(reference / "xid" / "nvidia_xid_catalog_via_gpud.tsv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == 172
    for row in rows:
        info = xid_info(int(row["code"]))
        assert info is not None, row["code"]
        assert info.name == row["mnemonic"]
        assert info.nvidia_immediate == row["immediate_resolution"]
        assert info.nvidia_investigatory == row["investigatory_resolution"]
        assert info.sources[0].startswith("CAT (NVIDIA Xid catalog")


def test_every_crossref_opinion_is_kept_as_a_source(reference):
    text = (reference / "xid" / "xid_crossref.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO("".join(line + "\n" for line in text.splitlines()
                                                   if not line.startswith("#")))))
    assert len(rows) == 37
    for row in rows:
        info = xid_info(int(row["xid"]))
        joined = " | ".join(info.sources)
        if row["dcgm_health_result"]:
            assert f"DCGM (DcgmHealthWatch.cpp @72fa3fe): {row['dcgm_health_result']}" in joined
        if row["gpud_event_type"]:
            assert f"GPUD (gpud xid.go @4a8de33): {row['gpud_event_type']}" in joined
        if row["eks_node_condition"] == "True":
            assert "EKS" in joined
        if row["k8s_device_plugin_app_error"] == "True":
            assert "K8S" in joined


def test_design_categories_and_hard_codes():
    expected = {79: "gpu_fell_off_bus", 48: "gpu_memory_error", 63: "gpu_memory_error", 64: "gpu_memory_error",
                94: "gpu_memory_error", 95: "gpu_memory_error", 119: "gpu_firmware_error",
                120: "gpu_firmware_error", 74: "nvlink_error", 149: "nvlink_error", 13: "application_error",
                31: "application_error", 43: "application_error", 154: "none"}
    for code, category in expected.items():
        assert xid_info(code).category == category, code
    for code in (79, 48, 64, 74, 95, 119, 120, 140):
        assert xid_info(code).interruption == "hard", code
    assert xid_info(13).interruption == "soft"
    assert xid_info(154).interruption == "info"
    assert "power-cycle" in xid_info(79).action.lower()
    assert "recovery action" in xid_info(154).action


def test_disagreements_between_sources_are_visible():
    assert "DCGM" in xid_info(56).conflicts and "Unused" in xid_info(56).conflicts  # label conflict
    assert "EKS" in xid_info(63).conflicts  # ignore per NVIDIA, replace-instance per EKS
    assert "GPUD" in xid_info(94).conflicts
    assert "GCM" in xid_info(109).conflicts  # non-critical per GCM, RESET_GPU per NVIDIA
    assert "Reserved" in xid_info(136).conflicts or "stale" in xid_info(136).conflicts
    assert xid_info(79).conflicts is None and xid_info(48).conflicts is None


def test_every_row_uses_the_vocabulary_and_has_an_action():
    table = load_catalog()
    assert len(table) >= 172
    for info in table.values():
        assert info.interruption in {"hard", "soft", "info"}, info.code
        assert info.category in VOCABULARY, info.code
        assert info.action and info.sources and info.category_basis, info.code


def test_overrides_each_carry_a_reason_and_a_valid_value():
    overrides = build.read_overrides()
    assert overrides
    for code, fields in overrides.items():
        for field, (value, reason) in fields.items():
            assert field in {"interruption", "category"}
            assert value in VOCABULARY | {"hard", "soft", "info"}
            assert len(reason) > 20, code
            assert getattr(xid_info(code), field) == value


def test_unknown_codes_and_junk_give_none():
    assert xid_info(99999) is None
    assert xid_info("not a code") is None
    assert xid_info(None) is None
    assert xid_info("79").code == 79


def test_data_file_ships_as_package_data():
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"catalog/*.tsv"' in pyproject
    assert (REPO / "gpulib" / "catalog" / "xid.tsv").is_file()
