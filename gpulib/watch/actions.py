"""What the watch does on an alert: freeze the scene, then diagnose it.

Why at once: the evidence decays. A GPU that fell off the bus is reset or the node rebooted
within minutes, the kernel ring buffer wraps, the scheduler kills the survivors and frees the
GPUs, and the operator's first restart overwrites the state. Capturing when the log goes quiet
or the first error prints keeps the moment that explains the incident.

Each capture is one incident folder ``OUT/<UTC>-<alert kind>/``:

* ``alert.json`` — the alert that triggered it (written first, so it exists even if capture fails);
* ``<host>/`` — the evidence bundle of ``gpulib collect`` (with the followed logs, and the DCGM
  metrics of the last hour of the job's hosts when ``--prometheus`` is given);
* ``diagnosis.json`` / ``diagnosis.txt`` — ``gpulib diagnose`` of that bundle;
* ``error.txt`` — only when capture or diagnosis failed, saying why.

Captures run in a worker thread, one at a time, so the watch keeps following and serving metrics;
alerts during a capture or within ``cooldown_s`` after one are printed but do not capture again
(a cascade of 64 timeouts is one incident, not 64 bundles).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gpulib.collect import collect
from gpulib.collect.prometheus import PrometheusQuery
from gpulib.diagnose import diagnose
from gpulib.logs import get_logger
from gpulib.watch.rules import Alert

log = get_logger(__name__)


_RE2_META = re.compile(r"([.+*?()|\[\]{}^$\\])")


def hostname_matcher(hosts: list[str]) -> str | None:
    """``{Hostname=~"(node-a|node-b)(\\..*)?"}`` for the job's hosts (short names also match FQDNs),
    so that a capture on a 1,000-node cluster pulls the job's GPUs, not every GPU; None = all."""
    names = sorted({h.split(".")[0] for h in hosts if h and not re.fullmatch(r"[\d.]+", h)})  # not IPs
    if not names:
        return None
    pattern = "(" + "|".join(_RE2_META.sub(r"\\\1", n) for n in names) + r")(\..*)?"
    return '{Hostname=~"' + pattern.replace("\\", "\\\\") + '"}'


class IncidentCapture:
    """Run collect + diagnose for an alert, at most one at a time and once per ``cooldown_s``."""

    def __init__(self, out: Path, logs: list[Path], emit: Callable[[str], None], *, host: str | None = None,
                 prometheus_url: str | None = None, prometheus_window_s: float = 3600.0, cooldown_s: float = 600.0,
                 command_line: list[str] | None = None) -> None:
        self.out = Path(out)
        self.logs = list(logs)
        self.emit = emit
        self.host = host
        self.prometheus_url = prometheus_url
        self.prometheus_window_s = prometheus_window_s
        self.cooldown_s = cooldown_s
        self.command_line = command_line
        self.incidents: list[Path] = []
        self._thread: threading.Thread | None = None
        self._last_start: float | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def trigger(self, alert: Alert, hosts: list[str] = ()) -> bool:
        """Start a capture for ``alert`` unless one runs or ran less than ``cooldown_s`` ago.
        ``hosts`` are the job's nodes (from NCCL init lines); the DCGM pull is limited to them."""
        now = time.monotonic()
        if self.busy or (self._last_start is not None and now - self._last_start < self.cooldown_s):
            return False
        self._last_start = now
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        folder = self.out / f"{stamp}-{alert.kind}"
        n = 1
        while folder.exists():
            n += 1
            folder = self.out / f"{stamp}-{alert.kind}-{n}"
        folder.mkdir(parents=True)
        (folder / "alert.json").write_text(json.dumps(alert.to_dict(), indent=2) + "\n")
        self.incidents.append(folder)
        self._thread = threading.Thread(target=self._run, args=(folder, list(hosts)), name="gpulib-watch-capture",
                                        daemon=True)
        self._thread.start()
        return True

    def wait(self, timeout_s: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self, folder: Path, hosts: list[str]) -> None:
        self.emit(f"capturing evidence into {folder} ...")
        try:
            prometheus = None
            if self.prometheus_url:
                end = time.time()
                prometheus = PrometheusQuery(self.prometheus_url, end - self.prometheus_window_s, end,
                                             match=hostname_matcher(hosts))
            bundle = collect(folder / "%h", logs=self.logs, prometheus=prometheus, host=self.host,
                             command_line=self.command_line)
            self.emit(f"bundle written: {bundle}")
            result = diagnose([bundle])
            (folder / "diagnosis.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
            text = result.to_text()
            (folder / "diagnosis.txt").write_text(text)
            self.emit(f"diagnosis ({folder / 'diagnosis.json'}):\n{text.rstrip()}")
        except Exception as exc:  # noqa: BLE001 - a failed capture must not stop the watch
            log.exception("capture into %s failed", folder)
            (folder / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
            self.emit(f"capture into {folder} failed: {type(exc).__name__}: {exc} (the watch goes on)")
