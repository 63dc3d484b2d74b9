"""A real one-node Slurm for tests: munged, slurmctld and slurmd on this host, loopback only.

Debian's ``slurm-wlm`` and ``munge`` packages (``.ci/run`` installs them). Everything lives in a
temporary folder: the munge key and socket, ``slurm.conf`` (``AuthType=auth/munge``,
``ProctrackType=proctrack/linuxproc`` so no cgroup setup is needed, ports on 127.0.0.1), state
and spool folders and the daemons' logs; ``SLURM_CONF`` points the client tools at it. The
daemons run in the foreground as children of the test process and are stopped (SIGTERM, then
SIGKILL) when the ``with`` block ends, whatever happened inside it.

slurmd runs as root (it must, to run the Epilog and HealthCheckProgram as root): tests that use
this cluster skip when not root or when a binary is missing, saying which.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.prometheus_server import free_port, stop_process

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "squeue", "scancel")
#: Values of the health-check switch file that make the wrapper do nothing.
HEALTHCHECK_OFF = "off"


def missing_binaries() -> list[str]:
    search = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [b for b in BINARIES if not shutil.which(b, path=search)]


def skip_reason() -> str | None:
    missing = missing_binaries()
    if missing:
        return (f"Slurm/munge not installed ({', '.join(missing)} missing): apt-get install -y slurm-wlm munge "
                "(.ci/run does this)")
    if os.geteuid() != 0:
        return "a real slurmd must run as root (it runs the Epilog and HealthCheckProgram as root); CI runs as root"
    return None


@dataclass
class Cluster:
    root: Path
    node: str
    env: dict[str, str]
    evidence_dir: Path
    epilog_log: Path
    healthcheck_args: Path
    healthcheck_log: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    def run(self, *argv: str, timeout_s: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout_s)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr}{self.logs()}")
        return result

    def gpulib(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
        return self.run(sys.executable, "-m", "gpulib", *args, timeout_s=timeout_s, check=False)

    def node_state(self) -> tuple[str, str]:
        """(state with flags, reason) from ``sinfo`` (``idle``, ``drained``, ``draining``, ...)."""
        out = self.run("sinfo", "-h", "-n", self.node, "-o", "%T|%E").stdout.strip()
        state, _, reason = out.partition("|")
        return state, reason

    def wait_for(self, what: str, predicate, timeout_s: float = 60, every_s: float = 0.5):
        deadline = time.monotonic() + timeout_s
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{self.logs()}")
            time.sleep(every_s)

    def job_state(self, job_id: str) -> str:
        out = self.run("scontrol", "show", "job", job_id, check=False).stdout
        for token in out.split():
            if token.startswith("JobState="):
                return token.split("=", 1)[1]
        return ""

    def set_healthcheck(self, args: str) -> None:
        """What slurmd's HealthCheckProgram runs next: ``gpulib slurm healthcheck ARGS``, or
        nothing while ``off``."""
        self.healthcheck_args.write_text(args + "\n")

    def resume_if_drained(self) -> None:
        state, _ = self.node_state()
        if "drain" in state:
            self.run("scontrol", "update", f"nodename={self.node}", "state=resume")
        self.wait_for("the node to be schedulable", lambda: "drain" not in self.node_state()[0], 30)

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munged.log"):
            path = self.root / "log" / name
            if path.is_file():
                parts.append(f"\n--- {name} (tail) ---\n" + "\n".join(path.read_text(errors="replace")
                                                                       .splitlines()[-25:]))
        return "".join(parts)


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _config(c: Cluster, ctld_port: int, slurmd_port: int, epilog: Path, healthcheck: Path) -> Path:
    conf = c.root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=gpulibtest",
        f"SlurmctldHost={c.node}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}", f"SlurmdPort={slurmd_port}",
        "AuthType=auth/munge", f"AuthInfo=socket={c.root / 'munge-run' / 'munge.socket'}", "CredType=cred/munge",
        "SlurmUser=root", "SlurmdUser=root",
        f"StateSaveLocation={c.root / 'state'}", f"SlurmdSpoolDir={c.root / 'spool'}",
        f"SlurmctldPidFile={c.root / 'slurmctld.pid'}", f"SlurmdPidFile={c.root / 'slurmd.pid'}",
        f"SlurmctldLogFile={c.root / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={c.root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
        "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        "MpiDefault=none", "SwitchType=switch/none", "ReturnToService=2",
        "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5", "MinJobAge=600",
        f"Epilog={epilog}",
        f"HealthCheckProgram={healthcheck}", "HealthCheckInterval=5", "HealthCheckNodeState=ANY",
        f"NodeName={c.node} NodeHostname={c.node} NodeAddr=127.0.0.1 CPUs={min(os.cpu_count() or 1, 4)} "
        "State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]) + "\n")
    return conf


def _start(c: Cluster, name: str, argv: list[str]) -> subprocess.Popen:
    log = open(c.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(argv, env=c.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    c.procs.append(proc)
    return proc


@contextlib.contextmanager
def one_node_slurm(root: Path, start_timeout_s: float = 90) -> Iterator[Cluster]:
    """Start munged, slurmctld and slurmd under ``root``; yield the cluster; stop them."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    node = socket.gethostname().split(".")[0]
    for sub in ("munge-key", "munge-run", "state", "spool", "log", "evidence"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    (root / "munge-key").chmod(0o700)
    (root / "munge-run").chmod(0o755)
    key = root / "munge-key" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf"),
           "PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    c = Cluster(root, node, env, root / "evidence", root / "log" / "epilog.jsonl", root / "healthcheck.args",
                root / "log" / "healthcheck.log")
    c.set_healthcheck(HEALTHCHECK_OFF)
    # slurmd runs hooks with a bare environment: the scripts name the interpreter and the checkout
    preamble = f"export PYTHONPATH='{REPO}'\nexport SLURM_CONF='{root / 'slurm.conf'}'\n"
    epilog = _script(root / "epilog.sh", preamble + f"exec '{sys.executable}' -m gpulib slurm epilog "
                     f"--dir '{c.evidence_dir}' --log '{c.epilog_log}' --timeout 60\n")
    healthcheck = _script(root / "healthcheck.sh", preamble + (
        f"args=$(cat '{c.healthcheck_args}')\n"
        f"[ \"$args\" = {HEALTHCHECK_OFF} ] && exit 0\n"
        f"echo \"== $(date -u +%FT%TZ) healthcheck $args\" >> '{c.healthcheck_log}'\n"
        f"'{sys.executable}' -m gpulib slurm healthcheck $args >> '{c.healthcheck_log}' 2>&1\n"
        f"echo \"exit $?\" >> '{c.healthcheck_log}'\n"))
    conf = _config(c, free_port(), free_port(), epilog, healthcheck)
    try:
        _start(c, "munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                             f"--socket={root / 'munge-run' / 'munge.socket'}", f"--pid-file={root / 'munged.pid'}",
                             f"--log-file={root / 'log' / 'munged.log'}", f"--seed-file={root / 'munge.seed'}"])
        c.wait_for("munged's socket", lambda: (root / "munge-run" / "munge.socket").exists(), 20, 0.1)
        _start(c, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)])
        c.wait_for("slurmctld", lambda: c.run("scontrol", "ping", check=False).stdout.count("UP") >= 1, 30)
        _start(c, "slurmd", ["slurmd", "-D", "-N", node, "-f", str(conf)])
        c.wait_for("the node to be idle", lambda: c.run("sinfo", "-h", "-n", node, "-o", "%T", check=False)
                   .stdout.strip() in ("idle", "mixed"), start_timeout_s)
        yield c
    finally:
        with contextlib.suppress(Exception):
            c.run("scancel", "--full", "--partition=debug", check=False, timeout_s=10)
            c.wait_for("jobs to end", lambda: not c.run("squeue", "-h", check=False).stdout.strip(), 20)
        for proc in reversed(c.procs):  # slurmd, slurmctld, munged
            stop_process(proc, wait_s=10)
