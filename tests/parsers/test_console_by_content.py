"""A job console is known by its lines, never by its file name (``evidence-3.md`` as much as
``slurm-512.out``): a batch script's ``set -x`` launch trace and the DeepSpeed launcher's placement
lines say it."""

from gpulib.parsers.detect import detect_kind

TRACED = ("# job 77120  nodes=hx[201-202]\n"
          "+ srun --label --gpus-per-task=1 python -u fit.py --cfg big.yaml\n"
          "3: [fit] rank 3/16 on hx201 local_rank 3 cuda:0\n"
          "0: [2031-02-03 04:05:06] iter   120/9000 | loss 3.21 | iter_ms 812\n")
DEEPSPEED = ("[2031-02-03 04:05:01,100] [INFO] [runner.py:463:main] Using IP address of 10.9.8.7 for node qk11\n"
             "qk11: [2031-02-03 04:05:02,200] [INFO] [launch.py:152:main] nnodes=2, num_local_procs=4, node_rank=0\n"
             "qk11: [2031-02-03 04:05:02,210] [INFO] [launch.py:163:main] global_rank_mapping=defaultdict(<class "
             "'list'>, {'qk11': [0, 1, 2, 3], 'qk12': [4, 5, 6, 7]})\n"
             "qk11: [2031-02-03 04:05:02,220] [INFO] [launch.py:164:main] dist_world_size=8\n")


def test_a_traced_srun_launch_is_a_job_console_under_any_name():
    assert detect_kind("evidence-6.md", TRACED) == "training_log"


def test_the_deepspeed_launchers_placement_lines_are_a_job_console_under_any_name():
    assert detect_kind("evidence-0.log", DEEPSPEED) == "training_log"


def test_a_traced_shell_script_without_a_launch_is_not_a_job_console():
    text = "+ cd /scratch/run7\n+ ls -l\ntotal 8\n-rw-r--r-- 1 ops ops 412 local_rank.txt\n"
    assert detect_kind("evidence-1.md", text) != "training_log"


MEGATRON = (" [2031-02-03 04:05:06] iteration      90/     100 | consumed samples:        11520 | elapsed time per "
            "iteration (ms): 402.7 | learning rate: 2.000E-05 | lm loss: 3.104E+00 |\n"
            "[after training is done] datetime: 2031-02-03 04:06:10\n")


def test_megatrons_progress_lines_are_a_job_console_without_any_rank_prefix():
    assert detect_kind("launcher-0.log", MEGATRON) == "training_log"


def test_a_table_of_iterations_is_not_a_job_console():
    text = "benchmark  iteration  ms\nmatmul     1          3.2\nmatmul     2          3.1\n"
    assert detect_kind("launcher-0.log", text) != "training_log"
