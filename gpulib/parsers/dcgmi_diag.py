"""``dcgmi diag -r N`` output: DCGM's active health checks, one row per test.

A ``Fail`` on ``GPU Memory``, ``Diagnostic``/``Targeted Stress``, ``PCIe`` or ``Memory Bandwidth``
for one GPU is hardware evidence that survives a reboot better than any log line; it is what a
vendor RMA asks for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.parsers.base import ParseResult

KIND = "dcgmi_diag"

_ROW = re.compile(r"^\|\s*(?P<test>[^|]*?)\s*\|\s*(?P<result>.*?)\s*\|\s*$")
_RESULT = re.compile(r"^(?P<verdict>Pass|Fail|Warn|Skip)\b(?:\s*-\s*GPUs?:\s*(?P<gpus>[\d,\s]+))?", re.I)


@dataclass
class DiagResult:
    """One test verdict; ``gpus`` empty when the row does not name them."""

    test: str
    verdict: str  # pass | fail | warn | skip
    gpus: list[int] = field(default_factory=list)
    message: str = ""
    line: int = 0


def looks_like(head: str) -> bool:
    return "| Diagnostic" in head and "| Result" in head


def parse(text: str, source: str = "<text>", **_opts) -> ParseResult[DiagResult]:
    result: ParseResult[DiagResult] = ParseResult(KIND)
    current_test = ""
    for number, line in enumerate(text.splitlines(), start=1):
        m = _ROW.match(line.strip())
        if not m or line.strip().startswith("|---") or m["test"] == "Diagnostic":
            continue
        test, value = m["test"], m["result"]
        if test:
            current_test = test
        if test.lower() == "warning" and result.records:
            result.records[-1].message = (result.records[-1].message + " " + value).strip()
            continue
        v = _RESULT.match(value)
        if v and current_test:
            gpus = [int(g) for g in re.findall(r"\d+", v["gpus"] or "")]
            result.records.append(DiagResult(current_test, v["verdict"].lower(), gpus, "", number))
    return result
