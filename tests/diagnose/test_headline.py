"""The headline's culprit names what the engineer acts on: a GPU by PCI id with its index as seen
at capture, and, for a fabric cause, the InfiniBand port (one cable of eight on the node)."""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.diagnose.headline import culprit, hca_port, headline_lines
from tests.conftest import REPO


def _diagnosis(root: dict, findings: list[dict]) -> dict:
    return {"verdict": {"interruption": "soft", "category": "network_fabric", "summary": "soft: link lost"},
            "root_cause": root, "findings": findings, "checkpoints": {}}


def test_the_port_comes_from_the_root_or_from_what_it_caused_on_its_host():
    root = {"category": "network_fabric", "host": "ib-n7", "finding": "ib-link-ib_n7", "time": "2026-05-01T01:02:03Z"}
    link = {"id": "ib-link-ib_n7", "host": "ib-n7", "caused_by": None, "actions": ["reseat"]}
    port = {"id": "ib-port-ib_n7", "host": "ib-n7", "caused_by": "ib-link-ib_n7", "hca_port": "mlx5_5 port 1"}
    other = {"id": "ib-port-ib_n8", "host": "ib-n8", "caused_by": "ib-link-ib_n7", "hca_port": "mlx5_0 port 1"}
    assert hca_port(_diagnosis(root, [link, other])) is None  # another host's port is not this culprit's
    d = _diagnosis(root, [link, other, port])
    assert hca_port(d) == "mlx5_5 port 1"
    assert culprit(d) == "host ib-n7, mlx5_5 port 1, at 2026-05-01T01:02:03Z"
    assert "  culprit: host ib-n7, mlx5_5 port 1, at 2026-05-01T01:02:03Z" in headline_lines(d)
    assert hca_port(_diagnosis(root, [{**link, "hca_port": "mlx5_1 port 2"}, port])) == "mlx5_1 port 2"


def test_the_ib_example_names_its_port_in_the_headline():
    d = diagnose([REPO / "examples" / "incident-ib-port-down"]).to_dict()
    [line] = [x for x in headline_lines(d) if x.startswith("  culprit: ")]
    assert "mlx5_2 port 1" in line, line


def test_the_ib_verdict_and_root_cause_name_the_port_the_headline_names():
    """One place for where the culprit is: the verdict sentence and the ROOT CAUSE block say the
    same port as the headline (the kernel's 'Link down' names no port; ibstat on that host does)."""
    result = diagnose([REPO / "examples" / "incident-ib-port-down"])
    d = result.to_dict()
    assert "[host pz-h100-03, mlx5_2 port 1]" in d["verdict"]["summary"]
    root_block = result.to_text().split("ROOT CAUSE\n", 1)[1]
    assert "  culprit: host pz-h100-03, mlx5_2 port 1, at " in root_block
    assert not any(f.get("hca_port") for f in d["findings"] if f.get("host") != "pz-h100-03")
