"""The node the writer's own sentence names among the nodes the log's scheduler table lists
(stated_hosts.prose_named_node): the table alone lists every busy node and names none of them as
the failing one. Own nodes, users and jobs."""

from __future__ import annotations

from gpulib.diagnose import diagnose
from gpulib.diagnose.stated_hosts import prose_named_node

SQUEUE = """\
$ nvidia-smi
Failed to initialize NVML: Driver/library version mismatch
$ squeue
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
               917       gpu    bench   tkoval  R 1-04:10:02      1 orca-02
               921       gpu     eval   tkoval  R   20:41:17      1 orca-05
               930       gpu    prep2    liwen  R    3:05:55      2 orca-02,orca-05
"""


def test_the_sentence_names_the_node_of_the_failure(tmp_path):
    (tmp_path / "comment.md").write_text(SQUEUE + "\nSince this morning orca-05 refuses every new job that asks "
                                                  "for a GPU, the running ones are fine.\n")
    rc = diagnose([tmp_path]).to_dict()["root_cause"]
    assert rc["category"] == "driver_mismatch" and rc["host"] == "orca-05"


def test_the_table_alone_names_no_node():
    assert prose_named_node(SQUEUE) is None


def test_a_sentence_naming_two_of_its_nodes_names_neither():
    assert prose_named_node(SQUEUE + "Both orca-02 and orca-05 were rebooted last week by the admins.\n") is None


def test_a_name_outside_the_table_is_not_a_node_of_it():
    assert prose_named_node(SQUEUE + "I asked the admins on orca-09 about it yesterday evening.\n") is None


def test_without_a_scheduler_table_a_sentence_names_no_node():
    assert prose_named_node("The node orca-05 has been up for a long time now.\n") is None


def test_a_neighbour_naming_a_peer_does_not_replace_the_folders_host(tmp_path):
    """A host-like folder's guess gives way only to the cause's own file: a file beside it that names
    another node (a peer in a job log) is not where the cause happened."""
    node = tmp_path / "orca-07"
    node.mkdir()
    (node / "smi.txt").write_text("$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n")
    (node / "peer.txt").write_text("[ops@orca-03 ~]$ uptime\n 09:12:01 up 41 days,  3 users,  load average: 0.10\n")
    rc = diagnose([tmp_path]).to_dict()["root_cause"]
    assert rc["category"] == "driver_mismatch" and rc["host"] == "orca-07"
