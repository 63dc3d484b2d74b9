"""``scontrol show job``/``show node`` and ``sacct`` (parsable and table) parsers.

The texts are written for these tests in the layouts Slurm 22.05 prints (checked against a real
one-node Slurm in tests/slurm); host names and job ids are our own.
"""

from __future__ import annotations

from gpulib.parsers import detect, sacct, slurm_job

SHOW_JOB_D = """JobId=731902 JobName=pretrain-70b
   UserId=mlops(4711) GroupId=mlops(4711) MCS_label=N/A
   Priority=1000 Nice=0 Account=research QOS=normal
   JobState=NODE_FAIL Reason=NodeDown Dependency=(null)
   Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
   DerivedExitCode=0:0
   RunTime=1-02:03:04 TimeLimit=2-00:00:00 TimeMin=N/A
   SubmitTime=2026-03-01T21:00:00 EligibleTime=2026-03-01T21:00:00
   StartTime=2026-03-01T21:00:05 EndTime=2026-03-02T23:03:09 Deadline=N/A
   Partition=h100 AllocNode:Sid=login-2:5511
   NodeList=gx-node-[07-09],gx-spare
   BatchHost=gx-node-07
   NumNodes=4 NumCPUs=512 NumTasks=32 CPUs/Task=16 ReqB:S:C:T=0:0:*:*
   TRES=cpu=512,mem=2000G,node=4,billing=512,gres/gpu=32
   JOB_GRES=gpu:h100:32
     Nodes=gx-node-[07-09] CPU_IDs=0-127 Mem=512000 GRES=gpu:h100:8(IDX:0-7)
     Nodes=gx-spare CPU_IDs=0-63,64-127 Mem=500G GRES=gpu:h100:8(IDX:0-3,4-7)
   Command=/home/mlops/run.sbatch
   WorkDir=/home/mlops
   StdErr=/shared/logs/pretrain-731902.err
   StdOut=/shared/logs/pretrain-731902.out
   Power=
"""

ONE_LINE = ("JobId=88 JobName=eval UserId=ana(1001) GroupId=ana(1001) JobState=COMPLETING Reason=NonZeroExitCode "
            "Dependency=(null) ExitCode=2:0 DerivedExitCode=0:0 RunTime=00:01:10 TimeLimit=UNLIMITED "
            "StartTime=2026-03-02T10:00:00 EndTime=2026-03-02T10:01:10 NodeList=cpu-3 BatchHost=cpu-3\n"
            "JobId=89 JobName=ok JobState=COMPLETED Reason=None ExitCode=0:0 DerivedExitCode=0:0 NodeList=cpu-4\n")

SHOW_NODE = """NodeName=gx-node-08 Arch=x86_64 CoresPerSocket=64
   CPUAlloc=0 CPUEfctv=128 CPUTot=128 CPULoad=0.02
   Gres=gpu:h100:8(S:0-1)
   NodeAddr=gx-node-08 NodeHostName=gx-node-08 Version=22.05.8
   OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Reason=gpulib: GPU 3 fell off the bus (Xid 79) [root@2026-03-02T23:10:00]

NodeName=gx-node-09 Arch=x86_64
   Gres=(null)
   State=DOWN* ThreadsPerCore=1
   Reason=Not responding [slurm@2026-03-02T23:01:00]
"""

SACCT_P = """JobID|JobName|State|ExitCode|NodeList|Start|End|Elapsed
731902|pretrain-70b|NODE_FAIL|0:0|gx-node-[07-09],gx-spare|2026-03-01T21:00:05|2026-03-02T23:03:09|1-02:03:04
731902.batch|batch|CANCELLED|0:15|gx-node-07|2026-03-01T21:00:05|2026-03-02T23:03:09|1-02:03:04
731902.extern|extern|COMPLETED|0:0|gx-node-[07-09],gx-spare|2026-03-01T21:00:05|2026-03-02T23:03:09|1-02:03:04
731902.0|python|NODE_FAIL|1:0|gx-node-09|2026-03-01T21:00:07|2026-03-02T23:01:14|1-02:01:07
731903|sweep|CANCELLED by 4711|0:0|gx-node-10|2026-03-02T08:00:00|2026-03-02T08:02:00|00:02:00
"""

# sacct pads every column, the last one too: each line ends in a space
SACCT_TABLE = "".join(line + " \n" for line in [
    'JobID           JobName  Partition    Account  AllocCPUS      State ExitCode',
    '------------ ---------- ---------- ---------- ---------- ---------- --------',
    '731950       finetune-+       h100   research        256 OUT_OF_ME+    0:125',
    '731950.batch      batch              research        128 OUT_OF_ME+    0:125',
    '731950.0         python              research        256     FAILED      1:0',
    '731951             eval       h100   research          8  COMPLETED      0:0',
])


def test_show_job_detail_lines_nodes_and_times():
    assert slurm_job.looks_like(SHOW_JOB_D)
    assert detect.detect_kind("job.txt", SHOW_JOB_D) == "slurm_job"
    result = slurm_job.parse(SHOW_JOB_D, "job.txt", tz="+01:00")
    assert result.problems == []
    (job,) = result.records
    assert (job.job_id, job.job_name, job.user, job.job_state, job.reason) == (
        "731902", "pretrain-70b", "mlops", "NODE_FAIL", "NodeDown")
    assert job.nodes == ["gx-node-07", "gx-node-08", "gx-node-09", "gx-spare"] and job.batch_host == "gx-node-07"
    assert (job.exit_code, job.exit_signal, job.num_nodes) == (0, 0, 4)
    assert job.end_time_utc == "2026-03-02T22:03:09Z"  # slurmctld's local zone (+01:00) read as asked
    assert job.run_time_s == 93784 and job.time_limit_s == 172800
    assert job.std_out == "/shared/logs/pretrain-731902.out" and job.command == "/home/mlops/run.sbatch"
    assert [d.nodes for d in job.node_details] == [["gx-node-07", "gx-node-08", "gx-node-09"], ["gx-spare"]]
    assert job.node_details[0].gpu_indices == list(range(8)) and job.node_details[0].mem_mib == 512000
    assert job.node_details[1].mem_mib == 512000 and job.node_details[1].gpu_indices == list(range(8))
    assert job.gpus_per_node["gx-spare"] == 8
    assert slurm_job.ended_badly(job) == "JobState=NODE_FAIL Reason=NodeDown"


def test_one_line_records_and_completing_verdicts():
    result = slurm_job.parse(ONE_LINE, "o.txt")
    assert result.problems == []
    failing, fine = result.records
    assert failing.job_state == "COMPLETING" and failing.exit_code == 2 and failing.nodes == ["cpu-3"]
    assert failing.time_limit_s is None  # UNLIMITED
    assert slurm_job.ended_badly(failing) == "Reason=NonZeroExitCode"
    assert slurm_job.ended_badly(fine) is None


def test_completing_verdicts_from_reason_codes_and_environment():
    def job(**kw):
        return slurm_job.SlurmJob("1", job_state="COMPLETING", **kw)

    assert slurm_job.ended_badly(job(reason="TimeLimit", exit_code=0, exit_signal=15)) == "Reason=TimeLimit"
    # scancel: signal 15, no bad reason -> not captured
    assert slurm_job.ended_badly(job(reason=None, exit_code=0, exit_signal=15)) is None
    assert slurm_job.ended_badly(job(derived_exit_code=137)) == "DerivedExitCode=137:0"
    assert slurm_job.ended_badly(job(), env_exit="3:0") == "SLURM_JOB_EXIT_CODE2=3:0"
    assert slurm_job.ended_badly(job(), env_derived=256) == "SLURM_JOB_DERIVED_EC=256"
    assert slurm_job.ended_badly(job(), env_exit="0:15", env_derived=15) is None
    assert slurm_job.ended_badly(slurm_job.SlurmJob("2", job_state="CANCELLED", exit_code=0, exit_signal=9)) is None


def test_show_node_state_reason_and_gres():
    result = slurm_job.parse_nodes(SHOW_NODE, "node.txt")
    assert result.problems == []
    drained, down = result.records
    assert drained.name == "gx-node-08" and drained.draining and drained.state_flags == {"IDLE", "DRAIN"}
    assert drained.reason == "gpulib: GPU 3 fell off the bus (Xid 79)" and drained.reason_user == "root"
    assert drained.reason_time_utc == "2026-03-02T23:10:00Z"
    assert drained.gpus_configured == 8
    assert drained.fields["OS"].startswith("Linux 6.1.0-18-amd64 #1 SMP")
    assert not down.draining and down.state_flags == {"DOWN"} and down.gpus_configured is None
    assert slurm_job.parse_nodes("nothing here", "x").problems[0].message.startswith("no 'NodeName='")


def test_sacct_parsable2_steps_and_cancelled_by():
    assert sacct.looks_like(SACCT_P) and detect.detect_kind("acct.txt", SACCT_P) == "sacct"
    result = sacct.parse(SACCT_P, "acct.txt")
    assert result.problems == []
    rows = {(r.job_id, r.step): r for r in result.records}
    job = rows[("731902", None)]
    assert job.is_job and job.state == "NODE_FAIL" and job.nodes[-1] == "gx-spare" and job.elapsed_s == 93784
    step = rows[("731902", "0")]
    assert (step.state, step.exit_code, step.nodes) == ("NODE_FAIL", 1, ["gx-node-09"])
    assert step.end_utc == "2026-03-02T23:01:14Z"
    assert rows[("731902", "batch")].exit_signal == 15
    cancelled = rows[("731903", None)]
    assert cancelled.state == "CANCELLED" and cancelled.cancelled_by == "4711"


def test_sacct_default_table_with_cut_values():
    assert sacct.looks_like(SACCT_TABLE) and detect.detect_kind("sacct.out", SACCT_TABLE) == "sacct"
    result = sacct.parse(SACCT_TABLE, "sacct.out")
    assert result.problems == []
    first = result.records[0]
    assert (first.job_id, first.job_name, first.partition, first.alloc_cpus) == ("731950", "finetune-+", "h100", 256)
    assert first.state == "OUT_OF_MEMORY" and first.state_truncated and first.exit_signal == 125
    assert [(r.step, r.state) for r in result.records[1:]] == [("batch", "OUT_OF_MEMORY"), ("0", "FAILED"),
                                                               (None, "COMPLETED")]


def test_sacct_bad_rows_are_problems_not_crashes():
    text = "JobID|State|ExitCode\n12|FAILED|1:0\n13|FAILED\nnot-a-job|FAILED|0:0\n"
    result = sacct.parse(text, "bad.txt")
    assert [r.job_id for r in result.records] == ["12"]
    assert [p.line for p in result.problems] == [3, 4]
    assert "header" in sacct.parse("12 FAILED 1:0\n", "x").problems[0].message
    # --parsable (one '|'): rows end with a separator
    assert sacct.parse("JobID|State|\n14|TIMEOUT|\n", "p").records[0].state == "TIMEOUT"
