"""A rank by its launcher's number for it, read from the root cause's neighbourhood.

``torch.multiprocessing.spawn`` names the process index (``process 1 terminated with exit code
1``), and srun the task id (``srun: error: NODE: task 5: Out Of Memory``); both are the global
rank of a one-node spawn / an srun-launched step. Taken only when the place names one number.
Lines in the tools' layouts with invented hosts, paths and values.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

OOM = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU has a total capacity "
       "of 23.65 GiB of which 1.10 GiB is free.")
SPAWN = "torch.multiprocessing.spawn.ProcessRaisedException: process {n} terminated with exit code 1"
STEPD = "slurmstepd: error: Detected 1 oom_kill event in StepId=5531.0. Some of the step tasks have been OOM Killed."
SRUN = "srun: error: gpu-lo-{n}: task {n}: Out Of Memory"


def _root(tmp_path, lines: list[str]) -> dict:
    (tmp_path / "run.out").write_text("\n".join(lines) + "\n")
    return diagnose([tmp_path]).to_dict()["root_cause"]


def test_the_spawned_process_index_is_the_rank(tmp_path):
    root = _root(tmp_path, [OOM, SPAWN.format(n=1)])
    assert (root["category"], root["rank"]) == ("cuda_oom", 1)


def test_two_spawned_processes_name_no_rank(tmp_path):
    root = _root(tmp_path, [OOM, SPAWN.format(n=1), SPAWN.format(n=2)])
    assert (root["category"], root["rank"]) == ("cuda_oom", None)


def test_srun_task_id_is_the_rank(tmp_path):
    root = _root(tmp_path, [STEPD, SRUN.format(n=5)])
    assert (root["category"], root["rank"]) == ("host_oom", 5)


def test_two_srun_tasks_name_no_rank(tmp_path):
    root = _root(tmp_path, [STEPD, SRUN.format(n=5), SRUN.format(n=6)])
    assert root["category"] == "host_oom" and root["rank"] is None


END = "`Trainer.fit` stopped: `max_epochs=4` reached."
TIMEOUT = ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1, "
           "NumelOut=1, Timeout(ms)=600000) ran for 600090 milliseconds before timing out.")
ABORT = "srun: error: gpu-lo-{n}: task 0: Aborted (core dumped)"


def test_srun_names_the_node_of_the_task(tmp_path):
    root = _root(tmp_path, [END, TIMEOUT, ABORT.format(n=2)])
    assert (root["category"], root["host"]) == ("application_error", "gpu-lo-2")


def test_srun_naming_two_nodes_names_no_host(tmp_path):
    root = _root(tmp_path, [END, TIMEOUT, ABORT.format(n=2), ABORT.format(n=3)])
    assert (root["category"], root["host"]) == ("application_error", None)
