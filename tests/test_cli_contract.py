"""What every command promises (DESIGN.md): one exit-code table in each --help, a missing or
unreadable path is exit 2 naming it, and no traceback into a pipe whose reader left."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from gpulib import exit_codes
from gpulib.cli import COMMANDS, _subcommands, build_parser, main
from gpulib.readable import require_readable, unreadable_reason
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "incident-gpu-fell-off-bus"
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def gpulib_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpulib", *args]


def test_every_command_and_action_lists_the_one_exit_table():
    parser = build_parser([])  # `gpulib --help`: each command listed, none of their modules imported
    subs = list(_subcommands(parser))
    for name in COMMANDS:  # each command's own parser, as `gpulib NAME ...` builds it
        subs += list(_subcommands(build_parser([name])))
    assert len({s.prog for s in subs}) >= 15  # every command and every action (ckpt inspect, archive diff ...)
    table = exit_codes.table_text()
    for sub in subs:
        text = sub.format_help()
        assert all(f"  {code}  {meaning.split()[0]}" in text for code, meaning in exit_codes.TABLE.items()), sub.prog
        assert sub.epilog.count(table) == 1, sub.prog
    assert parser.epilog == table and "  5  the run itself failed" in parser.format_help()


def test_help_of_a_command_names_its_own_codes_under_the_table():
    out = subprocess.run(gpulib_cmd("run", "--help"), capture_output=True, text=True, env=ENV, check=True).stdout
    assert "exit codes (the same for every gpulib command):" in out
    mine = out.split("this command:")[1]
    assert "3 no-go: a hard root cause, or a blocking finding" in mine
    assert "5 the run itself failed" in mine and "2 an unknown runbook" in mine
    assert out.index("  5  the run itself failed") < out.index("this command:")


def test_run_codes_are_a_subset_of_the_table():
    from gpulib.runbooks.run import EXIT_MEANINGS

    assert set(EXIT_MEANINGS) == {exit_codes.OK, exit_codes.SOFT, exit_codes.HARD, exit_codes.UNKNOWN, exit_codes.RUN_FAILED}


MISSING_CASES = [
    ["diagnose", "{missing}"],
    ["diagnose", str(EXAMPLE), "{missing}"],  # one good path does not hide a typo in the other
    ["ckpt", "inspect", "{missing}"],
    ["ckpt", "verify", "--deep", "{missing}"],
    ["ckpt", "latest", "{missing}"],
    ["nccl-parse", "{missing}"],
    ["run", "incident", "--evidence", "{missing}"],
    ["archive", "list", "--archive", "{missing}"],
    ["archive", "show", "incident~0", "--archive", "{missing}"],
    ["archive", "show", "{missing}"],
    ["archive", "diff", "incident~1", "incident~0", "--archive", "{missing}"],
    ["fleet", "diff", "{missing}"],
    ["fleet", "ledger", "{missing}"],
    ["verify", "{missing}"],
]


@pytest.mark.parametrize("argv", MISSING_CASES, ids=lambda a: " ".join(a[:2]))
def test_a_missing_path_is_a_usage_error_naming_it(argv, tmp_path, capsys):
    missing = str(tmp_path / "inc-24")
    assert main([a.format(missing=missing) for a in argv]) == exit_codes.USAGE
    captured = capsys.readouterr()
    assert missing in captured.err and "no such file or folder" in captured.err
    assert "NO interruption" not in captured.out and "Traceback" not in captured.err


def test_a_file_where_a_folder_is_needed(tmp_path, capsys):
    f = tmp_path / "step-100.pt"
    f.write_bytes(b"x")
    assert main(["ckpt", "latest", str(f)]) == exit_codes.USAGE
    assert f"{f}: is a file, a folder was expected" in capsys.readouterr().err


def test_a_socket_is_unreadable_even_for_root(tmp_path, capsys):
    path = tmp_path / "evidence.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        assert unreadable_reason(path) == "is a socket, not a file"
        assert main(["diagnose", str(path)]) == exit_codes.USAGE
        assert str(path) in capsys.readouterr().err


def test_several_bad_paths_are_named_together(tmp_path):
    with pytest.raises(Exception) as err:
        require_readable([tmp_path / "a", tmp_path, tmp_path / "b"], what="evidence")
    text = str(err.value)
    assert "2 of 3 evidence paths are unusable" in text and f"{tmp_path / 'a'}:" in text and f"{tmp_path / 'b'}:" in text


def test_a_dangling_link_is_said(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    assert unreadable_reason(tmp_path / "link") == "a dangling symbolic link"


def test_unreadable_file_and_folder_without_root_read(tmp_path, run_without_root_read):
    secret = tmp_path / "dmesg.txt"
    secret.write_text("NVRM: Xid 79\n")
    secret.chmod(0)
    locked = tmp_path / "node-b"
    locked.mkdir()
    locked.chmod(0)
    try:
        done = run_without_root_read(
            f"import sys; sys.path.insert(0, {str(REPO)!r}); from gpulib.cli import main;"
            f"sys.exit(main(['diagnose', {str(secret)!r}, {str(locked)!r}]))")
    finally:
        secret.chmod(0o644)
        locked.chmod(0o755)
    assert done.returncode == exit_codes.USAGE, done.stderr
    assert f"{secret}: cannot be read: Permission denied" in done.stderr
    assert f"{locked}: folder cannot be listed: Permission denied" in done.stderr


@pytest.mark.parametrize("argv", [
    ["diagnose", str(EXAMPLE), "--format", "json"],
    ["diagnose", str(EXAMPLE)],
    ["run", "incident", "--parameters"],
    ["--help"],
], ids=lambda a: " ".join(a[:2]))
def test_a_reader_that_leaves_gets_no_traceback(argv):
    """`gpulib ... | head -1`: the pipe is closed before gpulib writes; stderr stays empty."""
    proc = subprocess.Popen(gpulib_cmd(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=REPO)
    proc.stdout.close()  # the reader is gone before the first byte
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert err == "", err
    assert code in (exit_codes.PIPE_CLOSED, 0, exit_codes.HARD)


def test_a_shell_pipe_into_head_prints_one_line_and_no_error():
    proc = subprocess.run(["bash", "-c", f"{sys.executable} -m gpulib diagnose {EXAMPLE} --format json | head -1"],
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.stdout == "{\n" and proc.stderr == ""


def test_a_bug_exits_5_not_1(monkeypatch, capsys):
    """An uncaught exception would exit 1 ("soft": a wrapper script relaunches); it is 5, with the traceback."""
    import gpulib.diagnose.cli as diagnose_cli

    monkeypatch.setattr(diagnose_cli.Evidence, "diagnose", lambda *a, **k: 1 / 0)
    assert main(["diagnose", str(EXAMPLE)]) == exit_codes.RUN_FAILED
    err = capsys.readouterr().err
    assert "ZeroDivisionError" in err and "gpulib diagnose: internal error" in err
