"""A real Prometheus (Debian's /usr/bin/prometheus) and tiny exporters for tests, shared by the
collect and monitoring tests; ``free_port`` and ``stop_process`` are the one home of those helpers
for every test that starts a server or a child process.

Everything listens on 127.0.0.1 on free ports, stores its TSDB in a temporary folder, and is
stopped when its ``with`` block ends, whatever happens inside it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

PROMETHEUS = "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(proc: subprocess.Popen, wait_s: float = 10) -> None:
    """SIGTERM a child still running, SIGKILL it if it has not exited within ``wait_s``; reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def serve_text(render: Callable[[], str]) -> Iterator[str]:
    """Serve ``render()`` as a Prometheus text exposition on every GET; yields ``127.0.0.1:PORT``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            body = render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def sample_value(text: str, name: str, **labels: str) -> float | None:
    """The value of the first sample ``name`` whose labels include ``labels`` in a text exposition
    (parsed by prometheus_client, so label order and number formatting do not matter); None if absent."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


def api(url: str, path: str, **params) -> dict:
    """POST a Prometheus HTTP API call; returns the JSON envelope, also for 4xx/5xx errors."""
    data = urllib.parse.urlencode(params).encode()
    try:
        with urllib.request.urlopen(f"{url}{path}", data=data if params else None, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return json.loads(exc.read())


def query(url: str, promql: str) -> list:
    """Instant query result (list of series); raises on an error envelope."""
    doc = api(url, "/api/v1/query", query=promql)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


@contextlib.contextmanager
def running_prometheus(tmp_path: Path, targets: dict[str, list[str]], rule_files: list[Path] = (),
                       ready: Callable[[str], bool] | None = None, timeout_s: float = 60.0) -> Iterator[str]:
    """Start Prometheus scraping ``targets`` ({job: [host:port]}) every second, evaluating
    ``rule_files`` every second; wait until every target is up and ``ready(url)`` holds."""
    if not shutil.which(PROMETHEUS):
        pytest.skip(f"{PROMETHEUS} not installed (Debian package 'prometheus'; .ci/run installs it)")
    config = tmp_path / "prometheus.yml"
    lines = ["global:", "  scrape_interval: 1s", "  evaluation_interval: 1s"]
    if rule_files:
        lines += ["rule_files:"] + [f"  - '{p}'" for p in rule_files]
    lines.append("scrape_configs:")
    for job, hosts in targets.items():
        lines += [f"  - job_name: {job}", "    static_configs:", f"      - targets: {json.dumps(hosts)}"]
    config.write_text("\n".join(lines) + "\n")
    port = free_port()
    log_path = tmp_path / "prometheus.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wanted = sum(len(h) for h in targets.values())
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
            try:
                if len(query(url, "up == 1")) == wanted and (ready is None or ready(url)):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prometheus was not ready within {timeout_s:.0f} s: {log_path.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        stop_process(proc)
