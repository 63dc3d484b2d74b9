"""Pull DCGM metrics for the incident window from Prometheus (``/api/v1/query_range``).

Why: the node may already be rebooted, but dcgm-exporter kept scraping it. The minutes before
the crash (temperature climbing, SM clock falling, an Xid gauge turning non-zero, a remap
pending) are in Prometheus for every node at once. Each metric is stored as the server's raw
JSON (``prometheus/<METRIC>.json``), so nothing is lost to interpretation.

A default dcgm-exporter deployment exports no ECC and no throttle counters (they are commented
out in ``default-counters.csv``); their absence is reported, not treated as an error.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone

from gpulib.collect.core import Collector, Outcome, Sink
from gpulib.errors import InputError

#: dcgm-exporter families pulled by default: the ones that explain a dead GPU or a straggler.
DCGM_METRICS = (
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_RETIRED_PENDING",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
)
#: Prometheus refuses a range query of more than 11,000 points per series.
MAX_POINTS = 11_000
_RELATIVE = re.compile(r"^-?(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str, now: float | None = None) -> float:
    """Unix seconds for ``now``, an age (``90m``, ``2h``, ``1d``; ``-2h`` means the same),
    unix seconds, or ISO-8601 (``2026-02-10T03:00:00Z``; without an offset it is taken as UTC)."""
    now = time.time() if now is None else now
    value = text.strip()
    if value == "now":
        return now
    match = _RELATIVE.match(value)
    if match:
        return now - float(match[1]) * _UNIT_S[match[2]]
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"cannot read the time {text!r}",
                         hint="use ISO-8601 (2026-02-10T03:00:00Z), unix seconds, 'now' or an age such as '2h'") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def step_for(start: float, end: float, wanted_s: float = 15.0) -> float:
    """The scrape-like step (15 s) unless the window is so long that it would exceed
    Prometheus's points-per-series limit."""
    return max(wanted_s, math.ceil((end - start) / (MAX_POINTS - 1)))


def _get(url: str, timeout_s: float) -> tuple[int | None, bytes, str | None]:
    """(HTTP status, body, error) — a 4xx/5xx still returns Prometheus's JSON error body."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read(), None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, b"", str(reason)


@dataclass
class PrometheusQuery:
    """What to pull: ``match`` is a label matcher added to every metric (``{Hostname=~"node-a|node-b"}``)
    so that a 1,000-node cluster does not send every GPU's history; without it the pull is
    cluster-wide (run it once per incident, not in every fan-out task)."""

    url: str
    start: float
    end: float
    step_s: float = 15.0
    match: str | None = None
    metrics: tuple[str, ...] = DCGM_METRICS

    def promql(self, metric: str) -> str:
        return metric + (self.match or "")


def prometheus_collector(query: PrometheusQuery) -> Collector:
    """One ``query_range`` per metric for [start, end], raw JSON per metric, plus
    ``prometheus/query.json`` saying what was asked and how many series came back."""
    if query.end <= query.start:
        raise InputError(f"--until ({query.end}) is not after --since ({query.start})",
                         hint="the window must have a positive length")
    if query.match and not (query.match.startswith("{") and query.match.endswith("}")):
        raise InputError(f"label matcher {query.match!r} must look like {{Hostname=\"node-b\"}}")
    step = step_for(query.start, query.end, query.step_s)
    base_url, start, end, metrics = query.url, query.start, query.end, query.metrics
    api = base_url.rstrip("/") + "/api/v1/query_range"

    def run(sink: Sink, timeout_s: float) -> Outcome:
        deadline = time.monotonic() + timeout_s
        summary = {"url": base_url, "start": start, "end": end, "step_s": step, "match": query.match, "metrics": {}}
        empty, errors = [], []
        for metric in metrics:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                errors.append(f"out of time before {metric}")
                break
            params = urllib.parse.urlencode({"query": query.promql(metric), "start": start, "end": end, "step": step})
            status, body, error = _get(f"{api}?{params}", min(30.0, remaining))
            if status is None:
                sink.write_json("prometheus/query.json", summary)
                return Outcome("failed", f"cannot reach Prometheus at {base_url}: {error}")
            sink.write_bytes(f"prometheus/{metric}.json", body)
            series = None
            try:
                doc = json.loads(body)
                if doc.get("status") == "success":
                    series = len(doc["data"]["result"])
                else:
                    error = f"{error or 'error'}: {doc.get('errorType')}: {doc.get('error')}"
            except (ValueError, KeyError, TypeError, AttributeError):
                error = f"{error or 'HTTP ' + str(status)}: the answer is not Prometheus API JSON"
            summary["metrics"][metric] = {"http_status": status, "series": series, "error": error}
            if error:
                errors.append(f"{metric}: {error}")
            elif not series:
                empty.append(metric)
        sink.write_json("prometheus/query.json", summary)
        notes = errors[:3] + ([f"no series for {len(empty)} metric(s): {', '.join(empty)}"] if empty else [])
        if errors and len(errors) >= len(metrics):
            return Outcome("failed", "; ".join(notes))
        return Outcome("ok", "; ".join(notes) or None)

    return Collector("prometheus", 120, run)
