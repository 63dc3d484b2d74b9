"""nvidia-smi -q -x: every schema generation in the corpus, values from the files, bad input."""

from __future__ import annotations

import pytest

from gpulib.parsers import nvsmi_xml

XML = "nvidia-smi/xml"


def _parse(path, **opts):
    return nvsmi_xml.parse(path.read_text(errors="replace"), str(path), **opts)


def test_every_recorded_xml_parses(recorded, incidents):
    files = sorted(recorded.glob(f"{XML}/*/*.xml")) + sorted(incidents.glob("*/input/**/*.xml"))
    assert len(files) == 21
    for path in files:
        result = _parse(path)
        assert result.records, path
        # telegraf trimmed its A100 file to one of its four GPUs: the parser says so.
        expected = 1 if path.name == "a100-sxm4-v12.xml" else 0
        assert len(result.problems) == expected, (path, result.problems)
        assert all(s.name and s.pci_bus_id for s in result.records), path


def test_v100s_eight_cards_sw_power_cap_and_processes(recorded):
    result = _parse(recorded / f"{XML}/datakit/gtx-8card.xml")
    assert len(result.records) == 8
    capped = [s.index for s in result.records if "sw_power_cap" in s.throttle_reasons]
    assert capped == [3, 6]
    assert sum(len(s.processes) for s in result.records) == 8
    gpu0 = result.records[0]
    assert gpu0.name == "Tesla V100S-PCIE-32GB" and gpu0.driver_version == "460.73.01"
    assert (gpu0.temp_shutdown_c, gpu0.temp_slowdown_c, gpu0.temp_max_operating_c) == (90, 87, 83)
    assert gpu0.processes[0].pid > 0 and gpu0.processes[0].used_mib > 0


def test_p100_aggregate_sbe(recorded):
    gpu = _parse(recorded / f"{XML}/netdata/tesla-p100.xml").records[0]
    assert gpu.ecc_aggregate_sbe == 3 and gpu.ecc_aggregate_dbe == 0 and gpu.ecc_volatile_sbe == 0
    assert gpu.retired_pages_pending is False
    assert gpu.remapped_rows_pending is None  # Pascal retires pages, it has no row remapper


def test_v13_counters_and_tlimit(recorded):
    gpu = _parse(recorded / f"{XML}/telegraf/rtx-4000-sff-ada-v13.xml").records[0]
    assert gpu.throttle_counters_us["sw_power_cap"] == 4251825415
    assert gpu.temp_tlimit_margin_c == 49 and gpu.temp_shutdown_tlimit_c == -7
    assert gpu.temp_slowdown_tlimit_c == -2
    assert gpu.power_draw_w == 8.81 and gpu.power_limit_w == 70
    assert gpu.throttle_reasons == ["gpu_idle"] and gpu.fan_pct == 30
    assert gpu.cuda_version == "13.2"


def test_event_and_throttle_tag_generations(recorded):
    v12 = _parse(recorded / f"{XML}/telegraf/a100-sxm4-v12.xml").records[0]  # clocks_event_reasons
    t4 = _parse(recorded / f"{XML}/telegraf/tesla-t4.xml").records[0]  # clocks_throttle_reasons
    assert v12.mig_enabled is True and v12.util_gpu_pct is None
    assert (v12.temp_shutdown_c, v12.temp_slowdown_c) == (92, 89)
    assert (t4.temp_shutdown_c, t4.temp_slowdown_c) == (96, 93)
    assert len(t4.processes) == 2


def test_mig_and_windows_and_no_doctype(recorded):
    mig = _parse(recorded / f"{XML}/netdata/a100-sxm4-mig.xml").records[0]
    assert mig.mig_enabled is True
    win = _parse(recorded / f"{XML}/netdata/rtx-2080-win.xml").records[0]
    assert len(win.processes) == 26
    bare = _parse(recorded / f"{XML}/datakit/gtx-1050-1.xml")
    assert bare.records[0].name == "NVIDIA GeForce GTX 1050" and bare.problems == []


def test_truncated_xml_keeps_the_gpus_before_the_cut(recorded):
    text = (recorded / f"{XML}/datakit/gtx-8card.xml").read_text()
    result = nvsmi_xml.parse(text[: len(text) // 2], "cut.xml")
    whole = nvsmi_xml.parse(text, "whole.xml").records
    assert [(g.pci_bus_id, g.temp_c) for g in result.records] == [(g.pci_bus_id, g.temp_c) for g in whole[:4]]
    assert (result.records[0].pci_bus_id, result.records[0].temp_c) == ("0000:00:0d.0", 66.0)
    messages = [p.message for p in result.problems]
    assert any("cut short" in m for m in messages) and any("says 8" in m for m in messages)


def test_case05_v100_node(incidents):
    result = _parse(incidents / "case-05-ib-down-socket-fallback/input/v100-node-08/nvidia-smi-q-x.xml")
    assert len(result.records) == 8 and all(not s.lost for s in result.records)


def test_no_dtd_fetch_and_no_entity_expansion():
    evil = ('<?xml version="1.0"?><!DOCTYPE nvidia_smi_log SYSTEM "http://127.0.0.1:9/x.dtd" '
            '[<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
            '<nvidia_smi_log><gpu id="00000000:01:00.0"><product_name>&b;</product_name></gpu></nvidia_smi_log>')
    result = nvsmi_xml.parse(evil, "evil.xml")  # must not hang or fetch
    assert len(result.records) == 1


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    ("\x00\x01\x02junk\xff" * 50, "not nvidia-smi XML"),
    ("[Mon Feb 10 03:12:07 2026] NVRM: Xid (PCI:0000:ab:00): 79, pid=1, GPU has fallen off the bus.\n",
     "not nvidia-smi XML"),
    ("<?xml version='1.0'?><html><body>hi</body></html>", "root element is 'html'"),
])
def test_bad_input_gives_problem(text, why):
    result = nvsmi_xml.parse(text, "bad.xml")
    assert result.records == []
    assert why in result.problems[0].message


def test_lost_gpu_message_next_to_the_xml(recorded):
    xml = (recorded / f"{XML}/datakit/gtx-1card.xml").read_text()
    text = "Unable to determine the device handle for GPU0000:AB:00.0: GPU is lost.  Reboot the system\n" + xml
    result = nvsmi_xml.parse(text, "lost.xml")
    assert [(s.pci_bus_id is not None, s.lost) for s in result.records] == [(True, False), (True, True)]
    assert result.records[1].pci_bus_id == "0000:ab:00.0" and result.problems == []
