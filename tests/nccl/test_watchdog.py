"""The watchdog's diagnosis against a real TCPStore (the store torchrun gives every job)."""

from __future__ import annotations

import threading
import time

from torch.distributed import TCPStore

from gpulib.nccl.watchdog import Watchdog


def test_names_dead_and_stuck_ranks():
    store = TCPStore("127.0.0.1", 0, world_size=1, is_master=True, wait_for_workers=False)
    dog = Watchdog(store, rank=0, world_size=4, timeout_s=600)
    dog.step("all_reduce 1024 B out-of-place")  # rank 0 arrived (seq 1)
    store.set("gpulib-nccl/step/1", "1|all_reduce 1024 B out-of-place")  # rank 1 arrived too
    store.set("gpulib-nccl/step/2", "0|setup")  # rank 2 is behind and its heartbeat keeps moving
    # rank 3 never published a step and has no heartbeat: dead
    stop = threading.Event()

    def beat():
        while not stop.is_set():
            store.add("gpulib-nccl/alive/1", 1)
            store.add("gpulib-nccl/alive/2", 1)
            time.sleep(0.2)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        message, reporter = dog.diagnose()
    finally:
        stop.set()
        thread.join()
        dog.close()
    assert "2 of 4 ranks did not arrive" in message
    assert "rank 2 (last at 'setup'; process alive but stuck)" in message
    assert "rank 3 (never reached its first measurement; no heartbeat: process dead or host unreachable)" in message
    assert reporter  # rank 0 is the lowest live rank that arrived: it writes the report
