"""The watch's state as Prometheus metrics (text exposition 0.0.4) on ``/metrics``.

Why expose it: the cluster's Prometheus already pages people. With these series it can alert on
a silent training job with the same routing, silences and history as a hot GPU
(``monitoring/prometheus/alerts.yml``, group ``gpulib-watch``), and Grafana can draw the silence
beside the GPU temperatures of the same window.

Served by :class:`http.server.ThreadingHTTPServer` in a daemon thread, on 127.0.0.1 by default:
the log lines name hosts and ranks, so exposing them on every interface is the operator's
explicit choice (``--listen 0.0.0.0:9488``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpulib.watch.rules import WatchRules

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: object) -> str:
    return "{" + ",".join(f'{k}="{_escape("" if v is None else str(v))}"' for k, v in labels.items()) + "}"


def exposition(rules: WatchRules, host: str, now: float | None = None) -> str:
    """Render the current state. ``rank`` is empty for lines that name no rank."""
    now = time.time() if now is None else now
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value!r}" for labels, value in samples)  # repr: unix times keep their digits

    streams = sorted(rules.streams.values(), key=lambda s: (s.file, -1 if s.rank is None else s.rank))

    def ident(s) -> str:
        return _labels(file=s.file, rank=s.rank, host=s.host or host)

    family("gpulib_watch_seconds_since_last_line", "gauge",
           "Seconds since this rank (or file) printed its last line; watch start if none yet.",
           [(ident(s), float(now - (s.last_line_time or rules.started))) for s in streams])
    family("gpulib_watch_last_line_timestamp_seconds", "gauge", "Unix time of the stream's last line.",
           [(ident(s), float(s.last_line_time)) for s in streams if s.last_line_time])
    family("gpulib_watch_heartbeat", "gauge",
           "1 when the stream has printed progress (step) lines, so its silence is judged.",
           [(ident(s), int(s.heartbeat)) for s in streams])
    last_any = max((s.last_line_time for s in streams if s.last_line_time), default=rules.started)
    family("gpulib_watch_seconds_since_any_line", "gauge", "Seconds since any followed file printed a line.",
           [(_labels(host=host), float(now - last_any))])
    family("gpulib_watch_job_completed", "gauge",
           "1 after the job printed its own end (Training completed, ... Succeeded): silence is then expected.",
           [(_labels(host=host), int(rules.completed))])
    family("gpulib_watch_silence_threshold_seconds", "gauge", "The watch's --silence threshold.",
           [(_labels(host=host), float(rules.config.silence_s))])
    family("gpulib_watch_step_seconds", "gauge", "Duration of the stream's latest training step.",
           [(ident(s), float(s.step_seconds)) for s in streams if s.step_seconds is not None])
    family("gpulib_watch_step_median_seconds", "gauge", "Median step duration of the stream's recent steps.",
           [(ident(s), float(s.step_median_s)) for s in streams if s.step_median_s is not None])
    family("gpulib_watch_step_phase_ms", "gauge",
           "Latest per-phase step timing the rank printed (fwd_bwd_ms=..., data_ms=...), in milliseconds.",
           [(_labels(file=s.file, rank=s.rank, host=s.host or host, phase=name), float(value))
            for s in streams for name, value in sorted(s.phase_ms.items())])
    family("gpulib_watch_lines_total", "counter", "Lines read per stream since the watch started.",
           [(ident(s), s.lines_total) for s in streams])
    family("gpulib_watch_alerts_total", "counter", "Alerts raised by the watch, by kind.",
           [(_labels(host=host, kind=kind), count) for kind, count in sorted(rules.alerts_total.items())])
    return "\n".join(out) + "\n"


class MetricsServer:
    """``/metrics`` in a daemon thread. ``render`` is called per scrape (under the caller's lock)."""

    def __init__(self, address: tuple[str, int], render: Callable[[], str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "only /metrics is served")
                    return
                body = render().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(address, Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="gpulib-watch-metrics", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/metrics"

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
