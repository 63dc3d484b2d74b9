"""Reading an incident's files on worker processes (:mod:`gpulib.evidence.fanout`) gives the same answer.

The workers read chunks of the walk and the parent merges them in order; these tests make the
chunks small so that a dozen nodes cross many chunk borders (bundles, the job log, a checkpoint
folder, a pasted session), and compare the whole diagnosis with the one read in-process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpulib.diagnose import diagnose
from gpulib.evidence import fanout, gather
from gpulib.fleet.simulate import simulate_incident


def _answer(paths: list[Path]) -> str:
    return json.dumps(diagnose(paths).to_dict(), sort_keys=True)


@pytest.mark.parametrize("kind", ["xid79", "thermal"])
def test_workers_give_the_answer_one_process_gives(tmp_path, monkeypatch, kind):
    incident = simulate_incident(tmp_path / kind, 12, kind, seed=5, drift_nodes=2)
    raw = tmp_path / kind / "raw-node"
    (raw / "ckpt").mkdir(parents=True)
    (raw / "ckpt" / "model.pt").write_bytes(b"PK\x03\x04 not really a checkpoint")
    (raw / "ckpt" / "latest").write_text("global_step100\n")
    (raw / "session.txt").write_text("user@raw-node:~$ nvidia-smi --query-gpu=index,pci.bus_id,temperature.gpu "
                                     "--format=csv\nindex, pci.bus_id, temperature.gpu\n0, 00000000:18:00.0, 40\n"
                                     "user@raw-node:~$ dmesg -T | tail -1\n[Mon Feb 10 03:12:07 2026] NVRM: "
                                     "Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
                                     "the bus.\n")
    monkeypatch.setattr(fanout, "CHUNK_FILES", 7)
    monkeypatch.setenv(fanout.WORKERS_ENV, "1")
    alone = _answer([incident.root])
    monkeypatch.setenv(fanout.WORKERS_ENV, "2")
    assert _answer([incident.root]) == alone
    read = gather.gather([incident.root])
    assert [str(d) for _root, d in read.checkpoint_dirs] == [str(raw / "ckpt")]


def test_workers_are_used_only_for_many_files_and_idle_cpus(monkeypatch):
    monkeypatch.delenv(fanout.WORKERS_ENV, raising=False)
    load = [0.0]
    monkeypatch.setattr(os, "getloadavg", lambda: (load[0], 0.0, 0.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert fanout.workers(fanout.MIN_FILES - 1) == 1
    assert fanout.workers(fanout.MIN_FILES) == 2
    load[0] = 0.4  # another process on a core now and then: both still idle enough
    assert fanout.workers(fanout.MIN_FILES) == 2
    load[0] = 1.0  # one core busy: workers would share the other one with this process
    assert fanout.workers(fanout.MIN_FILES) == 1
    load[0] = 5.0
    assert fanout.workers(100_000) == 1
    load[0] = 0.0
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    assert fanout.workers(100_000) == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(64)), raising=False)
    assert fanout.workers(100_000) == fanout.MAX_WORKERS
    load[0] = 61.0
    assert fanout.workers(100_000) == 3
    monkeypatch.setenv(fanout.WORKERS_ENV, "3")
    assert fanout.workers(5) == 3
    monkeypatch.setenv(fanout.WORKERS_ENV, "many")
    with pytest.raises(ValueError, match="GPULIB_READ_WORKERS='many': give a whole number"):
        fanout.workers(5)


def _square_or_die(chunk: list[int]) -> list[int]:
    if os.getpid() != PARENT and chunk[0] == 6:
        os._exit(3)  # a worker killed mid-way (out of memory)
    return [n * n for n in chunk]


PARENT = os.getpid()


def test_results_keep_the_chunks_order_and_a_broken_pool_is_finished_here():
    chunks = fanout.chunked(list(range(10)), 3)
    assert chunks == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert list(fanout.ordered_map(_square_or_die, chunks[:2] + chunks[3:], 2)) == [[0, 1, 4], [9, 16, 25], [81]]
    assert list(fanout.ordered_map(_square_or_die, chunks, 2)) == [[n * n for n in c] for c in chunks]


def test_digests_keep_their_place_between_chunks():
    entries = [(Path(f"f{i}"), {}) for i in range(5)]
    digest = {"digest": "node-7"}
    parts = gather._parts([*entries[:3], (Path("node-7"), digest), *entries[3:]], 2)
    assert parts == [entries[0:2], entries[2:3], digest, entries[3:5]]
