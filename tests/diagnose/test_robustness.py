"""Bad evidence never raises: junk, truncation, odd files and empty folders become notes.

The property tests throw arbitrary bytes/text at the parsers and at a whole diagnosis; the
example tests pin the message an operator sees for each kind of bad input.
"""

from __future__ import annotations

import json
import os
import random
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulib.cli import main
from gpulib.diagnose import diagnose
from gpulib.parsers import dcgmi_diag, flight_recorder, registry, slurm, torchrun_error
from gpulib.parsers import training_log as tl
from tests.conftest import locked_folder


def problems_of(d) -> dict[str, str]:
    return {i["path"]: " ".join(i.get("problems", [])) for i in d.to_dict()["inputs"]}


def test_empty_folder_is_unknown_not_none(tmp_path, capsys):
    code = main(["diagnose", str(tmp_path), "--format", "json"])
    out = capsys.readouterr().out
    assert '"interruption": "unknown"' in out and "empty folder" in out
    assert code == 4


def test_missing_path_is_an_input_error(tmp_path, capsys):
    code = main(["diagnose", str(tmp_path / "typo")])
    err = capsys.readouterr().err
    assert code == 2 and str(tmp_path / "typo") in err and "no such file" in err


def test_missing_path_is_reported(tmp_path):
    d = diagnose([tmp_path / "nope"])
    assert problems_of(d)[str(tmp_path / "nope")] == "no such file or folder"


def test_junk_binary_truncated_unknown_and_empty_files(tmp_path):
    (tmp_path / "core.dump").write_bytes(bytes(range(256)) * 64)
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("call the vendor on monday\nremember milk\n")
    (tmp_path / "latin1.log").write_bytes("caf\xe9 ".encode("latin-1") * 100 + b"\n")
    xml = "<?xml version=\"1.0\" ?>\n<nvidia_smi_log>\n<timestamp>Mon Jan  5 10:00:00 2026</timestamp>\n<gpu id="
    (tmp_path / "nvsmi.xml").write_text(xml)  # cut in the middle of the first GPU
    d = diagnose([tmp_path])
    notes = problems_of(d)
    assert "binary data" in notes["core.dump"]
    assert notes["empty.log"] == "empty file"
    kinds = {i["path"]: i["kind"] for i in d.to_dict()["inputs"]}
    # a text file of no known format is still read line by line for signatures, and says so by its kind
    assert kinds["notes.txt"] == "text" and not notes["notes.txt"]
    assert kinds["latin1.log"] == "text"  # undecodable bytes are text, not "binary data"
    assert "XML is broken or cut short" in notes["nvsmi.xml"] and "no <gpu> elements" in notes["nvsmi.xml"]
    assert d.interruption == "none"


def test_truncated_job_log_still_yields_what_it_has(tmp_path):
    text = ("node-1:10:11 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE\n"
            "[rank0]:[E101 01:00:00.0 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 6")
    (tmp_path / "rank0.log").write_text(text)
    d = diagnose([tmp_path])
    assert d.interruption == "unknown"  # a timeout with no evidence of why: say so, do not guess
    assert any("rank" in step or "kernel log" in step for step in d.next_steps)


def test_huge_single_line_and_fifo(tmp_path):
    (tmp_path / "oneline.log").write_text("[rank0]: " + "x" * (10 * 1024 * 1024) + " CUDA error: misaligned address\n")
    os.mkfifo(tmp_path / "pipe.log")  # reading it would block forever
    d = diagnose([tmp_path])
    notes = problems_of(d)
    assert "not a regular file" in notes["pipe.log"]
    assert "only its start was read" in notes["oneline.log"]


def test_unreadable_file(tmp_path, run_without_root_read):
    root = tmp_path
    path = root / "dmesg.txt"
    path.write_text("[Mon Jan  5 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    path.chmod(0)
    (root / "train.log").write_text("[rank0]: step 10 loss 2.0\n")
    code = (
        "import json, sys; from gpulib.diagnose import diagnose;"
        f"d = diagnose([{str(root)!r}]).to_dict();"
        "print(json.dumps({i['path']: ' '.join(i.get('problems', [])) for i in d['inputs']}))"
    )
    done = run_without_root_read(code)
    assert done.returncode == 0, done.stderr
    problems = json.loads(done.stdout)
    assert "permission denied" in problems["dmesg.txt"]
    assert problems["train.log"] == "", "the readable file next to it is still read"


def test_dangling_symlink(tmp_path):
    (tmp_path / "kern.log").symlink_to(tmp_path / "gone")
    assert problems_of(diagnose([tmp_path]))["kern.log"] == "broken symbolic link"


def test_ten_thousand_small_files(tmp_path):
    rnd = random.Random(7)
    for i in range(10_000):
        sub = tmp_path / f"d{i % 50}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}.txt").write_text("".join(rnd.choice(string.ascii_letters + " \n") for _ in range(40)))
    d = diagnose([tmp_path])
    assert len(d.inputs) == 10_000 and d.interruption == "none"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=4096))
def test_every_parser_survives_random_bytes(data):
    text = data.decode("utf-8", "replace")
    for spec in registry.SPECS:
        spec.looks_like(text)
        result = spec.parse(registry.Source("random", text=text), registry.Options())
        assert result.kind == spec.kind
    assert flight_recorder.parse_bytes(b"\x80\x04" + data, "random").records == []
    for module in (dcgmi_diag, slurm, torchrun_error, tl):
        module.parse(text, "random")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([
    "[rank1]:[E101 01:02:03.0 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: ",
    "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=10) ran for 11 milliseconds before timing out.",
    "h:1:2 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 busId 1b000 - Init START",
    "[Mon Jan  5 10:00:00 2026] NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus.",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "Root Cause (first observed failure):",
    "  rank      : x (local_rank: y)", "  exitcode  : -9 (pid: ", "\x00\xff", "Last error:", "", "\t" * 5,
]), max_size=30), st.text(max_size=200))
def test_diagnosis_survives_shuffled_real_fragments(tmp_path_factory, lines, noise):
    folder = tmp_path_factory.mktemp("frag")
    (folder / "a.log").write_text("\n".join(lines) + noise, errors="replace")
    (folder / "b.txt").write_text(noise + "\n".join(reversed(lines)), errors="replace")
    d = diagnose([folder])
    assert d.interruption in ("hard", "soft", "none", "unknown")
    d.to_text()


def test_unlistable_folder_is_named_not_called_empty(tmp_path, run_without_root_read):
    code = (
        "import json; from gpulib.diagnose import diagnose;"
        f"print(json.dumps(diagnose([{str(tmp_path)!r}]).to_dict()['inputs']))"
    )
    with locked_folder(tmp_path / "node-b", {"dmesg.txt": "x\n"}):
        done = run_without_root_read(code)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "cannot list folder: permission denied" in text and "node-b" in text
    assert "empty folder" not in text
