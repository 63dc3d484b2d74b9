"""ibstat / ibstatus: every recorded file, down ports, the ibpanic capture, the IB-down incident."""

from __future__ import annotations

import pytest

from gpulib.parsers import infiniband, nvsmi_query, nvsmi_table
from tests.parsers.corpus_files import read_head


def _parse(path):
    return infiniband.parse(path.read_text(), str(path))


def test_every_recorded_ib_file(recorded, incidents):
    files = sorted((recorded / "infiniband").iterdir()) + sorted(incidents.glob("*/input/*/ibstat*.txt"))
    assert len(files) == 12
    for path in files:
        assert infiniband.looks_like(read_head(path)), path
        result = _parse(path)
        assert result.records, path
        assert all(p.ca.startswith("mlx5_") for p in result.records)
        if "ibpanic" not in path.name:
            assert result.problems == [], path
            assert all(p.state and p.physical_state and p.rate_gbps for p in result.records), path


def test_h100_all_active_400g(recorded):
    ports = _parse(recorded / "infiniband/ibstat.47.0.h100.all.active.2").records
    assert all(p.up for p in ports)
    assert {p.ca_type for p in ports if p.rate_gbps == 400} == {"MT4129"}


def test_some_down_ports(recorded):
    ports = _parse(recorded / "infiniband/ibstat.47.0.some.down.0").records
    down = [(p.ca, p.state, p.physical_state) for p in ports if not p.up]
    assert down == [("mlx5_2", "Down", "Disabled"), ("mlx5_7", "Down", "Disabled"), ("mlx5_8", "Down", "Disabled")]
    polling = _parse(recorded / "infiniband/ibstat.47.0.h100.some.down.with.polling.1").records
    assert ("mlx5_11", "Down", "Polling") in [(p.ca, p.state, p.physical_state) for p in polling]


def test_ibstatus_normalised(recorded):
    result = _parse(recorded / "infiniband/ibstatus.39.0.a100.all.active.0")
    assert result.kind == "ibstat"  # one kind for both tools: the rules read ports, not the tool
    port = result.records[0]
    assert (port.ca, port.port, port.state, port.physical_state, port.rate_gbps, port.link_layer) == (
        "mlx5_0", 1, "Active", "LinkUp", 200, "InfiniBand")
    assert port.base_lid == 0x33BF and port.is_infiniband


def test_ibpanic_keeps_ports_and_names_the_failed_device(recorded):
    result = _parse(recorded / "infiniband/ibstat.39.0.a100.failed.ibpanic.exit-255.0")
    healthy = [p for p in result.records if p.error is None]
    failed = [p for p in result.records if p.error]
    assert len(healthy) == 8 and all(p.up for p in healthy)
    assert [p.ca for p in failed] == ["mlx5_8"]
    assert "ibpanic" in result.problems[0].message and result.problems[0].line


def test_ib_down_incident_node(incidents):
    node8 = _parse(incidents / "case-05-ib-down-socket-fallback/input/v100-node-08/ibstat.txt").records
    node7 = _parse(incidents / "case-05-ib-down-socket-fallback/input/v100-node-07/ibstat.txt").records
    ib8 = [p for p in node8 if p.is_infiniband]
    assert [(p.ca, p.state, p.physical_state, p.base_lid) for p in ib8] == [("mlx5_0", "Down", "Polling", 65535)]
    assert all(p.up for p in node7 if p.is_infiniband)
    assert [p.link_layer for p in node8] == ["InfiniBand", "Ethernet"]


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    ("\x00\x01\x02junk\xff" * 50, "not ibstat"),
    ("[Mon Feb 10 03:12:07 2026] mlx5_core 0000:5e:00.0: Port module event: module 0, Cable unplugged\n", "not ibstat"),
])
def test_bad_input(text, why):
    result = infiniband.parse(text, "bad")
    assert result.records == [] and why in result.problems[0].message


def test_not_claimed_by_nvsmi_parsers(recorded):
    head = read_head(recorded / "infiniband/ibstat.47.0.some.down.0")
    assert not nvsmi_query.looks_like(head) and not nvsmi_table.looks_like(head)
    assert not infiniband.looks_like(read_head(recorded / "nvidia-smi/thamada/A40x10__nvidia-smi-q.txt"))


def test_lines_read_once_still_depend_on_the_block_they_are_in():
    """Each line is taken apart once per process (every node repeats them); what it sets depends on
    where it is: a CA's ``State`` line before any port is the CA's, a port's is the port's, and an
    unreadable rate is a problem in every file that has it."""
    text = ("CA 'mlx5_0'\n\tCA type: MT4129\n\tFirmware version: 28.39.1002\n\tState: Down\n\tPort 1:\n"
            "\t\tState: Down\n\t\tPhysical state: Polling\n\t\tRate: fast\n\t\tBase lid: 0x10\n"
            "\t\tLink layer: InfiniBand\n")
    for source in ("a", "b"):
        result = infiniband.parse(text, source)
        port = result.records[0]
        assert (port.ca_type, port.firmware, port.state, port.physical_state) == ("MT4129", "28.39.1002", "Down",
                                                                                  "Polling")
        assert (port.rate_gbps, port.base_lid, port.line) == (None, 16, 6)  # the line that says it is down
        assert [(p.source, p.line, "rate" in p.message) for p in result.problems] == [(source, 8, True)]
