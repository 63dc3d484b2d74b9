"""``gpulib diagnose`` reads Slurm's records (scontrol show job, sacct) as evidence.

Fixtures are written here in Slurm 22.05's layouts with our own host names and job ids.
"""

from __future__ import annotations

import json

from gpulib.cli import main
from gpulib.diagnose import diagnose
from tests.diagnose.test_rules import job_log, timeouts


def show_job(job_id: str, state: str, reason: str, exit_code: str, nodes: str, batch: str,
             end: str = "2026-05-04T10:31:40") -> str:
    return (f"JobId={job_id} JobName=llm-pretrain\n"
            "   UserId=train(2001) GroupId=train(2001) MCS_label=N/A\n"
            f"   JobState={state} Reason={reason} Dependency=(null)\n"
            f"   Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode={exit_code}\n"
            "   DerivedExitCode=0:0\n"
            "   RunTime=00:31:40 TimeLimit=04:00:00 TimeMin=N/A\n"
            f"   StartTime=2026-05-04T10:00:00 EndTime={end} Deadline=N/A\n"
            "   Partition=gpu AllocNode:Sid=login-1:4242\n"
            f"   NodeList={nodes}\n   BatchHost={batch}\n"
            "   NumNodes=2 NumCPUs=64 NumTasks=8 CPUs/Task=8 ReqB:S:C:T=0:0:*:*\n"
            f"     Nodes={nodes} CPU_IDs=0-31 Mem=256000 GRES=gpu:4(IDX:0-3)\n"
            "   StdOut=/shared/llm/out.log\n")


def test_node_fail_names_the_node_of_the_failed_step(tmp_path):
    (tmp_path / "job.txt").write_text(show_job("90417", "NODE_FAIL", "NodeDown", "0:0", "gpu-a-[1-2]", "gpu-a-1"))
    (tmp_path / "acct.txt").write_text(
        "JobID|JobName|State|ExitCode|NodeList|Start|End\n"
        "90417|llm-pretrain|NODE_FAIL|0:0|gpu-a-[1-2]|2026-05-04T10:00:00|2026-05-04T10:31:40\n"
        "90417.batch|batch|CANCELLED|0:15|gpu-a-1|2026-05-04T10:00:00|2026-05-04T10:31:40\n"
        "90417.0|python|NODE_FAIL|0:0|gpu-a-2|2026-05-04T10:00:02|2026-05-04T10:31:38\n")
    (tmp_path / "job.out").write_text(job_log("gpu-a-1", 0, 8, 100) + job_log("gpu-a-2", 4, 8, 200)
                                      + timeouts(range(4)))
    d = diagnose([tmp_path])
    assert (d.interruption, d.category, d.root_cause.host) == ("hard", "node_lost", "gpu-a-2")
    assert "NODE_FAIL" in d.root_cause.title and "90417" in d.root_cause.title
    kinds = {i["path"]: i["kind"] for i in d.to_dict()["inputs"]}
    assert kinds["job.txt"] == "slurm_job" and kinds["acct.txt"] == "sacct"
    # the NCCL timeouts (10:30, before slurmctld noticed at 10:31:40) are the cascade of the lost node
    assert any(f.id.startswith("nccl-timeout") and f.caused_by == d.root_cause.id for f in d.findings)


def test_node_fail_with_sinfo_is_one_finding(tmp_path):
    (tmp_path / "job.txt").write_text(show_job("90418", "NODE_FAIL", "NodeDown", "0:0", "gpu-a-[1-2]", "gpu-a-1"))
    (tmp_path / "sinfo.txt").write_text("REASON               USER      TIMESTAMP           NODELIST\n"
                                        "Not responding       slurm     2026-05-04T10:31:00 gpu-a-1\n")
    d = diagnose([tmp_path])
    lost = [f for f in d.findings if f.id.startswith("node-lost")]
    assert len(lost) == 1 and lost[0].host == "gpu-a-1" and d.root_cause is lost[0]
    assert {e.file for e in lost[0].quotes} == {"sinfo.txt", "job.txt"}


def test_node_fail_without_a_named_node_still_hard(tmp_path):
    (tmp_path / "job.txt").write_text(show_job("90419", "NODE_FAIL", "NodeDown", "0:0", "gpu-a-[1-2]", "gpu-a-1"))
    d = diagnose([tmp_path])
    assert (d.interruption, d.category, d.root_cause.host) == ("hard", "node_lost", None)
    assert "which one is not in this evidence" in d.root_cause.title
    assert any("sinfo -R" in a for a in d.root_cause.actions)


def test_completed_job_is_positive_evidence_of_a_normal_end(tmp_path):
    (tmp_path / "acct.txt").write_text("JobID|JobName|State|ExitCode\n90420|eval|COMPLETED|0:0\n"
                                       "90420.batch|batch|COMPLETED|0:0\n")
    d = diagnose([tmp_path])
    assert (d.interruption, d.category) == ("none", "none")
    assert "completed normally" in d.summary


def test_failed_exit_code_without_cause_is_unknown_with_the_exit(tmp_path, capsys):
    (tmp_path / "job.txt").write_text(show_job("90421", "FAILED", "NonZeroExitCode", "2:0", "gpu-a-[1-2]", "gpu-a-1"))
    d = diagnose([tmp_path])
    assert d.interruption == "unknown"
    failed = next(f for f in d.findings if f.id.startswith("slurm-job-failed"))
    assert "exit code 2" in failed.title and failed.severity == "error"
    assert main(["diagnose", str(tmp_path), "--format", "json"]) == 4
    assert json.loads(capsys.readouterr().out)["verdict"]["interruption"] == "unknown"


def test_out_of_memory_from_the_sacct_table_is_soft_host_oom(tmp_path):
    rows = ["JobID           JobName  Partition      State ExitCode   NodeList",
            "------------ ---------- ---------- ---------- -------- ----------",
            "90422         llm-pret+        gpu OUT_OF_ME+    0:125 gpu-a-[1-+",
            "90422.batch        batch            OUT_OF_ME+    0:125    gpu-a-1",
            "90422.0           python                FAILED      1:0 gpu-a-[1-+"]
    (tmp_path / "sacct.out").write_text("".join(r + " \n" for r in rows))
    d = diagnose([tmp_path])
    assert (d.interruption, d.category, d.root_cause.host) == ("soft", "host_oom", "gpu-a-1")


def test_timeout_is_a_symptom_not_a_cause(tmp_path):
    (tmp_path / "job.txt").write_text(show_job("90423", "TIMEOUT", "TimeLimit", "0:15", "gpu-a-1", "gpu-a-1"))
    d = diagnose([tmp_path])
    t = next(f for f in d.findings if f.id.startswith("slurm-timeout"))
    assert t.role == "symptom" and "4 h" in t.title
    assert d.interruption == "unknown"
