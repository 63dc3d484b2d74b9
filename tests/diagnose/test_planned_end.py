"""A run that reached its planned end, then printed teardown errors, ended normally (gpulib.diagnose.ends).

Positive evidence of the end: a progress counter at its stated total on the last progress line,
Megatron's ``[after training is done]``, the shell's ``0`` for an ``echo $?`` typed right after the
launch, an exit right after a saved checkpoint. Teardown lines (CUDA's ``driver shutting down``,
``destroy_process_group() was not called``, NCCL's proxy thread failing its ``Close``) after such
an end are an "also seen" warning; before it, or with a real error after it, the run failed.
Hosts, PIDs, paths and values are ours.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from tests.diagnose.files import write_tree


def _iteration(i: int, of: int, minute: int) -> str:
    return (f" [2026-03-02 11:{minute:02d}:14] iteration {i:>8}/{of:>8} | consumed samples: {i * 64:>10} | "
            f"elapsed time per iteration (ms): 402.7 | learning rate: 2.000E-05 | lm loss: 3.1{i % 97:02d}E+00 |")


def _pg_warning(rank: int) -> str:
    return (f"[rank{rank}]:[W302 11:41:{30 + rank:02d}.118204551 ProcessGroupNCCL.cpp:1496] Warning: WARNING: "
            "destroy_process_group() was not called before program exit, which can leak resources. For more "
            "info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())")


#: The CUDA runtime unloading under the NCCL watchdog while the process exits, as libc++ and c10 print it.
DRIVER_SHUTTING_DOWN = """\
terminate called after throwing an instance of 'c10::CUDAError'
  what():  CUDA error: driver shutting down
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
Exception raised from query at /opt/pytorch/aten/src/ATen/cuda/CUDAEvent.h:91 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f0a11c2a897 in /usr/lib/python3/torch/lib/libc10.so)
"""

PROXY_CLOSE = """\
brk-node4:40712:40990 [2] proxy.cc:1460 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable
brk-node4:40712:40990 [2] NCCL INFO misc/socket.cc:829 -> 3
brk-node4:40712:40990 [2] proxy.cc:1523 NCCL WARN [Proxy Service 2] Failed to execute operation Close from rank 2, retcode 3
"""


def _verdict(tmp_path, files):
    d = diagnose([write_tree(tmp_path, files)])
    return d.interruption, d.category, d


def test_counter_at_its_stated_total_then_pg_warnings_is_a_normal_end(tmp_path):
    log = "\n".join([_iteration(i, 800, 30 + i // 100) for i in (600, 700, 800)]
                    + [_pg_warning(r) for r in range(2)]) + "\n"
    interruption, category, d = _verdict(tmp_path, {"gpt-run/train.log": log})
    assert (interruption, category) == ("none", "none")
    teardown = [f for f in d.findings if f.id.startswith("teardown")]
    assert teardown and teardown[0].severity == "warning" and "not a failure" in teardown[0].title


def test_after_training_is_done_is_a_completion_line(tmp_path):
    log = "\n".join([" [2026-03-02 11:30:14] iteration      700 | lm loss: 3.1E+00 | grad norm: 0.41 |",
                     "[after training is done] datetime: 2026-03-02 11:40:02", _pg_warning(0)]) + "\n"
    assert _verdict(tmp_path, {"train.log": log})[:2] == ("none", "none")


def test_last_epoch_of_a_stated_count_with_a_full_bar_then_driver_shutting_down(tmp_path):
    bars = ["distributed init (rank 0): env://, local_rank 0"] + [
        f"Epoch {e}/12: 100%|##########| 240/240 [01:02<00:00, 3.87s/it]" for e in (11, 12)]
    interruption, category, _d = _verdict(tmp_path, {"fit.log": "\n".join(bars) + "\n" + DRIVER_SHUTTING_DOWN})
    assert (interruption, category) == ("none", "none")


def test_exit_right_after_a_saved_checkpoint_is_a_normal_end(tmp_path):
    log = ("[03/02/26 10:02:11] INFO     trainer - INFO: torch.distributed initialized, world size 4, local_rank 0\n"
           "[Epoch 29 / Train]: 100%|##########| 64/64 [00:20<00:00,  3.11it/s, loss=0.311]\n"
           "[03/02/26 11:40:02] INFO     trainer - INFO: checkpoint for epoch 29 is saved to /runs/cls/ep29.pt\n"
           + DRIVER_SHUTTING_DOWN)
    interruption, category, d = _verdict(tmp_path, {"cls.log": log})
    assert (interruption, category) == ("none", "none")
    assert not any(f.id.startswith("cuda-error") for f in d.findings)


def test_exit_status_zero_echoed_after_the_launch_forgives_proxy_warnings(tmp_path):
    session = ("ops@brk-node4:~/bench$ python bench_alltoall.py --tokens 2048\n"
               "[check] dispatch BF16 ... passed\n[check] combine BF16 ... passed\n\n"
               + PROXY_CLOSE + "ops@brk-node4:~/bench$ echo $?\n0\n")
    interruption, category, d = _verdict(tmp_path, {"bench.txt": session})
    assert (interruption, category) == ("none", "none")
    assert any(f.id.startswith("teardown") for f in d.findings)


# ---------------------------------------------------------------- negative controls


def test_teardown_line_before_the_planned_end_fails_the_run(tmp_path):
    log = "\n".join(_iteration(i, 800, 30 + i // 100) for i in (200, 300)) + "\n" + DRIVER_SHUTTING_DOWN
    interruption, category, _d = _verdict(tmp_path, {"train.log": log})
    assert interruption != "none" and category == "application_error"


def test_proxy_close_mid_run_in_a_run_that_later_ended_still_fails(tmp_path):
    log = "\n".join([_iteration(400, 800, 34), PROXY_CLOSE.rstrip(), _iteration(800, 800, 38)]) + "\n"
    assert _verdict(tmp_path, {"train.log": log})[0] != "none"


def test_real_error_after_the_planned_end_still_fails(tmp_path):
    log = "\n".join([_iteration(800, 800, 38), "[after training is done] datetime: 2026-03-02 11:40:02",
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 1 has a total "
                     "capacity of 79.11 GiB of which 1.02 GiB is free.", _pg_warning(1)]) + "\n"
    assert _verdict(tmp_path, {"train.log": log})[:2] == ("soft", "cuda_oom")


def test_an_xid_the_console_printed_after_the_end_still_fails(tmp_path):
    log = "\n".join([_iteration(800, 800, 38), _pg_warning(0),
                     "NVRM: Xid (PCI:0000:41:00): 79, pid=40712, GPU has fallen off the bus."]) + "\n"
    assert _verdict(tmp_path, {"brk-node4/train.log": log})[0] == "hard"


def test_a_counter_inside_an_epoch_at_its_total_is_not_the_end(tmp_path):
    log = "\n".join(f"[2026-03-02 11:{m:02d}:00] epoch 3 iter {i}/500 loss 2.81 lr 0.001"
                    for m, i in ((30, 400), (31, 500))) + "\n" + DRIVER_SHUTTING_DOWN
    assert _verdict(tmp_path, {"train.log": log})[0] != "none"


def test_echo_after_another_command_says_nothing_about_the_job(tmp_path):
    session = ("ops@brk-node4:~/bench$ tail -n 2 bench.out\n" + PROXY_CLOSE
               + "ops@brk-node4:~/bench$ echo $?\n0\n")
    assert _verdict(tmp_path, {"bench.txt": session})[0] != "none"


def test_non_zero_exit_status_is_not_a_normal_end(tmp_path):
    session = ("ops@brk-node4:~/bench$ python bench_alltoall.py --tokens 2048\n[check] dispatch BF16 ... passed\n"
               + PROXY_CLOSE + "ops@brk-node4:~/bench$ echo $?\n1\n")
    assert _verdict(tmp_path, {"bench.txt": session})[0] != "none"



def test_a_zero_echoed_after_a_worker_raised_is_the_launchers_status_not_the_runs(tmp_path):
    """Some launchers (DeepSpeed's, a wrapper script) return 0 over workers that died: a worker's
    uncaught error printed before the shell's 0 fails the run."""
    session = ("ops@brk-node4:~/bench$ deepspeed bench_alltoall.py --tokens 2048\n"
               "[2026-03-02 10:01:07,214] [INFO] [launch.py:164:main] dist_world_size=2\n"
               "[2026-03-02 10:01:07,215] [INFO] [launch.py:166:main] Setting CUDA_VISIBLE_DEVICES=0,1\n"
               "Traceback (most recent call last):\n  File \"bench_alltoall.py\", line 12, in <module>\n"
               "    plan = build_plna(cfg)\nNameError: name 'build_plna' is not defined\n"
               "ops@brk-node4:~/bench$ echo $?\n0\n")
    interruption, category, _d = _verdict(tmp_path, {"bench.txt": session})
    assert (interruption, category) == ("soft", "application_error")


SUITE = ("[setup] tokens=2048 hidden=4096 local_rank 0 via torch.distributed\n"
         "[check] dispatch BF16 (async=False) ... passed\n[check] combine BF16 (async=False) ... {second}\n"
         "[check] dispatch FP8 (async=True) ... passed\n")


def test_every_case_passed_then_teardown_is_a_normal_end(tmp_path):
    log = SUITE.format(second="passed") + PROXY_CLOSE
    assert _verdict(tmp_path, {"suite.out": log})[:2] == ("none", "none")


def test_a_failed_case_before_the_teardown_is_not_a_normal_end(tmp_path):
    log = SUITE.format(second="failed") + PROXY_CLOSE
    assert _verdict(tmp_path, {"suite.out": log})[0] != "none"


def test_a_reported_non_zero_exit_outweighs_the_plan_reached(tmp_path):
    log = "\n".join([_iteration(800, 800, 38), _pg_warning(0)]) + "\n"
    files = {"train.log": log, "agent.txt": "local_rank 0 exit code 0\nlocal_rank 1 exit code 7\n"}
    assert _verdict(tmp_path, files)[0] != "none"
