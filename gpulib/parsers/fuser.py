"""``fuser -v /dev/nvidia*``: which processes still hold which GPU device files.

Why it matters: after a crash, a process that still holds ``/dev/nvidia5`` (often in D state
after Xid 79) blocks ``nvidia-smi -r`` and keeps the GPU "busy" for the relaunch. The N of
``/dev/nvidiaN`` is the driver *minor number*, not the nvidia-smi index: join it through
:attr:`GpuState.minor_number` (they differ on many boards).

fuser writes only the PIDs to stdout and everything else (header, device names, users) to
stderr, so a useful capture is ``fuser -v /dev/nvidia* 2>&1``. A capture of stdout alone (bare
PIDs) still yields the PIDs, with a problem saying the device names were lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulib.parsers.base import ParseResult, Problem

KIND = "fuser"

_HEADER = re.compile(r"^\s*USER\s+PID\s+ACCESS\s+COMMAND\s*$")
_ROW = re.compile(r"^(?:(?P<device>/\S+?):)?\s+(?P<user>\S+)\s+(?P<pid>\d+|kernel)\s+(?P<access>[.\w]+)\s+(?P<command>.*?)\s*$")
_BARE_PIDS = re.compile(r"^\s*(\d+[cefFrmn]*\s*)+$")
_GPU_DEVICE = re.compile(r"^/dev/nvidia(\d+)$")


@dataclass
class DeviceUser:
    device: str | None  # "/dev/nvidia5", "/dev/nvidiactl", "/dev/nvidia-uvm"
    pid: int | None  # None for the kernel itself ("kernel mount")
    user: str | None = None
    access: str | None = None  # "F...m": F open file, m mmap'ed, c cwd, e executable, r root
    command: str | None = None
    line: int | None = None

    @property
    def gpu_minor(self) -> int | None:
        """N for ``/dev/nvidiaN`` (a GPU); None for nvidiactl, nvidia-uvm, nvidia-caps..."""
        m = _GPU_DEVICE.match(self.device or "")
        return int(m[1]) if m else None


def looks_like(head: str) -> bool:
    lines = [line for line in head.splitlines() if line.strip()]
    if not lines:
        return False
    if _HEADER.match(lines[0]):
        return True
    return bool(re.match(r"^/dev/nvidia[\w-]*:\s", lines[0]))


def parse(text: str, source: str = "<text>") -> ParseResult[DeviceUser]:
    """Parse ``fuser -v`` output into one :class:`DeviceUser` per (device, process) pair."""
    result: ParseResult[DeviceUser] = ParseResult(KIND)
    device: str | None = None
    bare: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or _HEADER.match(line):
            continue
        m = _ROW.match(line)
        if m:
            device = m["device"] or device
            pid = None if m["pid"] == "kernel" else int(m["pid"])
            result.records.append(DeviceUser(device=device, pid=pid, user=m["user"], access=m["access"],
                                             command=m["command"] or None, line=number))
        elif re.match(r"^/\S+:\s*$", line.strip()):
            device = line.strip()[:-1]  # a device name on its own line (no users of it here)
        elif _BARE_PIDS.match(line):
            bare += [int(re.match(r"\d+", token)[0]) for token in line.split()]
        else:
            result.problems.append(Problem(source, f"not a fuser -v line: {line.strip()[:80]!r}", number))
            if len(result.problems) >= 20 and not result.records:
                break
    if bare:
        result.records += [DeviceUser(device=None, pid=pid) for pid in dict.fromkeys(bare)]
        result.problems.append(Problem(source, "only PIDs were captured: fuser prints device names and users on "
                                               "stderr (capture with 2>&1)"))
    if not result.records and not result.problems:
        result.problems.append(Problem(source, "empty: no process holds an NVIDIA device (or fuser found none)"))
    return result
