""""none" only on positive evidence of a normal end: the generic failure vocabulary.

A log that says something failed in words no signature knows, and never says the job ended well,
must not be answered "none" (exit 0: a script relaunches onto the broken node). It is ``unknown``
(exit 4) with the most suspicious line quoted. Benign lines stay benign, and a run that reports
its normal end stays "none" whatever it printed on the way.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulib.diagnose import diagnose
from gpulib.parsers import signatures

#: Progress lines of a healthy trainer (no failure word, no end marker).
PROGRESS = [f"2026-05-04 02:{m:02d}:{s:02d},118 INFO trainer.py:88 step {m * 60 + s}/9000 loss=2.{s:02d}13 "
            "lr=3.0e-04 1.31 s/step" for m in range(10, 13) for s in range(0, 60, 7)]
#: One line of each family of the generic failure vocabulary, as the tools print them.
FAILURES = [
    "2026-05-04 02:13:07,551 ERROR data.py:212 shard /mnt/qx-data/part-00412.arrow could not be decoded",
    "FATAL: the parameter server on qx-node-07 went away",
    "[E0504 02:13:07.551812118 init.cc:41] cannot initialise the communicator",
    "E0504 02:13:07.551812 48213 plugin.cc:120] plugin handshake with qx-node-07 refused",
    "misc/socket.cc:484 NCCL WARN Net : Connect to 10.31.4.7<39211> timed out",
    "Traceback (most recent call last):",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to qx-node-07:29511 (errno: 110).",
    "Segmentation fault (core dumped)",
    "qx-train exited with exit code 134",
    "slurmstepd: *** JOB 77120 ON qx-node-03 CANCELLED AT 2026-05-04T02:13:09 ***",
    "the reducer stalled for 900 s waiting for bucket 17",
    "WARNING: possible deadlock in the prefetch thread",
    "Killed",
]
#: Lines that look alarming but say nothing failed: they must not turn a healthy excerpt unknown.
BENIGN = [
    "warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)",
    "qx-node-01:4110:4110 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.",
    "evaluation: 412 passed, 0 failed",
    "error_rate=0.000 retries=0",
    "Test Error:",
]
#: Launcher and logger wrappings a line arrives in.
PREFIXES = ["", "[rank3]:", "3: ", "[1,3]<stderr>:", "qx-node-05: ", "2026-05-04T02:13:07.551Z: ",
            "[2026-05-04 02:13:07,551] "]


def _write(folder: Path, name: str, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _verdict(paths) -> tuple[str, str]:
    d = diagnose(list(paths))
    return d.interruption, d.category


@pytest.mark.parametrize("line", FAILURES)
def test_a_failure_line_no_signature_knows_is_unknown_with_the_line_quoted(tmp_path, line):
    path = _write(tmp_path, "train.log", [*PROGRESS, line])
    d = diagnose([path])
    assert d.interruption != "none", d.summary
    if d.interruption == "unknown" and d.root_cause is None:
        quoted = [e.text for f in d.findings for e in f.quotes]
        assert any(line.strip() in q for q in quoted) or "stops at" in d.summary, (d.summary, quoted)
        assert d.next_steps, "an unknown must say what to collect next"


@pytest.mark.parametrize("line", BENIGN)
def test_benign_lines_stay_benign(tmp_path, line):
    path = _write(tmp_path, "notes.txt", [line])
    assert _verdict([path]) == ("none", "none")


def test_a_run_that_reports_its_end_is_none_whatever_it_printed(tmp_path):
    path = _write(tmp_path, "train.log", [*PROGRESS, FAILURES[0], FAILURES[6], "Training completed in 3h 12m"])
    assert _verdict([path])[0] == "none"


def test_a_log_that_stops_mid_run_is_unknown_but_a_process_seen_exiting_is_not(tmp_path):
    stopped = _write(tmp_path / "a", "train.log", PROGRESS)
    d = diagnose([stopped])
    assert d.interruption == "unknown" and "stops at" in d.summary
    exited = _write(tmp_path / "b", "train.log", [*PROGRESS, "", "real\t3m29.863s", "user\t10m41.203s"])
    assert _verdict([exited]) == ("none", "none")
    # the trainer's own summary says its loop ended; it does not vouch for a good end (detectron2 prints
    # it from a finally hook after a crash too), so a failure line beside it still counts
    summary = "2026-05-04 05:22:10,004 INFO trainer.py:301 :: Total training time: 11520.4 seconds"
    assert _verdict([_write(tmp_path / "c", "train.log", [*PROGRESS, summary])]) == ("none", "none")
    assert _verdict([_write(tmp_path / "d", "train.log", [*PROGRESS, FAILURES[0], summary])])[0] == "unknown"


def test_the_most_suspicious_line_leads(tmp_path):
    """Severity, then rarity within the file: the line printed once beats the one printed 40 times."""
    noisy = ["2026-05-04 02:11:00,001 WARNING io.py:12 retry failed for a cache entry"] * 40
    path = _write(tmp_path, "train.log", [*PROGRESS[:5], *noisy, FAILURES[0], *PROGRESS[5:]])
    d = diagnose([path])
    assert d.interruption == "unknown"
    assert FAILURES[0] in d.findings[0].quotes[0].text


def test_generic_lines_are_bounded_per_file(tmp_path):
    """A log that prints an ERROR per bad sample keeps the first and the last lines, not all of them."""
    lines = [f"ERROR cannot decode sample /data/qx/img_{i:07d}_{chr(97 + i % 26)}x.jpg" for i in range(1500)]
    path = _write(tmp_path, "loader.log", lines)
    found = [s for s in signatures.scan_file(path).records if s.signature in signatures.generic_signatures()]
    assert len(found) <= 2 * signatures.GENERIC_KEEP
    assert max(s.line for s in found) == 1500


def test_a_line_a_signature_reads_gets_no_generic_reading(tmp_path):
    path = _write(tmp_path, "t.log", ["[rank2]:[E0504 02:13:07.551812118 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog "
                                      "caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
                                      "NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 milliseconds"])
    assert [s.signature for s in signatures.scan_file(path).records] == ["watchdog-timeout"]


def test_ib_asked_for_but_sockets_used_is_a_soft_network_fault(tmp_path):
    """NCCL echoes NCCL_IB_HCA, finds no IB device and falls back to sockets: the RDMA device is not
    reachable from the job (a container without /dev/infiniband): soft, the fabric is fine."""
    path = _write(tmp_path, "nccl.log", ["NCCL INFO NCCL_IB_HCA set to mlx5_2:1,mlx5_3:1",
                                         "NCCL INFO NET/IB : No device found.",
                                         "NCCL INFO NET/Socket : Using [0]eth1:10.44.0.9<0>",
                                         "NCCL INFO Using network Socket"])
    assert _verdict([path]) == ("soft", "network_fabric")
    healthy = _write(tmp_path / "one-node", "nccl.log", ["NCCL INFO NET/IB : No device found.",
                                                         "NCCL INFO Using network Socket"])
    assert _verdict([healthy]) == ("none", "none")  # nothing asked for IB: one node, sockets are a choice


# ---------------------------------------------------------------- properties
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.sampled_from(FAILURES), before=st.integers(0, len(PROGRESS)), prefix=st.sampled_from(PREFIXES),
       name=st.text(alphabet="abcdefghijlmnopqstuvwxyz_-", min_size=3, max_size=10),
       suffix=st.sampled_from(["", ".log", ".txt", ".out"]), split=st.booleans())
def test_no_failure_line_is_ever_none_however_it_is_wrapped_named_or_split(tmp_path_factory, line, before, prefix,
                                                                           name, suffix, split):
    """Any log without an end marker holding one line of the vocabulary is never "none"; renaming
    the file, a launcher prefix or a stamp on every line and splitting it in two keep the answer."""
    folder = tmp_path_factory.mktemp("case")
    lines = [*PROGRESS[:before], line, *PROGRESS[before:]]
    plain = _verdict([_write(folder / "plain", "train.log", lines)])
    assert plain[0] != "none"
    wrapped = [prefix + x for x in lines]
    if split:
        cut = before + 1
        paths = [_write(folder / "split", f"{name}-a{suffix}", wrapped[:cut]),
                 _write(folder / "split", f"{name}-b{suffix}", wrapped[cut:] or PROGRESS[:1])]
        got = _verdict([folder / "split"])
    else:
        paths = [_write(folder / "renamed", name + suffix, wrapped)]
        got = _verdict(paths)
    assert got[0] != "none"
    # the category of an "unknown" is a guess from what each file's kind lets a parser read (a line
    # alone in a file of its own is plain text); the verdict itself, and a known cause, are kept
    assert got[0] == plain[0], (line, prefix, name + suffix, split)
    if plain[0] != "unknown":
        assert got == plain, (line, prefix, name + suffix, split)
