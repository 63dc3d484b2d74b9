"""Command-line mistakes fail on every rank before any rank waits for another."""

from __future__ import annotations

import pytest

from gpulib.errors import InputError
from gpulib.nccl.cli import tester_parser as make_parser
from gpulib.nccl.runner import _check_args


@pytest.mark.parametrize("argv,env,message", [
    (["-r", "4"], {"RANK": "0", "WORLD_SIZE": "4"}, "root rank 4 does not exist in a job of 4 ranks"),
    (["-b", "1M", "-e", "1K"], {"RANK": "0", "WORLD_SIZE": "2"}, "bad size range"),
    (["-d", "float8"], {"RANK": "0", "WORLD_SIZE": "2"}, "unknown data type 'float8'"),
    (["-o", "avg", "-d", "int32"], {"RANK": "0", "WORLD_SIZE": "2"}, "-o avg needs a floating-point type"),
    (["--collective", "sendrecv"], {"RANK": "0", "WORLD_SIZE": "1"}, "sendrecv on gloo needs at least 2 ranks"),
    ([], {}, "not started by torchrun"),
])
def test_bad_command_lines(monkeypatch, argv, env, message):
    for key in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(InputError, match=message):
        _check_args(make_parser().parse_args(argv), "gloo")
