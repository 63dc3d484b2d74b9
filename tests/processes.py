"""Process helpers shared by tests that check a hung command was really killed."""

from __future__ import annotations

import time


def process_gone(pid: int, within_s: float = 5.0) -> bool:
    """True when ``pid`` stops running (absent, or a zombie waiting for its reaper) within
    ``within_s``: SIGKILL is delivered asynchronously, so a busy machine may need a moment."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
