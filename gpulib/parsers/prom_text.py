"""dcgm-exporter metrics: the Prometheus text exposition (``curl :9400/metrics``) and the JSON a
Prometheus server returns for them (``/api/v1/query`` and ``/api/v1/query_range``, as
``gpulib collect --prometheus`` stores them).

Both become :class:`PromSample` records: metric name, labels, value, and (for JSON) the sample
time. The GPU identity labels are lifted into fields: ``gpu`` (DCGM's GPU id, equal to the
``device="nvidiaN"`` number but *not* the /dev minor), ``UUID``/``uuid``, ``pci_bus_id``
(optional: only exporters since mid-2024 set it; normalised), and the host from ``Hostname``
or ``hostname`` (the case changed between releases).

Value quirks handled: ints ``%d`` and doubles ``%f``; ``NaN``/``+Inf``; DCGM blank sentinels
(``9223372036854775794`` = NOT_SUPPORTED, etc.) and ``ERROR - FAILED TO CONVERT TO STRING``
become ``value=None`` with the reason in ``note``. ``DCGM_FI_DEV_XID_ERRORS`` is a gauge holding
the *last* Xid code (0 = none), not a count.

:func:`gpu_samples` pivots the per-metric series into :class:`GpuSample` rows (one per GPU per
moment) so the same throttling rules run on Prometheus history as on ``nvidia-smi`` sampling;
:func:`xid_events` turns each change of the Xid gauge into an ``xid`` :class:`KernelEvent`, so a
GPU whose kernel log is gone (node rebooted) still shows its Xid 79 on the timeline.

:func:`parse_counters` reads the exporter's counters CSV (``default-counters.csv``), which says
which families a deployment exports at all: a default one exports no ECC and no throttle data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TypeVar

from gpulib.identity import normalize_pci
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.gpu_records import GpuSample, decode_throttle_bitmask
from gpulib.parsers.kernel_log import KernelEvent

KIND = "dcgm_exporter"
KIND_COUNTERS = "dcgm_counters_csv"

_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S.*?)"
                     r"(?:\s+(?P<ts>-?\d+))?\s*$")
_LABEL = re.compile(r'\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*,?')
_INTEGER = re.compile(r"-?\d+")
# DCGM_INT64_BLANK (0x7ffffffffffffff0) + 0..3, DCGM_INT32_BLANK + 0..3, DCGM_FP64_BLANK + 0..3
_BLANKS = {0x7FFFFFFFFFFFFFF0 + i: why for i, why in enumerate(("blank", "not found", "not supported", "no permission"))}
_BLANKS.update({0x7FFFFFF0 + i: why for i, why in enumerate(("blank", "not found", "not supported", "no permission"))})
#: DCGM fields that fill a :class:`GpuSample`, and the field each fills (DCGM's units: C, MHz, W, %, MiB).
SAMPLE_FIELDS = {
    "DCGM_FI_DEV_GPU_TEMP": "temp_c", "DCGM_FI_DEV_MEMORY_TEMP": "temp_memory_c", "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_MEM_CLOCK": "mem_clock_mhz", "DCGM_FI_DEV_POWER_USAGE": "power_draw_w",
    "DCGM_FI_DEV_GPU_UTIL": "util_gpu_pct", "DCGM_FI_DEV_FB_USED": "mem_used_mib",
}
#: The clocks-event (throttle) reasons bitmask, under its old and its new name.
THROTTLE_METRICS = ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"
T = TypeVar("T")
_BLANKS.update({140737488355328.0 + i: why for i, why in enumerate(("blank", "not found", "not supported",
                                                                    "no permission"))})


@dataclass
class PromSample:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    value: float | None = None
    time_utc: str | None = None  # JSON API results and exposition lines with a timestamp
    note: str | None = None  # why value is None
    line: int | None = None

    @property
    def gpu(self) -> int | None:
        text = self.labels.get("gpu")
        return int(text) if text and text.isdigit() else None

    @property
    def uuid(self) -> str | None:
        return self.labels.get("UUID") or self.labels.get("uuid") or self.labels.get("gpu_uuid")

    @property
    def pci_bus_id(self) -> str | None:
        return normalize_pci(self.labels.get("pci_bus_id"))

    @property
    def host(self) -> str | None:
        return next((v for k, v in self.labels.items() if k.lower() == "hostname"), None)


@dataclass
class CounterSpec:
    """One line of a dcgm-exporter counters CSV: ``DCGM_FI_DEV_SM_CLOCK, gauge, SM clock ...``."""

    name: str
    prom_type: str  # gauge | counter | label
    help: str
    enabled: bool  # False when the line is commented out
    line: int | None = None


def looks_like(head: str) -> bool:
    text = head.lstrip()
    if text.startswith("{") and '"resultType"' in head:
        return True
    # the literal tests first: a multi-line anchored search costs ~60 us on every 8 KiB head
    return bool(("# HELP " in head or "# TYPE " in head) and re.search(r"^# (HELP|TYPE) \w+", head, re.M)
                or "DCGM_F" in head and re.search(r"^DCGM_F[IE]_\w+\{", head, re.M))


def _value(text: str) -> tuple[float | None, str | None]:
    if text.startswith("ERROR"):
        return None, text
    try:
        exact = int(text) if _INTEGER.fullmatch(text) else float(text)
    except ValueError:
        return None, f"not a number: {text!r}"
    if exact in _BLANKS:  # compared before float() rounds 2**63-14 to 2**63
        return None, f"DCGM blank value ({_BLANKS[exact]})"
    return float(exact), None


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_json(text: str, source: str, result: ParseResult) -> None:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        result.problems.append(Problem(source, f"broken JSON: {exc.msg}", exc.lineno))
        return
    if not isinstance(doc, dict) or doc.get("status") != "success":
        error = doc.get("error") if isinstance(doc, dict) else None
        result.problems.append(Problem(source, f"Prometheus answered with an error: {error or 'no status success'}"))
        return
    data = doc.get("data") or {}
    for series in data.get("result") or []:
        labels = dict(series.get("metric") or {})
        name = labels.pop("__name__", "")
        points = series.get("values") or ([series["value"]] if "value" in series else [])
        for point in points:
            try:
                moment, raw = float(point[0]), str(point[1])
            except (TypeError, ValueError, IndexError):
                result.problems.append(Problem(source, f"{name}: unreadable sample {point!r}"))
                continue
            value, note = _value(raw)
            result.records.append(PromSample(name, labels, value, _iso(moment), note))


def _labels(text: str) -> dict[str, str] | None:
    labels, pos = {}, 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if not m:
            return None
        labels[m["key"]] = m["value"].replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()
    return labels


def parse(text: str, source: str = "<text>") -> ParseResult[PromSample]:
    """Parse exposition text or Prometheus API JSON into :class:`PromSample` records."""
    result: ParseResult[PromSample] = ParseResult(KIND)
    if not text.strip():
        result.problems.append(Problem(source, "empty file: no metrics"))
        return result
    if text.lstrip().startswith("{"):
        _parse_json(text, source, result)
        return result
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        labels = _labels(m["labels"] or "") if m else None
        if m is None or labels is None:
            result.problems.append(Problem(source, f"not a metric line: {line.strip()[:80]!r}", number))
            if len(result.problems) >= 20 and not result.records:
                break
            continue
        value, note = _value(m["value"].strip())
        when = _iso(int(m["ts"]) / 1000) if m["ts"] else None
        result.records.append(PromSample(m["name"], labels, value, when, note, number))
    return result


def parse_counters(text: str, source: str = "<text>") -> ParseResult[CounterSpec]:
    """Parse a dcgm-exporter counters CSV; commented-out metric lines come back ``enabled=False``."""
    result: ParseResult[CounterSpec] = ParseResult(KIND_COUNTERS)
    for number, line in enumerate(text.splitlines(), 1):
        body = line.strip()
        enabled = not body.startswith("#")
        body = body.lstrip("#").strip()
        parts = [p.strip() for p in body.split(",", 2)]
        if len(parts) == 3 and re.fullmatch(r"DCGM_F[IE]_\w+", parts[0]) and parts[1] in ("gauge", "counter", "label"):
            result.records.append(CounterSpec(parts[0], parts[1], parts[2], enabled, number))
        elif enabled and body:
            result.problems.append(Problem(source, f"not a counters line: {body[:80]!r}", number))
    if not result.records and not result.problems:
        result.problems.append(Problem(source, "no DCGM field lines"))
    return result


def _gpu_key(sample: PromSample) -> tuple:
    return sample.host, sample.uuid or sample.pci_bus_id or sample.gpu


def gpu_samples(samples: Iterable[tuple[T, PromSample]]) -> list[tuple[T, GpuSample]]:
    """One :class:`GpuSample` per GPU and moment from DCGM series (each metric may come from its
    own file: ``prometheus/<METRIC>.json``). ``samples`` pairs each :class:`PromSample` with a tag
    of the caller's choice (its file); each row keeps the tag of the first sample that filled it."""
    rows: dict[tuple, tuple[T, GpuSample]] = {}
    for tag, s in samples:
        field_name = SAMPLE_FIELDS.get(s.name)
        if field_name is None and s.name not in THROTTLE_METRICS:
            continue
        key = (*_gpu_key(s), s.time_utc)
        if key not in rows:
            rows[key] = (tag, GpuSample(s.time_utc, index=s.gpu, pci_bus_id=s.pci_bus_id, uuid=s.uuid, host=s.host,
                                        line=s.line))
        row = rows[key][1]
        if s.value is None:
            continue
        if field_name:
            setattr(row, field_name, s.value)
        else:
            row.throttle_bitmask = int(s.value)
            row.throttle_reasons = decode_throttle_bitmask(int(s.value))
    return sorted(rows.values(), key=lambda ts: (str(ts[1].host), str(ts[1].index), ts[1].time_utc or ""))


def xid_events(samples: Iterable[tuple[T, PromSample]]) -> list[tuple[T, KernelEvent]]:
    """An ``xid`` :class:`KernelEvent` each time a GPU's ``DCGM_FI_DEV_XID_ERRORS`` gauge turns to a
    new non-zero code. The time is the first sample showing it (the Xid happened within one scrape
    interval before); a code already set in the first sample of the window is reported with
    ``details['before_window']`` - it happened at that time or earlier."""
    series: dict[tuple, list[tuple[T, PromSample]]] = {}
    for tag, s in samples:
        if s.name == XID_METRIC and s.value is not None:
            series.setdefault(_gpu_key(s), []).append((tag, s))
    events = []
    for points in series.values():
        points.sort(key=lambda ts: ts[1].time_utc or "")
        last = 0
        for index, (tag, s) in enumerate(points):
            code = int(s.value)
            if code and code != last:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items())
                                  if k in ("gpu", "UUID", "uuid", "pci_bus_id", "Hostname", "hostname", "device"))
                events.append((tag, KernelEvent(
                    s.line or 0, s.time_utc, s.host, "xid", f"{s.name}{{{labels}}} {code} at {s.time_utc} "
                    "(dcgm-exporter: last Xid of this GPU)", xid=code, pci_bus_id=s.pci_bus_id,
                    details={"source": "dcgm-exporter", "gpu": s.gpu, "uuid": s.uuid,
                             "before_window": index == 0})))
            last = code
    return events
