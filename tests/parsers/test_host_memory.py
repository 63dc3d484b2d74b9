"""Host memory samples (host_memory): a /proc/meminfo CSV, sar -r, free snapshots; own hosts, times, sizes."""

from __future__ import annotations

from gpulib.parsers import host_memory
from gpulib.parsers.detect import detect_kind

CSV = ("# MemTotal/MemAvailable every 10 min on gb-head3\n"
       "timestamp,MemTotal,MemAvailable\n"
       "2026-09-03T11:00:00Z,131072000,52428800\n"
       "2026-09-03T11:10:00Z,131072000,13107200\n")
SAR = ("Linux 6.8.0-1015-nvidia (gb-head3) \t09/03/2026 \t_aarch64_\t(20 CPU)\n\n"
       "11:00:01 AM kbmemfree   kbavail kbmemused  %memused kbbuffers  kbcached  kbcommit   %commit  kbactive   kbinact"
       "   kbdirty\n"
       "11:10:01 AM   3010220  12888120 110000000     83.92    204800   9100000 121000000     92.3  81000000  21000000"
       "      2048\n"
       "Average:      3010220  12888120 110000000     83.92    204800   9100000 121000000     92.3  81000000  21000000"
       "      2048\n")
FREE = ("$ date -u; free -g\n"
        "Thu Sep  3 11:10:05 UTC 2026\n"
        "               total        used        free      shared  buff/cache   available\n"
        "Mem:             125         110           2           0          13          12\n"
        "Swap:              0           0           0\n")


def test_a_meminfo_csv():
    assert host_memory.looks_like(CSV)
    samples = host_memory.parse(CSV).records
    assert [s.time_utc for s in samples] == ["2026-09-03T11:00:00Z", "2026-09-03T11:10:00Z"]
    assert [round(s.available_pct) for s in samples] == [40, 10]


def test_sar_r_names_its_host_and_date():
    assert host_memory.looks_like(SAR)
    (s,) = host_memory.parse(SAR).records
    assert (s.host, s.time_utc) == ("gb-head3", "2026-09-03T11:10:01Z")
    assert 9.5 < s.available_pct < 10.5


def test_free_timed_by_the_date_above_it():
    (s,) = host_memory.parse(FREE).records
    assert s.time_utc == "2026-09-03T11:10:05Z" and s.mem_total_kib == 125 * 1024 ** 2
    assert round(s.available_pct) == 10


def test_detected_as_its_kind_and_other_csvs_are_not():
    assert detect_kind("memfree-samples.csv", CSV) == host_memory.KIND
    assert not host_memory.looks_like("time,loss,lr\n1,2.3,0.1\n")


def test_garbled_rows_are_problems_not_exceptions():
    result = host_memory.parse(CSV + "2026-09-03T11:20:00Z,x\n" + "\x00\xff,,\n")
    assert len(result.records) == 2 and result.problems
