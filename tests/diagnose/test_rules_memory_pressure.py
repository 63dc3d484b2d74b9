"""Host memory pressure up to a failure (rules/memory_pressure.py): available memory low at the last
sample before the first failure line and released after it is host_oom (soft) on that host, with no
OOM kill; low memory only after the failure, or memory steady at half, is not. Own hosts, pids, times;
vLLM's and Loki's own layouts."""

from __future__ import annotations

import json

import pytest

from gpulib.diagnose import diagnose


def _loki(rows: list[tuple[str, str]], host: str = "gb-head3") -> str:
    return "".join(json.dumps({"ts": ts, "labels": {"container": "llm-srv", "host": host, "job": "docker"},
                               "line": line}) + "\n" for ts, line in rows)


ENGINE_DIES = _loki([
    ("2026-09-03T11:02:00.101Z", "(APIServer pid=301) INFO 09-03 11:02:00 [loggers.py:123] Engine 000: Avg prompt "
                                 "throughput: 0.0 tokens/s, Running: 0 reqs"),
    ("2026-09-03T11:21:40.517Z", "(EngineCore_DP0 pid=655) ERROR 09-03 11:21:40 [core.py:710] TimeoutError: RPC call "
                                 "to execute_model timed out."),
    ("2026-09-03T11:21:40.902Z", "(APIServer pid=301) ERROR 09-03 11:21:40 [async_llm.py:480] "
                                 "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."),
])


def _csv(pcts: list[tuple[str, float]]) -> str:
    total = 130023424
    return "time_utc,mem_total_kib,mem_available_kib\n" + "".join(
        f"2026-09-03T{t}:00Z,{total},{int(total * p / 100)}\n" for t, p in pcts)


PRESSURE = [("11:00", 18.2), ("11:10", 12.9), ("11:20", 11.4), ("11:30", 95.1)]


def test_memory_low_to_the_failure_and_freed_after_is_host_pressure(tmp_path):
    (tmp_path / "server.jsonl").write_text(ENGINE_DIES)
    (tmp_path / "meminfo.csv").write_text(_csv(PRESSURE))
    d = diagnose([tmp_path])
    assert (d.interruption, d.category) == ("soft", "host_oom")
    assert d.root_cause.host == "gb-head3"


def test_sar_r_names_the_host_under_pressure(tmp_path):
    (tmp_path / "server.jsonl").write_text(ENGINE_DIES.replace('"host": "gb-head3", ', ""))
    (tmp_path / "sar-r.txt").write_text(
        "Linux 6.8.0-1015-nvidia (gb-head9) \t09/03/2026 \t_aarch64_\t(20 CPU)\n\n"
        "11:00:01 AM kbmemfree   kbavail kbmemused  %memused kbbuffers  kbcached  kbcommit   %commit\n"
        "11:20:01 AM   2010220  12888120 112000000     85.44    204800   9100000 121000000     92.3\n"
        "11:30:01 AM 119010220 121888120   5000000      3.81    204800   9100000  21000000     12.3\n")
    d = diagnose([tmp_path])
    assert d.category == "host_oom" and d.root_cause.host == "gb-head9"


@pytest.mark.parametrize("pcts", [
    [("11:00", 48.0), ("11:10", 47.2), ("11:20", 46.9), ("11:30", 96.0), ("11:40", 8.0)],  # low only long after
    [("11:00", 51.0), ("11:10", 50.2), ("11:20", 49.8), ("11:30", 50.5)],  # steady at half
    [("11:00", 12.0), ("11:10", 11.2), ("11:20", 10.9), ("11:30", 11.5)],  # low, never released: not the job's
])
def test_memory_that_was_not_the_jobs_pressure_is_not_blamed(tmp_path, pcts):
    (tmp_path / "server.jsonl").write_text(ENGINE_DIES)
    (tmp_path / "meminfo.csv").write_text(_csv(pcts))
    d = diagnose([tmp_path])
    assert d.category != "host_oom"
    assert not any(f.id.startswith("memory-pressure") for f in d.findings)
