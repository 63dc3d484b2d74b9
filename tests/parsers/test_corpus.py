"""The whole recorded corpus against all the GPU/host tool parsers.

1. Every recorded file (nvidia-smi, infiniband, azurehpc, dcgm, prometheus) and every tool file
   in the incident inputs is claimed by exactly one parser here, or is listed with the reason
   it is not (tests/parsers/corpus_files.py), or has its own explicit reader.
2. No two parsers claim the same file, and none claims a kernel log, training log or checkpoint.
3. Every parser survives every corpus file (foreign formats included): problems, never an exception.
"""

from __future__ import annotations

from gpulib.parsers import (
    fuser,
    infiniband,
    ipmi,
    nvsmi_csv,
    nvsmi_dmon,
    nvsmi_nvlink,
    nvsmi_query,
    nvsmi_table,
    nvsmi_topo,
    nvsmi_xml,
    prom_text,
    registry,
)
from gpulib.parsers.base import ParseResult, read_text
from tests.parsers.corpus_files import incident_tool_files, read_head, recorded_files, skipped_reason

PARSERS = (nvsmi_xml, nvsmi_query, nvsmi_table, nvsmi_csv, nvsmi_dmon, nvsmi_topo, nvsmi_nvlink,
           infiniband, ipmi, fuser, prom_text)


def _claims(path):
    head = read_head(path)
    return [m for m in PARSERS if m.looks_like(head)]


def _explicit_reader(path):
    """Files whose kind no content sniffing should claim, with the reader that handles them."""
    if path.parent.name == "exporter-captures":
        return nvsmi_query.parse  # multi-section capture: its -q sections (checked in test_nvsmi_query)
    if path.parent.name == "dcgm":
        return prom_text.parse_counters  # exporter config, not a scrape
    if path.name == "nvidia-smi.nvlink.status.a10":
        return nvsmi_nvlink.parse  # empty output of nvlink -s on an A10
    if path.name == "capabilities_topo_m.txt":
        return nvsmi_topo.parse  # the Windows 591.86 capture holds nvidia-smi's error instead
    return None


def test_every_recorded_file_has_exactly_one_reader(recorded):
    files = recorded_files(recorded)
    assert len(files) > 250
    unread = []
    for path in files:
        claims = _claims(path)
        assert len(claims) <= 1, (path, [m.KIND for m in claims])
        reader = claims[0].parse if claims else _explicit_reader(path)
        if reader is None:
            if skipped_reason(path) is None:
                unread.append(path)
            continue
        result = reader(path.read_text(errors="replace"), str(path))
        assert isinstance(result, ParseResult)
        # an idle --query-compute-apps is a header alone: no process, nothing wrong
        assert result.records or result.problems or "compute_apps" in path.name, path
    assert unread == []


def test_incident_tool_files_and_nothing_else(incidents):
    claimed = {}
    for path in incident_tool_files(incidents):
        text, problems = read_text(path)
        claims = [m for m in PARSERS if m.looks_like(text[:8192])] if text else []
        assert len(claims) <= 1, (path, [m.KIND for m in claims])
        if claims:
            result = claims[0].parse(text, str(path))
            assert result.records and result.problems == [], (path, result.problems)
            claimed[str(path.relative_to(incidents))] = claims[0].KIND
    assert claimed == {
        "case-01-xid79-fell-off-bus/input/hgx-h100-018/fuser-v_dev_nvidia.txt": "fuser",
        "case-01-xid79-fell-off-bus/input/hgx-h100-018/nvidia-smi-q.prolog-88231.txt": "nvidia_smi_q",
        "case-01-xid79-fell-off-bus/input/hgx-h100-018/nvidia-smi.txt": "nvidia_smi_table",
        "case-02-a100-thermal-throttle/input/monitoring/gpu_stats_dgx-a100-09_20250422.csv": "nvidia_smi_csv",
        "case-02-a100-thermal-throttle/input/nvidia-smi-q_2025-04-22T1320Z.txt": "nvidia_smi_q",
        "case-03-cuda-oom-rank2/input/nvidia-smi_0918.txt": "nvidia_smi_table",
        "case-05-ib-down-socket-fallback/input/v100-node-07/ibstat.txt": "ibstat",
        "case-05-ib-down-socket-fallback/input/v100-node-08/ibstat.txt": "ibstat",
        "case-05-ib-down-socket-fallback/input/v100-node-08/nvidia-smi-q-x.xml": "nvidia_smi_xml",
        "case-06-ecc-dbe-truncated-ckpt/input/nvidia-smi-q_after_16-41.txt": "nvidia_smi_q",
        "case-07-healthy-run/input/node-a100-pod3-n11/nvidia-smi.txt": "nvidia_smi_table",
        "case-07-healthy-run/input/node-a100-pod3-n12/nvidia-smi.txt": "nvidia_smi_table",
    }


def test_kernel_logs_are_not_claimed(recorded):
    for path in sorted(p for p in (recorded / "kernel").rglob("*") if p.is_file()):
        text, _ = read_text(path)
        assert [m.KIND for m in PARSERS if m.looks_like(text[:8192])] == [], path


def test_every_parser_survives_every_file(recorded, incidents):
    files = recorded_files(recorded) + sorted(p for p in (recorded / "kernel").rglob("*") if p.is_file())
    files += incident_tool_files(incidents)
    for path in files:
        text, _ = read_text(path, cap_bytes=2 * 1024 * 1024)
        for spec in registry.SPECS:  # every parser gpulib detects, as inputs calls it
            result = spec.parse(registry.Source(str(path), text=text), registry.Options())
            assert isinstance(result, ParseResult), (spec.kind, path)


def test_files_cut_anywhere_never_raise(recorded, incidents):
    """A collector killed at its timeout leaves a file cut at any byte: parse what is there."""
    samples = [
        (nvsmi_xml, recorded / "nvidia-smi/xml/datakit/gtx-8card.xml"),
        (nvsmi_query, recorded / "nvidia-smi/gpud/nvidia-smi-query.535.161.08.out.0.valid"),
        (nvsmi_table, recorded / "nvidia-smi/gpud/nvidia-smi.550.90.07.out.0.valid"),
        (nvsmi_csv, incidents / "case-02-a100-thermal-throttle/input/monitoring/gpu_stats_dgx-a100-09_20250422.csv"),
        (infiniband, recorded / "infiniband/ibstat.47.0.some.down.0"),
        (nvsmi_topo, recorded / "nvidia-smi/exporter-captures-split/linux-x86_64__nvidia-l40s__595.80/capabilities_topo_m.txt"),
    ]
    for module, path in samples:
        text = path.read_text()
        for tenth in range(1, 10):
            cut = text[: len(text) * tenth // 10]
            result = module.parse(cut, str(path))
            assert result.records or result.problems, (path, tenth)
        # half a file keeps at least the first record, and says something is missing where it can tell
        half = module.parse(text[: len(text) // 2], str(path))
        assert half.records, path
