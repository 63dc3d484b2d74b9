"""Collectors that run a command and keep its raw output (the tool's own bytes).

Every command is an argument list (never a shell string), runs in its own process group and
has its own timeout. The argument lists and exit codes land in ``commands.json`` so a reader
knows exactly how each file was produced.
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

from gpulib.collect.core import Collector, Outcome, Sink, from_command
from gpulib.collect.runner import CommandResult

#: Failures that mean "this machine has no such hardware/driver" (``unavailable``), not a fault.
#: nvidia-smi exits 9 without a loaded driver; ipmitool exits 1 without a BMC device node.
NO_DRIVER = ("no NVIDIA driver", ("couldn't communicate with the nvidia driver", "no devices were found",
                                  "nvml: driver not loaded"))
NO_BMC = ("no IPMI device (ipmi_si/ipmi_devintf not loaded, or no BMC)", ("could not open device at /dev/ipmi",))
NO_HCA = ("no InfiniBand HCA", ("no ib devices found", "no such file or directory"))
NO_WTMP = ("no login records (/var/log/wtmp absent, e.g. in a container)", ("cannot open", "no such file"))


def classify(result: CommandResult, absent: tuple[str, tuple[str, ...]] | None) -> Outcome:
    if absent and result.status == "failed":
        text = (result.stdout + result.stderr).decode("utf-8", "replace").lower()
        label, markers = absent
        if any(marker in text for marker in markers):
            return Outcome("unavailable", f"{label}: {result.reason}")
    return from_command(result)


def command(name: str, argv: list[str], relpath: str, timeout_s: float, merge_stderr: bool = False,
            absent: tuple[str, tuple[str, ...]] | None = None) -> Collector:
    """A collector that runs one command and stores its stdout at ``relpath``; a failure whose
    output contains one of ``absent``'s markers is recorded as ``unavailable``."""

    def run(sink: Sink, timeout: float) -> Outcome:
        return classify(sink.run(argv, timeout, relpath, merge_stderr=merge_stderr), absent)

    return Collector(name, timeout_s, run)


def nvidia_smi_collectors() -> list[Collector]:
    """``-q -x`` is the richest machine-readable snapshot; ``-q`` is what humans paste into
    tickets; ``topo -m`` shows which GPU pairs talk over NVLink vs PCIe; ``nvlink -s`` the link speeds
    (a link at 0 GB/s is down)."""
    return [
        command("nvidia-smi-q-xml", ["nvidia-smi", "-q", "-x"], "nvidia-smi/q.xml", 45, absent=NO_DRIVER),
        command("nvidia-smi-q", ["nvidia-smi", "-q"], "nvidia-smi/q.txt", 45, absent=NO_DRIVER),
        command("nvidia-smi-topo", ["nvidia-smi", "topo", "-m"], "nvidia-smi/topo-m.txt", 20, absent=NO_DRIVER),
        command("nvidia-smi-nvlink", ["nvidia-smi", "nvlink", "-s"], "nvidia-smi/nvlink-s.txt", 20, absent=NO_DRIVER),
    ]


def kernel_log(sink: Sink, timeout_s: float) -> Outcome:
    """The kernel ring buffer holds the Xid lines, the fallen-off-bus message, OOM kills and
    IB link flaps. ``dmesg`` needs CAP_SYSLOG when ``kernel.dmesg_restrict=1``; the systemd
    journal (readable by the ``adm``/``systemd-journal`` groups) is the fallback."""
    dmesg = sink.run(["dmesg", "-T"], timeout_s / 2, "kernel/dmesg.txt")
    if dmesg.status == "ok":
        return Outcome("ok")
    journal = sink.run(["journalctl", "-k", "-b", "0", "-o", "short-iso", "--no-pager"], timeout_s / 2,
                       "kernel/journal.txt")
    why = f"dmesg -T: {dmesg.reason}"
    if journal.status == "ok":
        return Outcome("ok", f"{why}; used journalctl -k instead")
    return Outcome(journal.status if dmesg.status == "unavailable" else dmesg.status,
                   f"{why}; journalctl -k: {journal.reason}")


def kernel_log_previous_boot(sink: Sink, timeout_s: float) -> Outcome:
    """After a crash and reboot, the Xid that killed the job is only in the previous boot's
    journal (needs a persistent journal: ``Storage=persistent`` in journald.conf)."""
    return from_command(sink.run(["journalctl", "-k", "-b", "-1", "-o", "short-iso", "--no-pager"], timeout_s,
                                 "kernel/journal-prev-boot.txt"))


def versions(sink: Sink, timeout_s: float) -> Outcome:
    """Kernel, OS and driver versions: the first thing a config diff across nodes compares."""
    uname = sink.run(["uname", "-a"], timeout_s, "versions/uname.txt")
    missing = []
    for source, relpath, why in (
        ("/etc/os-release", "versions/os-release", "no /etc/os-release"),
        ("/proc/driver/nvidia/version", "versions/nvidia-driver.txt", "no /proc/driver/nvidia/version (NVIDIA driver not "
                                                                      "loaded)"),
    ):
        try:
            sink.write_bytes(relpath, Path(source).read_bytes())
        except OSError:
            missing.append(why)
    if uname.status != "ok":
        missing.insert(0, f"uname: {uname.reason}")
    return Outcome("ok" if uname.status == "ok" else uname.status, "; ".join(missing) or None)


#: Run in a separate interpreter, so the collector never imports torch (seconds of start-up,
#: CUDA state, and a broken CUDA install can crash or hang the importer). The fast path reads
#: ``torch/version.py`` and the pip NCCL package's metadata without importing torch; only a
#: CUDA build of torch with its NCCL linked in (conda, source builds) is imported to ask it.
_PYTHON_STACK_PROBE = r"""
import importlib.metadata as md, importlib.util, json, pathlib, sys
out = {"python": sys.version.split()[0], "executable": sys.executable}
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    out["torch_error"] = "No module named 'torch'"
else:
    info = {}
    exec(pathlib.Path(next(iter(spec.submodule_search_locations)), "version.py").read_text(), info)
    out["torch"], out["torch_cuda"], out["torch_hip"] = info.get("__version__"), info.get("cuda"), info.get("hip")
    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("nvidia-nccl"):
            out["nccl"], out["nccl_source"] = dist.version, f"pip package {name}"
    if "nccl" not in out and out["torch_cuda"]:
        try:
            import torch
            v = torch.cuda.nccl.version()
            out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
            out["nccl_source"] = "torch.cuda.nccl.version()"
        except Exception as exc:
            out["nccl_error"] = f"{type(exc).__name__}: {exc}"
    elif "nccl" not in out:
        out["nccl_error"] = "this torch is built without CUDA, so without NCCL"
print(json.dumps(out, sort_keys=True))
"""


def python_stack(sink: Sink, timeout_s: float) -> Outcome:
    """torch, its CUDA runtime and its NCCL: the versions the training job actually used
    (the driver must be new enough for torch's CUDA; NCCL versions must match across nodes)."""
    result = sink.run([sys.executable, "-c", _PYTHON_STACK_PROBE], timeout_s, "versions/python-stack.json")
    if result.status != "ok":
        return from_command(result)
    try:
        info = json.loads(result.stdout)
    except ValueError:
        return Outcome("failed", "the torch version probe printed no JSON")
    if "torch_error" in info:
        return Outcome("unavailable", f"torch not importable by {sys.executable}: {info['torch_error']}")
    if "nccl_error" in info:
        return Outcome("ok", f"NCCL version unknown: {info['nccl_error']}")
    return Outcome("ok")


def gpu_device_users(sink: Sink, timeout_s: float) -> Outcome:
    """Which processes still hold /dev/nvidia*: zombies from the dead job keep GPU memory and
    make the relaunch fail. fuser prints the PIDs on stdout and everything else on stderr, so
    both streams go into one file."""
    devices = sorted(glob.glob("/dev/nvidia*"))
    if not devices:
        return Outcome("unavailable", "no /dev/nvidia* device files (no NVIDIA driver loaded)")
    result = sink.run(["fuser", "-v", *devices], timeout_s, "processes/fuser-v.txt", merge_stderr=True)
    if result.returncode == 1 and not result.status == "timeout":
        return Outcome("ok", "no process holds a /dev/nvidia* file")  # fuser exits 1 when nothing matched
    return from_command(result)


def host_collectors(prev_boot: bool) -> list[Collector]:
    collectors = [
        Collector("kernel-log", 30, kernel_log),
        Collector("versions", 10, versions),
        command("nvcc", ["nvcc", "-V"], "versions/nvcc.txt", 15),
        Collector("python-stack", 45, python_stack),
        Collector("gpu-device-users", 20, gpu_device_users),
        command("ibstat", ["ibstat"], "infiniband/ibstat.txt", 20, absent=NO_HCA),
        command("ipmitool-sdr", ["ipmitool", "sdr", "list"], "ipmi/sdr-list.txt", 45, absent=NO_BMC),
        command("ip-link", ["ip", "-o", "link", "show"], "network/ip-link.txt", 10),
        # boots, shutdowns and the sessions a crash cut (a power loss writes no shutdown record);
        # -F prints full dates: the rows carry their year
        command("boot-history", ["last", "-x", "-F"], "system/last-x.txt", 15, absent=NO_WTMP),
    ]
    if prev_boot:
        collectors.insert(1, Collector("kernel-log-prev-boot", 30, kernel_log_previous_boot))
    return collectors
