"""Run one external command safely: argument list, own process group, hard timeout.

Why a process group: on a broken GPU node ``nvidia-smi`` can block for minutes inside the
driver, and tools such as ``ipmitool`` or a wrapper script fork children. Killing only the
direct child leaves the grandchildren holding the output pipe open, and the collector would
hang anyway. Each command therefore starts its own session, and on timeout the whole group
gets SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field


@dataclass
class CommandResult:
    """What one command did. ``status`` uses the bundle vocabulary (ok/unavailable/failed/timeout)."""

    argv: list[str]
    status: str
    reason: str | None
    returncode: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def provenance(self) -> dict:
        """The line of ``commands.json`` that says exactly what was run and how it ended."""
        return {
            "argv": self.argv,
            "status": self.status,
            "reason": self.reason,
            "returncode": self.returncode,
            "seconds": round(self.seconds, 3),
            "stdout_bytes": len(self.stdout),
            "stderr_bytes": len(self.stderr),
        }


def first_line(data: bytes, limit: int = 200) -> str:
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def run_command(argv: list[str], timeout_s: float, merge_stderr: bool = False, env: dict | None = None) -> CommandResult:
    """Run ``argv`` (never through a shell) and classify the outcome.

    * not on PATH → ``unavailable`` ("ibstat not found on PATH")
    * not executable → ``failed`` ("permission denied running …")
    * still running after ``timeout_s`` → process group killed, ``timeout``; partial output kept
    * non-zero exit → ``failed`` with the exit code and the first line of stderr
    """
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
    except FileNotFoundError:
        return CommandResult(argv, "unavailable", f"{argv[0]} not found on PATH", None)
    except PermissionError:
        return CommandResult(argv, "failed", f"permission denied running {argv[0]}", None)
    except OSError as exc:
        return CommandResult(argv, "failed", f"cannot start {argv[0]}: {exc.strerror or exc}", None)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        stdout, stderr = _drain(proc)
        return CommandResult(
            argv,
            "timeout",
            f"{' '.join(argv)} gave no answer within {timeout_s:g} s; its process group was killed",
            None,
            stdout or b"",
            stderr or b"",
            time.monotonic() - started,
        )
    seconds = time.monotonic() - started
    stderr = stderr or b""
    if proc.returncode == 0:
        return CommandResult(argv, "ok", None, 0, stdout, stderr, seconds)
    detail = first_line(stderr) or first_line(stdout) or "no message"
    if proc.returncode < 0:
        reason = f"{argv[0]} killed by signal {-proc.returncode}: {detail}"
    else:
        reason = f"{argv[0]} exited with code {proc.returncode}: {detail}"
    return CommandResult(argv, "failed", reason, proc.returncode, stdout, stderr, seconds)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """Collect what the killed command had written; give up after a short grace period
    (a process stuck in the kernel, state D, can ignore SIGKILL until the driver returns)."""
    try:
        return proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:
        return b"", b""
