"""Every command x every kind of hostile or clumsy path: a clear message naming the path and the
problem, the exit code of the one table (DESIGN.md: 2 usage or input error, 4 unknown: nothing
readable), no traceback, no hang.

The inputs: a path that does not exist, an empty folder, a file where a folder is expected, a
FIFO (never opened: it blocks until a writer comes), a link to ``/dev/zero`` (never ends), a
symlink loop, a folder and a file that cannot be read (root's permission bypass dropped with
``setpriv``, as CI runs as root), a 0-byte file, binary bytes, one 50 MB line, a name that is
not UTF-8, and a folder holding a FIFO named like a log.

All cells run in three child processes (``tests/adversarial/cli_child.py``): each calls
``gpulib.cli.main(argv)`` in-process per cell, with an alarm per cell (a FIFO opened by mistake
is a reported hang, not a stuck test run) and a capped address space (``/dev/zero`` read to its
end fails fast). Two children share the commands; the third runs the unreadable cells without
root's permission bypass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

NON_UTF8 = b"node-\xff\xfe.log"

#: input kind -> what it is (the test ids)
KINDS = ("missing", "empty_dir", "file", "fifo", "dev_zero", "loop", "unreadable_dir", "unreadable_file",
         "zero_bytes", "binary", "line_50mb", "non_utf8_name", "fifo_inside", "json_like_log",
         "locked_inside")
UNREADABLE = ("unreadable_dir", "unreadable_file", "locked_inside")


#: kind -> the file name of its input (what the message must name)
NAMES = {"missing": "no-such-incident", "empty_dir": "empty-dir", "file": "notes.txt", "fifo": "train.log",
         "dev_zero": "zero.log", "loop": "loop-a", "unreadable_dir": "locked", "unreadable_file": "locked.log",
         "zero_bytes": "empty.log", "binary": "blob.log", "line_50mb": "one-line.log",
         "non_utf8_name": "node-\\udcff\\udcfe.log", "fifo_inside": "with-fifo",  # as printed: escaped bytes
         "json_like_log": "last.pt",  # a console log saved under a checkpoint name: "[rank0]: ..." is no JSON
         "locked_inside": "node-c"}  # node-c/ holds a log and a subfolder that cannot be listed


def _build(root: Path) -> dict[str, str | bytes]:
    root.mkdir()
    paths: dict[str, str | bytes] = {kind: str(root / name) for kind, name in NAMES.items()}
    paths["non_utf8_name"] = os.fsencode(root) + b"/" + NON_UTF8
    (root / NAMES["empty_dir"]).mkdir()
    (root / NAMES["file"]).write_text("restarted the job at 03:20, see the ticket\n")
    os.mkfifo(root / NAMES["fifo"])
    (root / NAMES["dev_zero"]).symlink_to("/dev/zero")
    (root / NAMES["loop"]).symlink_to("loop-b")
    (root / "loop-b").symlink_to(NAMES["loop"])
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
    (root / NAMES["unreadable_dir"]).mkdir()
    (root / NAMES["unreadable_dir"] / "dmesg.txt").write_text(xid)
    (root / NAMES["unreadable_file"]).write_text(xid)
    (root / NAMES["zero_bytes"]).write_bytes(b"")
    (root / NAMES["binary"]).write_bytes(bytes(range(256)) * 256)
    with open(root / NAMES["line_50mb"], "wb") as fh:
        fh.write(b"x" * (50 << 20))
    with open(paths["non_utf8_name"], "wb") as fh:
        fh.write(b"epoch 3 step 120 loss 2.31\n")
    (root / NAMES["fifo_inside"]).mkdir()
    os.mkfifo(root / NAMES["fifo_inside"] / "rank0.log")
    (root / NAMES["json_like_log"]).write_text("[rank0]: epoch 3 step 120 loss 2.31\n[rank1]: epoch 3 step 120\n")
    (root / NAMES["locked_inside"] / "nvsmi").mkdir(parents=True)
    (root / NAMES["locked_inside"] / "train.log").write_text("epoch 3 step 120 loss 2.31\n")
    (root / NAMES["locked_inside"] / "nvsmi" / "q.txt").write_text("==============NVSMI LOG==============\n")
    (root / NAMES["unreadable_file"]).chmod(0)
    (root / NAMES["unreadable_dir"]).chmod(0)
    (root / NAMES["locked_inside"] / "nvsmi").chmod(0)
    return paths


def _cmd(*words):
    return lambda path, scratch: [*words, path]


#: command -> argv builder (path, a scratch folder of the cell) -> argv
COMMANDS = {
    "diagnose": _cmd("diagnose"),
    "diagnose-json": _cmd("diagnose", "--format", "json"),
    "ckpt-inspect": _cmd("ckpt", "inspect"),
    "ckpt-verify": _cmd("ckpt", "verify"),
    "ckpt-latest": _cmd("ckpt", "latest"),
    "verify": _cmd("verify"),
    "collect-logs": lambda p, s: ["collect", "--out", f"{s}/bundle", "--only", "logs", "--logs", p],
    "fleet-diff": _cmd("fleet", "diff"),
    "fleet-ledger": _cmd("fleet", "ledger"),
    "nccl-parse": _cmd("nccl-parse"),
    "archive-show": _cmd("archive", "show"),
    "archive-list": lambda p, s: ["archive", "list", "--archive", p],
    "archive-diff": lambda p, s: ["archive", "diff", p, p],
    "storage-probe": lambda p, s: ["storage-probe", "--seconds", "0.2", "--engine", "python", p],
    "watch": lambda p, s: ["watch", "--log", p, "--from-start", "--max-seconds", "0.5s", "--poll", "0.1s",
                           "--listen", "off"],
    "drill": lambda p, s: ["drill", p, "--out", f"{s}/drill"],
    "healthcheck": lambda p, s: ["slurm", "healthcheck", "--node", "gpu-m1", "--dry-run", "--evidence", p],
    "run-evidence": lambda p, s: ["run", "incident", "--archive", f"{s}/archive", "--evidence", p],
}

#: kinds every command refuses up front, exit 2, naming the path (a FIFO or device is never opened)
REFUSED = ("missing", "fifo", "dev_zero", "loop", "unreadable_dir", "unreadable_file")
#: the readable kinds: whatever each command makes of them (below)
READ = ("empty_dir", "file", "zero_bytes", "binary", "line_50mb", "non_utf8_name", "fifo_inside", "json_like_log",
        "locked_inside")
#: readable text with no failure line in it: "none" when nothing says a job failed or stopped
#: mid-run, else "unknown" (the diagnosis's own rule, gpulib/diagnose): either is the table's
PLAIN_TEXT = {0, 4}


def _table(refused, **read) -> dict[str, set[int]]:
    """Expected exit codes of one command: ``refused`` for REFUSED kinds, ``read[kind]`` (or
    ``read["other"]``) for the readable ones."""
    out = {kind: {refused} if isinstance(refused, int) else set(refused) for kind in REFUSED}
    for kind in READ:
        value = read.get(kind, read.get("other"))
        if value is not None:
            out[kind] = {value} if isinstance(value, int) else set(value)
    return out


EXPECTED: dict[str, dict[str, set[int]]] = {
    # nothing readable (0 bytes, binary, only a FIFO, empty folder) is unknown: 4, never "none"
    # ... and a subfolder it could not list makes any "none" unknown (4): the cause may be in it
    "diagnose": _table(2, other=4, file=PLAIN_TEXT, line_50mb=PLAIN_TEXT, non_utf8_name=PLAIN_TEXT,
                       json_like_log=PLAIN_TEXT),
    "diagnose-json": _table(2, other=4, file=PLAIN_TEXT, line_50mb=PLAIN_TEXT, non_utf8_name=PLAIN_TEXT,
                            json_like_log=PLAIN_TEXT),
    # a path that is no checkpoint is INVALID (1), a FIFO or device named as such, never opened; a log
    # whose first byte is "[" is no JSON checkpoint either (neither torch.load nor safetensors opens it)
    "ckpt-inspect": {**_table(2, other=1), "fifo": {1}, "dev_zero": {1}},
    "ckpt-verify": {**_table(2, other=1), "fifo": {1}, "dev_zero": {1}},
    # a folder without checkpoints: none resumable (1)
    "ckpt-latest": _table(2, other=2, empty_dir=1, fifo_inside=1, locked_inside=1),
    "verify": _table(2, other=2),
    # collect freezes the scene first: an unusable --logs path is recorded in the bundle, named, exit 0
    "collect-logs": _table(0, other=0),
    "fleet-diff": _table(2, other=2),
    "fleet-ledger": _table(2, other=2),
    "nccl-parse": _table(2, other=2),
    "archive-show": _table(2, other=2),
    "archive-list": _table(2, other=2, empty_dir=0, fifo_inside=0, locked_inside=0),  # an archive root with no run yet
    "archive-diff": _table(2, other=2),
    "storage-probe": _table(2, other=0, empty_dir=2, zero_bytes=2, fifo_inside=2),  # measures what it can read
    # a --log not written yet is waited for (--help); a folder is not a log
    "watch": {**_table(2, other=0, empty_dir=2, fifo_inside=2, locked_inside=2), "missing": {0}},
    "drill": _table(2, other=0, non_utf8_name=2, locked_inside=2),  # the notebook holds the path as text
    # no GPU snapshot in readable evidence: "no GPU visible", no-go (3, a dry run drains nothing)
    "healthcheck": _table(2, other=2, file=3, line_50mb=3, non_utf8_name=3, json_like_log=3),
    "run-evidence": {kind: {2} for kind in REFUSED},  # readable evidence runs the whole runbook: tests/runbooks
}
#: commands that read inside a folder: the subfolder they could not list is named, never skipped silently
NAMES_LOCKED_SUBFOLDER = {"diagnose", "collect-logs", "fleet-ledger", "drill", "healthcheck"}
E = {(command, kind): codes for command, table in EXPECTED.items() for kind, codes in table.items()}


def _wire(arg):
    return {"b": arg.decode("latin-1")} if isinstance(arg, bytes) else arg


def _prefix_without_root_read() -> list[str] | None:
    """``setpriv`` dropping root's permission bypass (None: it cannot be dropped here)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"] if setpriv else None


def run_matrix(root: Path) -> dict[tuple[str, str], dict]:
    """Every cell's result: {code, hang, out, err, escaped, seconds} by (command, kind)."""
    inputs = _build(root / "in")
    groups: list[list[dict]] = [[], [], []]
    for n, (command, argv_of) in enumerate(COMMANDS.items()):
        for kind in KINDS:
            if (command, kind) not in E:
                continue
            scratch = root / "cells" / f"{command}-{kind}"
            scratch.mkdir(parents=True)
            case = {"id": [command, kind], "argv": [_wire(a) for a in argv_of(inputs[kind], str(scratch))]}
            groups[2 if kind in UNREADABLE else n % 2].append(case)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    prefix = _prefix_without_root_read()
    children = []
    for n, cases in enumerate(groups):
        if not cases or (n == 2 and prefix is None):
            continue
        spec = root / f"cases-{n}.json"
        spec.write_text(json.dumps(cases))
        children.append(subprocess.Popen([*(prefix if n == 2 else []), sys.executable, "-m", "tests.adversarial.cli_child",
                                          str(spec)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                         cwd=root, text=True))
    results = {}
    for child in children:
        out, err = child.communicate(timeout=600)
        for line in out.splitlines():
            doc = json.loads(line)
            results[tuple(doc.pop("id"))] = doc
        assert child.returncode == 0, err[-3000:]
    return results


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-matrix")
    try:
        yield run_matrix(root)
    finally:
        for path in (NAMES["unreadable_dir"], NAMES["unreadable_file"], f"{NAMES['locked_inside']}/nvsmi"):
            (root / "in" / path).chmod(0o755)


@pytest.mark.parametrize(("command", "kind"), sorted(E), ids=[f"{c}-{k}" for c, k in sorted(E)])
def test_cell(matrix, command, kind):
    if kind in UNREADABLE and _prefix_without_root_read() is None:
        pytest.skip("running as root without util-linux setpriv: root's permission bypass cannot be dropped")
    cell = matrix[(command, kind)]
    text = cell["out"] + cell["err"]
    assert not cell["hang"], f"hung (stopped after its alarm): {text[-1500:]}"
    assert cell["escaped"] is None and "Traceback" not in text, (cell["escaped"] or "") + text[-3000:]
    assert cell["code"] in E[(command, kind)], f"exit {cell['code']}, the table says {E[(command, kind)]}: {text[-1500:]}"
    if kind in REFUSED and not (command == "watch" and kind == "missing") or cell["code"] == 2:
        assert NAMES[kind] in text, f"the message does not name the path ({NAMES[kind]}): {text[-1500:]}"
    if kind == "locked_inside" and command in NAMES_LOCKED_SUBFOLDER:
        assert f"{NAMES[kind]}/nvsmi" in text, f"the unlistable subfolder is not named: {text[-1500:]}"


BAD_OPTIONS = [
    (["diagnose", "--tz", "Europe/Berln", "x"], "unknown time zone 'Europe/Berln'"),  # was read as UTC, silently
    (["fleet", "diff", "--tz", "Mars/Olympus", "x"], "unknown time zone 'Mars/Olympus'"),
    (["nccl-test", "--nproc-per-node", "0"], "--nproc-per-node: must be > 0"),  # was torchrun's traceback
    (["nccl-test", "-n", "-1"], "-n/--iters: must be > 0"),
    (["nccl-test", "-T", "0"], "-T/--timeout: must be > 0"),
    (["nccl-parse", "--nics", "0", "x"], "--nics: must be > 0"),
    (["run", "incident", "--jobs", "0"], "--jobs: must be > 0"),  # was: the runbook started
    (["run", "incident", "--cell-timeout", "-1"], "--cell-timeout: must be > 0"),
    (["archive", "diff", "a", "b", "--bandwidth-drop-pct", "-5"], "--bandwidth-drop-pct: must be >= 0"),
    (["fleet", "ledger", "--top", "-1", "x"], "--top: must be >= 0"),
    (["drill", "--copy-limit-mib", "-1", "x"], "--copy-limit-mib: must be >= 0"),
    (["storage-probe", "--seconds", "0", "x"], "--seconds: must be > 0"),
    (["watch", "--log", "x", "--silence", "soon"], "--silence: expected a positive duration"),
    (["slurm", "healthcheck", "--gpus", "-1"], "--gpus: must be >= 0"),
    (["diagnose", "--format", "xml", "x"], "invalid choice: 'xml'"),
    (["diagnose", "--no-such-flag", "x"], "unrecognized arguments: --no-such-flag"),
    (["ckpt"], "required"),
]


@pytest.mark.parametrize(("argv", "said"), BAD_OPTIONS, ids=[" ".join(a[:3]) for a, _ in BAD_OPTIONS])
def test_bad_option_is_a_usage_error_before_anything_runs(argv, said, capsys):
    from gpulib.cli import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err and "Traceback" not in err, err
