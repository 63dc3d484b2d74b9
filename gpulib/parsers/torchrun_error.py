"""torchrun error files: the JSON a ``@record``-decorated entrypoint writes when it raises.

torchrun points ``TORCHELASTIC_ERROR_FILE`` at a per-rank file; the ChildFailedError report then
shows it as ``error_file: /tmp/.../error.json`` and prints its traceback. The file holds the
exception message of the failing rank, which is often the only place its real error survives.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from gpulib.identity import to_utc_iso
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.training_log import JobEvent

KIND = "torchrun_error_file"

_EXC = re.compile(r"(?P<cls>[A-Za-z_][\w.]*(?:Error|Exception))(?::\s*(?P<msg>.*))?")


def looks_like(head: str) -> bool:
    text = head.lstrip()
    return text.startswith("{") and '"message"' in text and ("extraInfo" in text or "py_callstack" in text)


def parse(text: str, source: str = "<text>", **_opts) -> ParseResult[JobEvent]:
    result: ParseResult[JobEvent] = ParseResult(KIND)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        result.problems.append(Problem(source, f"not valid JSON: {exc}"))
        return result
    message = doc.get("message") if isinstance(doc, dict) else None
    inner = message if isinstance(message, dict) else doc if isinstance(doc, dict) else {}
    text_msg = inner.get("message") if isinstance(inner.get("message"), str) else str(message or "")
    extra = inner.get("extraInfo") or {}
    when = None
    stamp = extra.get("timestamp") if isinstance(extra, dict) else None
    if stamp and str(stamp).isdigit():
        when = to_utc_iso(datetime.fromtimestamp(int(stamp), tz=timezone.utc))
    last_line = text_msg.strip().splitlines()[-1] if text_msg.strip() else ""
    m = _EXC.search(last_line)
    details = {"message": text_msg.strip()[:2000], "class": m["cls"].rsplit(".", 1)[-1] if m else None}
    kind = "cuda_oom" if "out of memory" in text_msg.lower() else "cuda_error" if "CUDA error" in text_msg else "exception"
    if kind == "cuda_error":
        details["error"] = text_msg.split("CUDA error:", 1)[1].strip().splitlines()[0]
    result.records.append(JobEvent(1, kind, last_line or text_msg[:200], time_utc=when, details=details))
    return result
