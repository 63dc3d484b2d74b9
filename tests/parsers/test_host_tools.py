"""ipmitool sdr (3- and 5-column), fuser -v, dcgm-exporter metrics and Prometheus API JSON."""

from __future__ import annotations

import pytest

from gpulib.parsers import fuser, ipmi, nvsmi_table, prom_text
from tests.parsers.corpus_files import read_head

# `ipmitool sdr list` rows in the layout the reference documents (HPE-style per-PSU watts,
# Dell-style PSU status bytes); written for this test, no real GPU-server capture with a PSU fault exists.
SDR_LIST = """Inlet Temp       | 22 degrees C      | ok
Fan1A            | 8400 RPM          | ok
PS1 Status       | 0x01              | ok
PS2 Status       | 0x00              | cr
PS Redundancy    | Fully Redundant   | ok
PSU1 Power In    | 720 Watts         | ok
CPU2 Temp        | no reading        | ns
"""
SDR_TYPE_PSU = """PS1 Status       | 63h | ok  | 10.1 | Presence detected
PS2 Status       | 64h | ok  | 10.2 | Presence detected, Power Supply AC lost
PS Redundancy    | 77h | ok  |  7.1 | Fully Redundant
PS3 Status       | 65h | ns  | 10.3 | No Reading
"""


def test_sdr_three_columns():
    result = ipmi.parse(SDR_LIST, "sdr.txt")
    assert result.problems == [] and ipmi.looks_like(SDR_LIST)
    by_name = {s.name: s for s in result.records}
    assert by_name["Inlet Temp"].value == 22 and by_name["Inlet Temp"].unit == "degrees C"
    assert by_name["PSU1 Power In"].value == 720 and by_name["PSU1 Power In"].is_power_supply
    assert [s.name for s in result.records if s.psu_failed] == ["PS2 Status"]
    assert by_name["CPU2 Temp"].severity == "unknown" and not by_name["CPU2 Temp"].is_power_supply
    assert by_name["Fan1A"].value == 8400 and by_name["PS1 Status"].reading == "0x01"


def test_sdr_five_columns_event_text():
    result = ipmi.parse(SDR_TYPE_PSU, "psu.txt")
    assert result.problems == []
    failed = [(s.name, s.entity) for s in result.records if s.psu_failed]
    assert failed == [("PS2 Status", "10.2")]  # status says ok, the event text says AC lost
    assert result.records[3].severity == "unknown"


def test_fuser_incident_holder_of_gpu5(incidents):
    path = incidents / "case-01-xid79-fell-off-bus/input/hgx-h100-018/fuser-v_dev_nvidia.txt"
    assert fuser.looks_like(read_head(path))
    result = fuser.parse(path.read_text(), str(path))
    assert result.problems == []
    gpu_users = [(u.gpu_minor, u.pid, u.user, u.access, u.command) for u in result.records if u.gpu_minor is not None]
    assert gpu_users == [(5, 48376, "svc-llm", "F...m", "pt_main_thread")]
    ctl = [(u.device, u.pid) for u in result.records if u.device == "/dev/nvidiactl"]
    assert ctl == [("/dev/nvidiactl", 2087), ("/dev/nvidiactl", 48376)]  # continuation row keeps the device


def test_fuser_stdout_only_capture():
    result = fuser.parse(" 48376m  2087 48376\n", "stdout.txt")
    assert [u.pid for u in result.records] == [48376, 2087]
    assert "2>&1" in result.problems[0].message


def test_fuser_kernel_user():
    text = "                     USER        PID ACCESS COMMAND\n/dev/nvidia0:        root     kernel mount /dev/nvidia0\n"
    user = fuser.parse(text, "k").records[0]
    assert user.pid is None and user.gpu_minor == 0 and user.command == "/dev/nvidia0"


DCGM_SCRAPE = """# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="5",UUID="GPU-5",pci_bus_id="00000000:AB:00.0",device="nvidia5",modelName="NVIDIA H100 80GB HBM3",Hostname="hgx-h100-018",DCGM_FI_DRIVER_VERSION="550.54.15"} 61
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0",device="nvidia0",modelName="NVIDIA A800-SXM4-80GB",GPU_I_PROFILE="2g.20gb",GPU_I_ID="3",hostname="a800-1"} 78.174000
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{gpu="0",UUID="GPU-0"} 9223372036854775794
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{gpu="0",UUID="GPU-0"} ERROR - FAILED TO CONVERT TO STRING
DCGM_FI_DEV_XID_ERRORS{gpu="5",UUID="GPU-5",label_with_quote="a\\"b"} 79 1739157127000
"""


def test_dcgm_exposition_labels_and_quirks():
    result = prom_text.parse(DCGM_SCRAPE, "metrics.prom")
    assert result.problems == [] and prom_text.looks_like(DCGM_SCRAPE)
    temp, power, ecc, nvlink, xid = result.records
    assert (temp.gpu, temp.uuid, temp.pci_bus_id, temp.host, temp.value) == (5, "GPU-5", "0000:ab:00.0", "hgx-h100-018", 61)
    assert power.host == "a800-1" and power.pci_bus_id is None and power.value == 78.174
    assert power.labels["GPU_I_PROFILE"] == "2g.20gb"
    assert ecc.value is None and "not supported" in ecc.note
    assert nvlink.value is None and nvlink.note.startswith("ERROR")
    assert xid.value == 79 and xid.time_utc == "2025-02-10T03:12:07.000Z" and xid.labels["label_with_quote"] == 'a"b'


def test_recorded_prometheus_api_json(recorded):
    instant = prom_text.parse((recorded / "prometheus/api_v1_query_up_doc_example.json").read_text(), "q.json")
    assert [(s.labels["instance"], s.value) for s in instant.records] == [("localhost:9090", 1), ("localhost:9100", 0)]
    ranged = prom_text.parse((recorded / "prometheus/api_v1_query_range_up_doc_example.json").read_text(), "r.json")
    assert len(ranged.records) == 6 and ranged.records[0].time_utc == "2015-07-01T20:10:30.781Z"
    assert [s.value for s in ranged.records if s.labels["instance"] == "localhost:9091"] == [0, 0, 1]
    for path in (recorded / "prometheus").iterdir():
        assert prom_text.looks_like(read_head(path)), path


def test_recorded_counters_csv(recorded):
    for path in sorted((recorded / "dcgm").iterdir()):
        result = prom_text.parse_counters(path.read_text(), str(path))
        assert result.problems == [] and len(result.records) > 40, path
        enabled = {c.name for c in result.records if c.enabled}
        assert "DCGM_FI_DEV_GPU_TEMP" in enabled and "DCGM_FI_DEV_XID_ERRORS" in enabled
        assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in enabled  # commented out by default
        assert not prom_text.looks_like(read_head(path))  # a config file, not a scrape


def test_prometheus_error_envelope():
    result = prom_text.parse('{"status":"error","errorType":"bad_data","error":"invalid parameter"}', "e.json")
    assert result.records == [] and "invalid parameter" in result.problems[0].message


@pytest.mark.parametrize("module", [ipmi, fuser, prom_text])
@pytest.mark.parametrize("text", ["", "\x00\x01\x02junk\xff" * 50,
                                  "[Mon Feb 10 03:12:07 2026] NVRM: Xid (PCI:0000:ab:00): 79, pid=1\n"])
def test_bad_input(module, text):
    result = module.parse(text, "bad")
    assert result.records == [] and result.problems and result.problems[0].source == "bad"


def test_looks_like_is_exclusive(recorded, incidents):
    table = read_head(recorded / "nvidia-smi/thamada/A100SXMx4__nvidia-smi.txt")
    fuser_head = read_head(incidents / "case-01-xid79-fell-off-bus/input/hgx-h100-018/fuser-v_dev_nvidia.txt")
    for module in (ipmi, fuser, prom_text):
        assert not module.looks_like(table)
    assert not ipmi.looks_like(fuser_head) and not nvsmi_table.looks_like(fuser_head)
    assert not fuser.looks_like(SDR_LIST) and not prom_text.looks_like(SDR_LIST)
    assert not ipmi.looks_like(DCGM_SCRAPE) and not fuser.looks_like(DCGM_SCRAPE)
