"""The tester under real torchrun with gloo on this machine: 2 and 4 processes, two agents as two
"nodes" on loopback, and the injected faults it must catch (wrong data, a slow rank, a hung rank)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib.evidence.bundle import Bundle, verify
from gpulib.nccl.bandwidth import bus_factor
from gpulib.parsers import nccl_tests
from tests.prometheus_server import free_port

pytestmark = pytest.mark.torchrun

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
SMALL = ["-b", "1K", "-e", "64K", "-f", "4", "-n", "3", "-w", "1", "-c", "1"]


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("GPULIB_NCCL_TEST_INJECT")}
    out.update(OMP_NUM_THREADS="1", **extra)
    return out


def torchrun(nproc: int, args: list[str], *, timeout: float = 90, module: str = "gpulib.nccl",
             **inject: str) -> subprocess.CompletedProcess:
    """``python -m <module> args`` on ``nproc`` local processes under one torchrun agent."""
    cmd = [*TORCHRUN, "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           "-m", module, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env(**inject))


def check_rows(data: dict, collective: str, n: int) -> None:
    assert data["config"]["world_size"] == n and data["config"]["collective"] == collective
    assert data["rows"], "no rows measured"
    for row in data["rows"]:
        for p in (row["out_of_place"], row["in_place"]):
            if p is None:
                continue
            assert p["wrong"] == 0
            assert len(p["rank_time_us"]) == n
            assert p["algbw_gbps"] == pytest.approx(row["size_bytes"] / 1e3 / p["time_us"])  # S/t, GB = 1e9
            assert p["busbw_gbps"] == pytest.approx(p["algbw_gbps"] * bus_factor(collective, n))


@pytest.mark.parametrize("nproc,collective", [(2, "all_reduce"), (4, "all_reduce"), (4, "reduce_scatter")])
def test_gloo_sweep_numbers_and_table(tmp_path, nproc, collective):
    out = tmp_path / "out.json"
    proc = torchrun(nproc, ["--collective", collective, *SMALL, "--json", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    check_rows(data, collective, nproc)
    assert [r["size_bytes"] for r in data["rows"]][0] <= 1024 and data["wrong_total"] == 0
    assert data["verdict"]["status"] == "WARN" and "no GPU model: bandwidth not judged" in data["verdict"]["reason"]
    # the printed table is nccl-tests' layout: our own parser reads it back to the same numbers
    (run,) = nccl_tests.parse(proc.stdout, source="stdout").records
    assert run.gpulib["backend"] == "gloo" and run.collective == collective and run.nranks == nproc
    assert [r.size_bytes for r in run.rows] == [r["size_bytes"] for r in data["rows"]]
    assert run.avg_busbw_gbps == pytest.approx(data["avg_busbw_gbps"], rel=1e-3, abs=1e-6)
    assert run.wrong_total == 0 and run.oob_ok


@pytest.mark.parametrize("collective", ["all_gather", "broadcast", "reduce", "alltoall", "sendrecv"])
def test_every_collective_is_correct_on_three_ranks(tmp_path, collective):
    """Odd rank count: the 16-byte rounding of split collectives and the closed forms still hold."""
    out = tmp_path / f"{collective}.json"
    proc = torchrun(3, ["--collective", collective, "-b", "1K", "-e", "4K", "-f", "4", "-n", "1", "-w", "0",
                        "-r", "1", "-o", "max", "--json", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    check_rows(data, collective, 3)
    assert data["rows"][0]["size_bytes"] == (1008 if collective in ("all_gather", "alltoall") else 1024)


def test_injected_wrong_value_fails_the_run(tmp_path):
    out = tmp_path / "out.json"
    proc = torchrun(2, [*SMALL, "--json", str(out)], GPULIB_NCCL_TEST_INJECT_WRONG_RANK="1")
    assert proc.returncode != 0
    data = json.loads(out.read_text())
    assert data["wrong_total"] > 0 and data["verdict"]["status"] == "FAIL"
    assert "wrong elements" in data["verdict"]["reason"]
    assert "GPULIB_NCCL_TEST_INJECT_WRONG_RANK" in proc.stdout and "FAILED" in proc.stdout


def test_pairwise_names_the_injected_slow_rank(tmp_path):
    out = tmp_path / "out.json"
    proc = torchrun(4, ["-b", "16K", "-e", "16K", "-n", "3", "-w", "1", "-c", "0", "--pairwise", "ranks",
                        "--json", str(out)], GPULIB_NCCL_TEST_INJECT_DELAY_RANK="2", GPULIB_NCCL_TEST_INJECT_DELAY_MS="15")
    assert proc.returncode == 0, proc.stderr[-3000:]
    pairwise = json.loads(out.read_text())["pairwise"]
    assert pairwise["mode"] == "ranks" and len(pairwise["pairs"]) == 6
    assert pairwise["suspects"] == [2]
    assert 2 in (pairwise["slowest"]["a"], pairwise["slowest"]["b"])
    assert "rank 2" in pairwise["summary"] and "# gpulib pairwise: suspect: rank 2" in proc.stdout


def test_hung_rank_is_named_within_the_timeout(tmp_path):
    out = tmp_path / "out.json"
    proc = torchrun(3, ["-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "-T", "4", "--json", str(out)],
                    timeout=60, GPULIB_NCCL_TEST_INJECT_HANG_RANK="1")
    assert proc.returncode != 0
    data = json.loads(out.read_text())
    assert data["verdict"]["status"] == "FAIL"
    assert "1 of 3 ranks did not arrive: rank 1 (never reached its first measurement; process alive but stuck)" in data["failure"]
    assert "timeout after 4 s" in proc.stderr


def test_two_agents_as_two_nodes_on_loopback(tmp_path):
    out = tmp_path / "out.json"
    port = free_port()
    args = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", f"gpulib-test-{port}", "-m", "gpulib.nccl", "-b", "4K", "-e", "16K", "-f", "4", "-n", "2",
            "-w", "1", "--pairwise", "nodes", "--json", str(out)]
    agents = [subprocess.Popen([*TORCHRUN, "--node-rank", str(k), *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env()) for k in (0, 1)]
    try:
        results = [a.communicate(timeout=90) for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
    assert [a.returncode for a in agents] == [0, 0], results[0][1][-2000:] + results[1][1][-2000:]
    data = json.loads(out.read_text())
    check_rows(data, "all_reduce", 4)
    assert data["config"]["nodes"] == 2 and sorted({d["node"] for d in data["devices"]}) == [0, 1]
    assert data["pairwise"]["mode"] == "nodes" and len(data["pairwise"]["pairs"]) == 1


def test_gpulib_nccl_test_starts_torchrun_and_writes_a_bundle(tmp_path):
    bundle = tmp_path / "bundle"
    proc = subprocess.run([sys.executable, "-m", "gpulib", "nccl-test", "--nproc-per-node", "2", "--backend", "gloo",
                           *SMALL, "--bundle", str(bundle)], capture_output=True, text=True, timeout=90, env=env())
    assert proc.returncode == 1, proc.stderr[-3000:]  # WARN by the exit table: gloo on CPU is not judged
    opened = Bundle.open(bundle)
    assert [c.name for c in opened.collectors] == ["nccl-test"] and opened.collectors[0].status == "ok"
    assert verify(bundle).ok
    table = (bundle / "nccl" / "all_reduce_perf.txt").read_text()
    (run,) = nccl_tests.parse(table).records
    assert run.nranks == 2 and run.wrong_total == 0
    again = subprocess.run([sys.executable, "-m", "gpulib", "nccl-test", "--nproc-per-node", "2", *SMALL,
                            "--bundle", str(bundle)], capture_output=True, text=True, timeout=90, env=env())
    assert again.returncode != 0 and "bundle already exists" in again.stderr
    assert Path(bundle / "nccl" / "all_reduce.json").is_file()


def test_gpulib_nccl_test_inside_an_existing_torchrun(tmp_path):
    out = tmp_path / "out.json"
    proc = torchrun(2, ["nccl-test", "--collective", "broadcast", "-r", "1", *SMALL, "--expect-busbw", "0.000001",
                        "--json", str(out)], module="gpulib")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    check_rows(data, "broadcast", 2)
    assert data["verdict"]["status"] == "PASS" and data["verdict"]["threshold_source"] == "--expect-busbw"
