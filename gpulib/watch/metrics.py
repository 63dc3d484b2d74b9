"""The watch's state as Prometheus metrics on ``/metrics``, through ``prometheus_client``.

Why expose it: the cluster's Prometheus already pages people. With these series it can alert on
a silent training job with the same routing, silences and history as a hot GPU
(``monitoring/prometheus/alerts.yml``, group ``gpulib-watch``), and Grafana can draw the silence
beside the GPU temperatures of the same window.

The state is read at scrape time by a custom collector (:class:`WatchCollector`) over the
watch's rules, under the watch's lock; ``prometheus_client`` writes the exposition format and
serves it in a daemon thread, on 127.0.0.1 by default: the log lines name hosts and ranks, so
exposing them on every interface is the operator's explicit choice (``--listen 0.0.0.0:9488``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpulib.watch.rules import WatchRules

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_IDENT = ["file", "rank", "host"]


class WatchCollector(Collector):
    """Reads ``rules`` at every scrape. ``rank`` is empty for lines that name no rank; ``now`` is
    fixed only in tests; ``lock`` is the watch's, held while the state is read."""

    def __init__(self, rules: WatchRules, host: str, lock: threading.Lock | None = None,
                 now: float | None = None) -> None:
        self.rules, self.host, self.lock, self.now = rules, host, lock, now

    def collect(self) -> Iterator[Metric]:
        with self.lock if self.lock is not None else contextlib.nullcontext():
            yield from self._families(time.time() if self.now is None else self.now)

    def _families(self, now: float) -> list[Metric]:
        rules, host = self.rules, self.host
        streams = sorted(rules.streams.values(), key=lambda s: (s.file, -1 if s.rank is None else s.rank))

        def ident(s) -> list[str]:
            return [s.file, "" if s.rank is None else str(s.rank), s.host or host]

        def gauge(name: str, help_text: str, rows, labels=_IDENT) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, help_text, labels=labels)
            for values, value in rows:
                family.add_metric(values, float(value))
            return family

        def counter(name: str, help_text: str, rows, labels=_IDENT) -> CounterMetricFamily:
            family = CounterMetricFamily(name, help_text, labels=labels)
            for values, value in rows:
                family.add_metric(values, float(value))
            return family

        last_any = max((s.last_line_time for s in streams if s.last_line_time), default=rules.started)
        return [
            gauge("gpulib_watch_seconds_since_last_line",
                  "Seconds since this rank (or file) printed its last line; watch start if none yet.",
                  [(ident(s), now - (s.last_line_time or rules.started)) for s in streams]),
            gauge("gpulib_watch_last_line_timestamp_seconds", "Unix time of the stream's last line.",
                  [(ident(s), s.last_line_time) for s in streams if s.last_line_time]),
            gauge("gpulib_watch_heartbeat",
                  "1 when the stream has printed progress (step) lines, so its silence is judged.",
                  [(ident(s), int(s.heartbeat)) for s in streams]),
            gauge("gpulib_watch_seconds_since_any_line", "Seconds since any followed file printed a line.",
                  [([host], now - last_any)], ["host"]),
            gauge("gpulib_watch_job_completed",
                  "1 after the job printed its own end (Training completed, ... Succeeded): silence is then expected.",
                  [([host], int(rules.completed))], ["host"]),
            gauge("gpulib_watch_silence_threshold_seconds", "The watch's --silence threshold.",
                  [([host], rules.config.silence_s)], ["host"]),
            gauge("gpulib_watch_step_seconds", "Duration of the stream's latest training step.",
                  [(ident(s), s.step_seconds) for s in streams if s.step_seconds is not None]),
            gauge("gpulib_watch_step_median_seconds", "Median step duration of the stream's recent steps.",
                  [(ident(s), s.step_median_s) for s in streams if s.step_median_s is not None]),
            gauge("gpulib_watch_step_phase_ms",
                  "Latest per-phase step timing the rank printed (fwd_bwd_ms=..., data_ms=...), in milliseconds.",
                  [([*ident(s), name], value) for s in streams for name, value in sorted(s.phase_ms.items())],
                  [*_IDENT, "phase"]),
            counter("gpulib_watch_lines_total", "Lines read per stream since the watch started.",
                    [(ident(s), s.lines_total) for s in streams]),
            counter("gpulib_watch_alerts_total", "Alerts raised by the watch, by kind.",
                    [([host, kind], count) for kind, count in sorted(rules.alerts_total.items())], ["host", "kind"]),
        ]


def registry_for(rules: WatchRules, host: str, lock: threading.Lock | None = None,
                 now: float | None = None) -> CollectorRegistry:
    """A registry holding only the watch's metrics (no process/platform collectors)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WatchCollector(rules, host, lock, now))
    return registry


def exposition(rules: WatchRules, host: str, now: float | None = None) -> str:
    """The current state in the text exposition format (what ``/metrics`` serves)."""
    return generate_latest(registry_for(rules, host, now=now)).decode()


class MetricsServer:
    """``/metrics`` of ``registry`` served by ``prometheus_client`` in a daemon thread."""

    def __init__(self, address: tuple[str, int], registry: CollectorRegistry) -> None:
        self._address, self._registry = address, registry
        self._server = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/metrics"

    def start(self) -> MetricsServer:
        self._server, _thread = start_http_server(self._address[1], addr=self._address[0], registry=self._registry)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
