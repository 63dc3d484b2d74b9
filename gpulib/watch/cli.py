"""``gpulib watch --log PATH... [--silence 10m] [--prometheus URL] [--listen 127.0.0.1:9488] [--out DIR]``.

Exit codes: 0 the watch ended (``--max-seconds``) without an alert, 1 at least one alert was
raised, 2 usage/input error. ``--once`` ends the watch after the first alert (and its capture).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

from gpulib import exit_codes
from gpulib.collect.capture import this_host
from gpulib.errors import InputError
from gpulib.readable import unreadable_reason
from gpulib.watch.actions import IncidentCapture
from gpulib.watch.follow import Follower
from gpulib.watch.metrics import MetricsServer, registry_for
from gpulib.watch.rules import WatchConfig, WatchRules

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
#: Follow events worth telling the operator (``opened`` is routine).
_NOTEWORTHY = {"rotated", "truncated", "missing", "unreadable", "line_cut"}


def duration(text: str) -> float:
    """``10m``, ``90s``, ``1.5h``, ``2`` (seconds) -> seconds."""
    m = _DURATION.match(text.strip())
    if not m or float(m[1]) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration such as 10m, 90s or 2h, got {text!r}")
    return float(m[1]) * _UNIT_S[m[2]]


def listen_address(text: str) -> tuple[str, int] | None:
    """``127.0.0.1:9488`` -> (host, port); ``off`` -> None (no metrics endpoint)."""
    if text.lower() in ("off", "none", ""):
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT such as 127.0.0.1:9488 (or 'off'), got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _emit(text: str) -> None:
    print(f"gpulib watch: {text}", flush=True)


def run(args) -> int:  # noqa: C901 - the main loop, kept in one place
    paths = [Path(p) for p in args.log]
    for p in paths:
        if p.is_dir():
            raise InputError("is a folder; --log takes the log files themselves (a missing file is waited for)",
                             path=str(p), hint=f"e.g. --log {p}/*.log")
        try:
            os.stat(p)
        except FileNotFoundError:
            continue  # not written yet: waited for
        except OSError:
            pass  # a symlink loop, a folder above that cannot be entered: named below
        reason = unreadable_reason(p, "file")  # a FIFO or device would never end: refused, not followed
        if reason:
            raise InputError(reason, path=str(p), hint="--log takes the regular file the job writes")
    host = args.host or this_host()
    config = WatchConfig(silence_s=args.silence, step_band=args.step_band, step_warmup=args.step_warmup)
    rules = WatchRules(config, [str(p) for p in paths])
    followers = [Follower(p, from_start=args.from_start) for p in paths]
    lock = threading.Lock()

    try:
        server = MetricsServer(args.listen, registry_for(rules, host, lock)).start() if args.listen else None
    except OSError as exc:
        raise InputError(f"cannot serve metrics on {args.listen[0]}:{args.listen[1]}: {exc.strerror or exc}",
                         hint="pick another --listen HOST:PORT (port 0 = any free one), or --listen off") from exc
    capture = None
    if args.out:
        capture = IncidentCapture(Path(args.out), paths, _emit, host=args.host, prometheus_url=args.prometheus,
                                  cooldown_s=args.capture_cooldown, command_line=["gpulib", *sys.argv[1:]])
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def poll() -> list:
        with lock:
            alerts = []
            for f in followers:
                lines = f.poll()
                for note in f.notes:
                    if note.event in ("rotated", "truncated"):
                        rules.restart_file(str(f.path))
                    if note.event in _NOTEWORTHY:
                        _emit(f"{note.path}: {note.event}: {note.detail}")
                f.notes.clear()
                alerts += rules.feed(str(f.path), lines)
            alerts += rules.tick()
            for notice in rules.notices:
                _emit(notice)
            rules.notices.clear()
            return alerts

    deadline = time.monotonic() + args.max_seconds if args.max_seconds else None
    alerted = False
    try:
        alerts = poll()  # the starting point is fixed before the watch says it is following
        _emit(f"following {len(paths)} file(s), silence threshold {args.silence:g} s, step band {args.step_band:g}x"
              + (f"; metrics on {server.url}" if server else "")
              + (f"; incidents into {args.out}" if capture else "; no capture (no --out)"))
        while True:
            for alert in alerts:
                _emit(alert.to_text())
                alerted = True
                if capture is not None:
                    with lock:
                        hosts = rules.job_hosts
                    capture.trigger(alert, hosts)
            if (args.once and alerted) or (deadline is not None and time.monotonic() > deadline):
                break
            if stop.wait(args.poll):
                break
            alerts = poll()
    finally:
        if capture is not None and capture.busy:
            _emit("waiting for the running capture to finish ...")
            capture.wait(args.capture_wait)
        if capture is not None and capture.incidents:
            _emit(f"{len(capture.incidents)} incident(s) captured: " + ", ".join(map(str, capture.incidents)))
        if server is not None:
            server.stop()
        for f in followers:
            f.close()
    return exit_codes.SOFT if alerted else exit_codes.OK


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "watch", help="follow training logs; alert on silence, error signatures, slow steps; capture + diagnose",
        description="Follow training logs like tail -F (rotation and truncation safe). Alert when a rank or the "
                    "whole job prints nothing for --silence, when a line matches the diagnosis's error catalogue "
                    "(CUDA OOM, NCCL errors, watchdog timeouts, ...), or when a rank's step time leaves its band. "
                    "On an alert with --out: capture an evidence bundle (gpulib collect) and write its diagnosis. "
                    "State is served as Prometheus metrics for the cluster's alerting.",
        epilog="Example: gpulib watch --log /shared/job/slurm-88231.out --silence 10m --out /shared/incidents "
               "--prometheus http://prom:9090   (alert rules: monitoring/prometheus/alerts.yml)")
    p.add_argument("--log", nargs="+", action="extend", required=True, metavar="PATH",
                   help="log files to follow (a file that does not exist yet is waited for)")
    p.add_argument("--silence", type=duration, default=600.0, metavar="DURATION",
                   help="alert when no line arrives for this long (default 10m; e.g. 90s, 30m)")
    p.add_argument("--step-band", type=float, default=2.0, metavar="X",
                   help="alert when a step takes more than X times the rank's median step (default 2)")
    p.add_argument("--step-warmup", type=int, default=5, metavar="N", help="steps before the band applies (default 5)")
    p.add_argument("--prometheus", metavar="URL",
                   help="on capture, also pull the last hour of DCGM metrics from here (of the job's hosts when the "
                        "log names them in NCCL init lines, else of every host)")
    p.add_argument("--listen", type=listen_address, default=("127.0.0.1", 9488), metavar="HOST:PORT",
                   help="serve /metrics here (default 127.0.0.1:9488; port 0 picks a free one; 'off' disables)")
    p.add_argument("--out", metavar="DIR", help="on alert, write an incident folder here: bundle + diagnosis")
    p.add_argument("--host", help="host name for the bundle and metrics (default: this machine's hostname)")
    p.add_argument("--from-start", action="store_true",
                   help="read the files from their beginning (default: only lines written from now on)")
    p.add_argument("--once", action="store_true", help="stop after the first alert (and its capture)")
    p.add_argument("--max-seconds", type=duration, metavar="DURATION", help="stop after this long")
    p.add_argument("--poll", type=duration, default=0.5, metavar="DURATION", help="how often files are read (0.5s)")
    p.add_argument("--capture-cooldown", type=duration, default=600.0, metavar="DURATION",
                   help="after a capture, alerts within this time do not capture again (default 10m)")
    p.add_argument("--capture-wait", type=duration, default=300.0, metavar="DURATION",
                   help="on exit, wait this long for a running capture (default 5m)")
    p.set_defaults(func=run)
