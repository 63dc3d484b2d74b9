"""``gpulib ckpt latest|inspect|verify`` on input that is not a checkpoint, through the real CLI in a
child process (with a timeout: a FIFO opened for reading would block forever). Each case must name
the file and the problem, exit with the documented code (DESIGN.md: 1 invalid / none resumable,
2 a path that does not exist or cannot be read) and never print a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _gpulib(*args: str | bytes, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([*prefix, sys.executable, "-m", "gpulib", "ckpt", *args], capture_output=True, timeout=120,
                         env=env, cwd=REPO)
    assert b"Traceback" not in run.stderr + run.stdout, (run.stdout + run.stderr).decode(errors="replace")
    return run


def _text(run: subprocess.CompletedProcess) -> str:
    return (run.stdout + run.stderr).decode(errors="surrogateescape")


@pytest.mark.parametrize("action", ["latest", "inspect", "verify"])
def test_path_that_does_not_exist(tmp_path, action):
    missing = tmp_path / "no-such" / "checkpoint-7"
    run = _gpulib(action, str(missing))
    assert run.returncode == 2 and str(missing) in _text(run) and "no such file or folder" in _text(run), _text(run)


@pytest.mark.parametrize("action", ["latest", "inspect", "verify"])
def test_symlink_loop_given(tmp_path, action):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    run = _gpulib(action, str(tmp_path / "a"))
    assert run.returncode == 2 and f"{tmp_path / 'a'}: Too many levels of symbolic links" in _text(run), _text(run)


def test_symlink_loop_inside_the_folder_is_named_and_skipped(tmp_path):
    (tmp_path / "last.pt").symlink_to("prev.pt")
    (tmp_path / "prev.pt").symlink_to("last.pt")
    (tmp_path / "here").symlink_to(".")  # a loop through a folder: not walked twice
    run = _gpulib("latest", str(tmp_path))
    assert run.returncode == 1, _text(run)
    assert f"{tmp_path / 'last.pt'}: symlink loop" in _text(run) and "dangling" not in _text(run), _text(run)


def test_fifo_named_like_a_checkpoint_is_never_opened(tmp_path):
    for name in ("last.pt", "model.safetensors"):
        os.mkfifo(tmp_path / name)
    for action in ("inspect", "verify"):
        run = _gpulib(action, str(tmp_path / "last.pt"))
        assert run.returncode == 1 and "a FIFO, not a regular file" in _text(run) and "last.pt" in _text(run), _text(run)
    run = _gpulib("latest", str(tmp_path))
    assert run.returncode == 1 and "model.safetensors: a FIFO" in _text(run), _text(run)


def test_zero_byte_file(tmp_path):
    (tmp_path / "ckpt_epoch_3.pt").write_bytes(b"")
    run = _gpulib("verify", str(tmp_path / "ckpt_epoch_3.pt"))
    assert run.returncode == 1 and "empty file (0 bytes)" in _text(run) and "ckpt_epoch_3.pt" in _text(run), _text(run)
    run = _gpulib("latest", str(tmp_path))
    assert run.returncode == 1 and "ckpt_epoch_3.pt: empty file (0 bytes)" in _text(run), _text(run)


def test_directory_named_model_safetensors(tmp_path):
    ck = tmp_path / "checkpoint-4"
    (ck / "model.safetensors").mkdir(parents=True)
    (ck / "trainer_state.json").write_text('{"global_step": 4}')
    run = _gpulib("verify", str(ck / "model.safetensors"))
    assert run.returncode == 1 and "a directory, not a checkpoint file" in _text(run), _text(run)
    run = _gpulib("latest", str(tmp_path))
    assert run.returncode == 1 and "model.safetensors is a directory, not a file" in _text(run), _text(run)


def test_non_utf8_file_name_is_printed_as_its_bytes_and_round_trips_in_json(tmp_path):
    torch = pytest.importorskip("torch")
    name = b"ckpt_step_\xff12.pt"  # Latin-1 bytes from another machine's locale
    with open(os.path.join(os.fsencode(tmp_path), name), "wb") as fh:  # torch.save takes no bytes path
        torch.save({"step": 12, "model": {"w": torch.ones(2)}}, fh)
    run = _gpulib("latest", str(tmp_path))
    assert run.returncode == 0 and name in run.stdout, _text(run)
    run = _gpulib("latest", "--format", "json", str(tmp_path))
    assert run.returncode == 0, _text(run)
    resume_from = json.loads(run.stdout)["resume_from"]
    assert os.path.isfile(os.fsencode(resume_from)) and os.fsencode(resume_from).endswith(name)
    run = _gpulib("verify", os.path.join(os.fsencode(tmp_path), name))
    assert run.returncode == 0 and b"VALID" in run.stdout, _text(run)


def _without_root_override() -> tuple[str, ...]:
    """Root reads a chmod-000 path anyway (CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH): drop those two
    capabilities for the child, so the permission bits count as for any user."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("running as root and setpriv (util-linux) is absent: chmod 000 does not deny root")
    prefix = (setpriv, "--bounding-set=-dac_override,-dac_read_search")
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"running as root and capabilities cannot be dropped here: {probe.stderr.decode(errors='replace')}")
    return prefix


@pytest.fixture
def locked(tmp_path):
    prefix = _without_root_override()
    top = tmp_path / "out"
    (top / "checkpoint-4").mkdir(parents=True)
    (top / "ckpt_step_9.pt").write_bytes(b"PK\x03\x04")
    (top / "checkpoint-4").chmod(0o000)
    (top / "ckpt_step_9.pt").chmod(0o000)
    yield top, prefix
    (top / "checkpoint-4").chmod(0o755)
    (top / "ckpt_step_9.pt").chmod(0o644)


def test_permission_denied(locked):
    top, prefix = locked
    run = _gpulib("latest", str(top / "checkpoint-4"), prefix=prefix)
    assert run.returncode == 2 and f"{top / 'checkpoint-4'}: folder cannot be listed: Permission denied" in _text(run), \
        _text(run)
    run = _gpulib("verify", str(top / "ckpt_step_9.pt"), prefix=prefix)
    assert run.returncode == 2 and f"{top / 'ckpt_step_9.pt'}: cannot be read: Permission denied" in _text(run), _text(run)
    run = _gpulib("latest", str(top), prefix=prefix)  # the folder given is fine, one checkpoint below it is not
    assert run.returncode == 1 and f"{top / 'checkpoint-4'}: permission denied" in _text(run), _text(run)
    assert "ckpt_step_9.pt" in _text(run) and "Permission denied" in _text(run), _text(run)
