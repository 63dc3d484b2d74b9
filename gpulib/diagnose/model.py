"""The timeline of a diagnosis: what happened where and when, in the order the evidence says.

Findings themselves are :class:`gpulib.findings.Finding` (one model for the diagnosis, the
notebooks, the runbooks and the report).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TimelineEntry:
    time: str | None
    host: str | None
    source: str
    event: str

    def to_dict(self) -> dict:
        return {"time": self.time, "host": self.host, "source": self.source, "event": self.event}
