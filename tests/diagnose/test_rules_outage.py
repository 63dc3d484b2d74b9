"""Several nodes lost at the same moment (:mod:`gpulib.diagnose.rules.outage`).

``sinfo -R`` in Slurm's layout with invented node names and times. Negative controls: one node lost,
two nodes lost hours apart, and two lost together where one has a fault of its own (the other is
then alone).
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

HEAD = "REASON               USER      TIMESTAMP           NODELIST\n"


def _run(tmp_path, rows: list[tuple[str, str]], files: dict[str, str] | None = None) -> dict:
    text = HEAD + "".join(f"Not responding       slurm     {when} {nodes}\n" for when, nodes in rows)
    (tmp_path / "sinfo-R.txt").write_text(text)
    for name, body in (files or {}).items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(body)
    return diagnose([tmp_path]).to_dict()


def _answer(doc: dict) -> tuple:
    return doc["verdict"]["interruption"], doc["root_cause"]["category"], doc["root_cause"]["host"]


def test_three_nodes_lost_in_one_stamp_are_their_shared_power(tmp_path):
    doc = _run(tmp_path, [("2026-05-02T22:10:31", "gn[41-43]")])
    assert _answer(doc) == ("hard", "power_fault", None)
    root = next(f for f in doc["findings"] if f["id"] == doc["root_cause"]["finding"])
    assert root["hosts"] == ["gn41", "gn42", "gn43"]
    assert any("switch" in a for a in root["actions"])


def test_two_nodes_lost_within_a_minute_are_one_cause(tmp_path):
    doc = _run(tmp_path, [("2026-05-02T22:10:31", "gn41"), ("2026-05-02T22:11:12", "gn57")])
    assert _answer(doc) == ("hard", "power_fault", None)


def test_one_node_lost_stays_that_node(tmp_path):
    """Negative control."""
    assert _answer(_run(tmp_path, [("2026-05-02T22:10:31", "gn41")])) == ("hard", "node_lost", "gn41")


def test_two_nodes_lost_hours_apart_are_two_faults(tmp_path):
    """Negative control: the first loss is the one that ended the job."""
    doc = _run(tmp_path, [("2026-05-02T22:10:31", "gn41"), ("2026-05-03T04:52:09", "gn57")])
    assert _answer(doc) == ("hard", "node_lost", "gn41")


def test_a_node_with_its_own_fault_is_not_counted(tmp_path):
    """Negative control: gn41's kernel log explains its loss; gn57 alone is one node lost."""
    dmesg = "[Sat May  2 22:10:02 2026] NVRM: Xid (PCI:0000:ca:00): 79, pid=88120, GPU has fallen off the bus.\n"
    doc = _run(tmp_path, [("2026-05-02T22:10:31", "gn41"), ("2026-05-02T22:10:58", "gn57")],
               files={"gn41/dmesg.txt": dmesg})
    assert not any(f["id"].startswith("nodes-lost-together") for f in doc["findings"])


def test_the_batch_host_named_by_the_jobs_cancel_line_is_not_a_second_loss(tmp_path):
    """Negative control: the job's console names the node that ran its batch script, not a lost node."""
    console = ("srun: error: Node failure on gn57\n"
               "slurmstepd: error: *** JOB 88231 ON gn56 CANCELLED AT 2026-05-02T22:11:20 DUE TO NODE FAILURE, "
               "SEE SLURMCTLD LOG FOR DETAILS ***\n")
    doc = _run(tmp_path, [("2026-05-02T22:10:31", "gn57")], files={"slurm-88231.out": console})
    assert _answer(doc) == ("hard", "node_lost", "gn57")
