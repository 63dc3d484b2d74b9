"""SYNTHETIC incident generator, for benchmarks and scale tests only - never evidence.

Why it exists: the recorded incidents have two nodes; a real job has hundreds. To know that
``gpulib diagnose`` still finds the one bad GPU among 8,192 healthy ones, within seconds and in
flat memory, we need incidents of any size whose answer is known. Every file is written in the
format of the real tool that the parsers read (``nvidia-smi -q`` text, ``dmesg -T``, ``ibstat``,
``uname -a``, ``/etc/os-release``, ``/proc/driver/nvidia/version``, the job console with
``NCCL_DEBUG=INFO`` init lines and torch watchdog timeouts), one evidence bundle per node
(:class:`gpulib.evidence.bundle.BundleWriter`, so manifests and hashes are real) plus the job log beside
them. Every generated file says ``SYNTHETIC`` in its bundle's command line and the host names
start with ``synth-``, so a synthetic incident can never be mistaken for a real one.

One root cause is injected (:data:`KINDS`), optionally with config drift on some nodes
(:data:`DRIFT_FIELDS`), and the answer comes back as a :class:`SyntheticIncident`.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gpulib.evidence.bundle import BundleWriter, CollectorRecord

#: Injectable root causes -> the diagnosis category they must produce.
KINDS = {
    "xid79": "gpu_fell_off_bus",
    "ecc_dbe": "gpu_memory_error",
    "thermal": "thermal_throttling",
    "host_oom": "host_oom",
    "ib_down": "network_fabric",
}
#: PCI bus numbers of the 8 GPUs of an HGX H100 board, in nvidia-smi index order.
GPU_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
#: How the incident is laid out on disk (see :func:`simulate_incident`).
LAYOUTS = ("bundles", "raw")
IB_BUSES = ("0c", "1d", "3c", "4d", "8c", "9d", "bc", "cd")

BASELINE = {
    "driver": "550.90.07", "cuda": "12.4", "nccl": "2.21.5", "torch": "2.4.1+cu124",
    "kernel": "5.15.0-126-generic", "os": "Ubuntu 22.04.4 LTS", "vbios": "96.00.89.00.01",
    "persistence_mode": "Enabled", "ib_rate_gbps": 400,
}
#: field -> the odd value a drifted node gets (a node someone upgraded or rebooted by hand).
DRIFT_FIELDS = {
    "driver": "535.183.01", "nccl": "2.18.3", "kernel": "5.15.0-119-generic",
    "vbios": "96.00.74.00.1C", "persistence_mode": "Disabled", "ib_rate_gbps": 200,
}
T_FAIL = datetime(2026, 2, 10, 3, 12, 7, tzinfo=timezone.utc)
T_START = T_FAIL - timedelta(hours=1, minutes=14)
TIMEOUT_S = 600
SEQ = 2851702


@dataclass
class SyntheticIncident:
    """Where the incident was written and the answer a diagnosis must find."""

    root: Path
    kind: str
    category: str
    host: str
    gpu_index: int | None
    gpu_pci: str | None
    rank: int | None
    nodes: int
    drift: dict[str, dict[str, object]] = field(default_factory=dict)  # host -> {field: odd value}
    bytes_written: int = 0


def host_name(n: int) -> str:
    return f"synth-gpu-{n:04d}"


def _pci(bus: str) -> str:
    return f"0000:{bus}:00.0"


def _dmesg_stamp(t: datetime) -> str:
    """``dmesg -T`` prints local wall time without a zone, like ``[Tue Feb 10 03:12:07 2026]``."""
    local = t.astimezone()
    return f"[{local.strftime('%a %b')} {local.day:2d} {local.strftime('%H:%M:%S %Y')}]"


def _torch_stamp(t: datetime, digits: int = 9) -> str:
    """torch's glog prefix ``E0210 03:22:08.335388052`` (month, day, local time): 9 fractional digits
    since torch 2.2's c10 logger, 6 from glog itself and torch's elastic agent."""
    return t.strftime("%m%d %H:%M:%S.%f") + "123"[:digits - 6]


class _Job:
    """Identity of the job: ranks, pids and addresses per node."""

    def __init__(self, nodes: int, gpus: int, rng: random.Random):
        self.nodes, self.gpus = nodes, gpus
        self.world = nodes * gpus
        self.pids = {n: 40000 + rng.randrange(20000) for n in range(nodes)}
        self.addr = {n: f"10.{40 + n // 65536}.{n // 256 % 256}.{n % 256}" for n in range(nodes)}

    def rank(self, node: int, gpu: int) -> int:
        return node * self.gpus + gpu


def simulate_incident(out: str | Path, nodes: int, kind: str = "xid79", *, seed: int = 0, drift_nodes: int = 0,
                      drift_fields: tuple[str, ...] = ("driver", "nccl"), gpus_per_node: int = 8,
                      noise_lines: int = 40, progress_every_s: float = 19.0,
                      monitor_samples: int = 20, layout: str = "bundles", glog_digits: int = 9) -> SyntheticIncident:
    """Write a SYNTHETIC incident of ``nodes`` bundles (one per node) and the job log into ``out``.

    ``kind`` is one of :data:`KINDS`; the culprit node and GPU are drawn from ``seed``.
    ``drift_nodes`` nodes (never the culprit) get the odd values of ``drift_fields``.
    ``noise_lines`` benign kernel lines per node and one training progress line every
    ``progress_every_s`` seconds and ``monitor_samples`` per-minute GPU samples make the logs
    realistic in size (raise them to test that memory stays flat in the size of the logs).
    ``layout``: ``"bundles"`` (one ``gpulib collect`` bundle per node) or ``"raw"`` (what an engineer
    copies by hand: a folder per node holding its ``dmesg -T`` output, and the bare job console,
    whose first dated line comes after one NCCL init line per rank). ``glog_digits``: 6 or 9
    fractional digits in the torch watchdog lines' glog stamps.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown synthetic incident kind {kind!r}; one of {', '.join(KINDS)}")
    if not 2 <= nodes <= 65536 or not 1 <= gpus_per_node <= len(GPU_BUSES):
        raise ValueError("nodes must be 2..65536 and gpus_per_node 1..8")
    unknown = set(drift_fields) - set(DRIFT_FIELDS)
    if unknown:
        raise ValueError(f"unknown drift field(s) {sorted(unknown)}; one of {', '.join(DRIFT_FIELDS)}")
    if layout not in LAYOUTS or glog_digits not in (6, 9):
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)} and glog_digits 6 or 9")
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    job = _Job(nodes, gpus_per_node, rng)
    culprit = rng.randrange(nodes)
    gpu = rng.randrange(gpus_per_node)
    others = [n for n in range(nodes) if n != culprit]
    drifted = sorted(rng.sample(others, min(drift_nodes, len(others))))
    drift = {host_name(n): {f: DRIFT_FIELDS[f] for f in drift_fields} for n in drifted}
    on_gpu = kind != "ib_down"  # a lost IB link belongs to the node, every other kind to one GPU/rank
    incident = SyntheticIncident(root, kind, KINDS[kind], host_name(culprit), gpu if on_gpu else None,
                                 _pci(GPU_BUSES[gpu]) if on_gpu else None,
                                 job.rank(culprit, gpu) if on_gpu else None, nodes, drift)
    for n in range(nodes):
        config = {**BASELINE, **drift.get(host_name(n), {})}
        fault = kind if n == culprit else None
        if layout == "raw":
            incident.bytes_written += _write_raw(root, n, job, config, fault, gpu, rng, noise_lines)
        else:
            incident.bytes_written += _write_bundle(root, n, job, config, fault, gpu, rng, noise_lines,
                                                    monitor_samples)
    log = _job_log(job, kind, culprit, gpu, drift, progress_every_s, dated_header=layout == "bundles",
                   glog_digits=glog_digits)
    (root / "slurm-771234.out").write_text(log)
    incident.bytes_written += len(log)
    return incident


# ------------------------------------------------------------------------------------ bundle
def _write_raw(root: Path, n: int, job: _Job, config: dict, fault: str | None, gpu: int,
               rng: random.Random, noise_lines: int) -> int:
    """A node as copied by hand: its folder holds the ``dmesg -T`` output, nothing else."""
    text = _dmesg(job, n, config, fault, gpu, rng, noise_lines)
    folder = root / host_name(n)
    folder.mkdir()
    (folder / "dmesg.txt").write_text(text)
    return len(text)


def _write_bundle(root: Path, n: int, job: _Job, config: dict, fault: str | None, gpu: int,
                  rng: random.Random, noise_lines: int, monitor_samples: int) -> int:
    host = host_name(n)
    files = {
        "nvidia-smi/q.txt": _nvidia_smi_q(job, n, config, fault, gpu, rng),
        "kernel/dmesg.txt": _dmesg(job, n, config, fault, gpu, rng, noise_lines),
        "infiniband/ibstat.txt": _ibstat(n, config, fault),
        "versions/uname.txt": f"Linux {host} {config['kernel']} #136-Ubuntu SMP Wed Nov 6 10:38:22 UTC 2024 "
                              "x86_64 x86_64 x86_64 GNU/Linux\n",
        "versions/os-release": _os_release(config["os"]),
        "versions/nvidia-driver.txt": f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {config['driver']}  "
                                      "Wed Jun  5 19:17:25 UTC 2024\nGCC version:  gcc version 12.3.0 "
                                      "(Ubuntu 12.3.0-1ubuntu1~22.04)\n",
        "logs/var/log/nvidia/gpu-stats.csv": _gpu_stats_csv(job, fault, gpu, rng, max(monitor_samples, 10)),
        "versions/python-stack.json": json.dumps({
            "executable": "/opt/conda/envs/train/bin/python", "nccl": config["nccl"],
            "nccl_source": "pip package nvidia-nccl-cu12", "python": "3.11.9", "torch": config["torch"],
            "torch_cuda": config["cuda"], "torch_hip": None}, sort_keys=True) + "\n",
    }
    writer = BundleWriter(root / host, host=host, command_line=["gpulib", "SYNTHETIC", "fleet.simulate", host])
    written = 0
    collectors = {"nvidia-smi-q": ["nvidia-smi/q.txt"], "kernel-log": ["kernel/dmesg.txt"],
                  "ibstat": ["infiniband/ibstat.txt"],
                  "versions": ["versions/uname.txt", "versions/os-release", "versions/nvidia-driver.txt"],
                  "python-stack": ["versions/python-stack.json"], "logs": ["logs/var/log/nvidia/gpu-stats.csv"]}
    for relpath, text in files.items():
        writer.write_text(relpath, text)
        written += len(text)
    for name, paths in collectors.items():
        writer.record(CollectorRecord(name, "ok", seconds=0.1, files=paths))
    writer.finish()
    return written


def _os_release(pretty: str) -> str:
    version = pretty.split()[1]
    return (f'PRETTY_NAME="{pretty}"\nNAME="Ubuntu"\nVERSION_ID="{version[:5]}"\n'
            f'VERSION="{version} (Jammy Jellyfish)"\nID=ubuntu\nID_LIKE=debian\n')


def _nvidia_smi_q(job: _Job, n: int, config: dict, fault: str | None, bad: int, rng: random.Random) -> str:
    """``nvidia-smi -q`` text as driver 550 prints it on an HGX H100 (the fields the parsers read)."""
    cuda = "12.2" if config["driver"].startswith("535") else config["cuda"]
    out = ["", "==============NVSMI LOG==============", "",
           f"{'Timestamp':<55}: {(T_FAIL + timedelta(minutes=14)).astimezone().strftime('%a %b %d %H:%M:%S %Y')}",
           f"{'Driver Version':<55}: {config['driver']}", f"{'CUDA Version':<55}: {cuda}", "",
           f"{'Attached GPUs':<55}: {job.gpus}"]
    for i in range(job.gpus):
        bus = GPU_BUSES[i]
        if fault == "xid79" and i == bad:
            out.append(f"Unable to determine the device handle for GPU 00000000:{bus.upper()}:00.0: GPU is lost.  "
                       "Reboot the system to recover this GPU")
            continue
        out += _gpu_block(job, n, i, config, fault if i == bad else None, rng)
    return "\n".join(out) + "\n"


def _q(label: str, value: object, depth: int = 1) -> str:
    pad = "    " * depth
    return f"{pad}{label:<{55 - len(pad)}}: {value}"


def _gpu_block(job: _Job, n: int, i: int, config: dict, fault: str | None, rng: random.Random) -> list[str]:
    serial = 1654323000000 + n * 8 + i
    hot = fault == "thermal"
    dbe = 2 if fault == "ecc_dbe" else 0
    temp = 91 if hot else 52 + rng.randrange(14)
    sm = 1035 if hot else 1980
    active = "Active" if hot else "Not Active"
    lines = [f"GPU 00000000:{GPU_BUSES[i].upper()}:00.0",
             _q("Product Name", "NVIDIA H100 80GB HBM3"), _q("Product Brand", "NVIDIA"),
             _q("Product Architecture", "Hopper"), _q("Persistence Mode", config["persistence_mode"]),
             "    MIG Mode", _q("Current", "Disabled", 2), _q("Pending", "Disabled", 2),
             _q("Serial Number", serial),
             _q("GPU UUID", f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{host_name(n)}-{i}')}"),
             _q("Minor Number", i), _q("VBIOS Version", config["vbios"]), _q("MultiGPU Board", "No"),
             "    PCI", _q("Bus", f"0x{GPU_BUSES[i].upper()}", 2), _q("Device", "0x00", 2),
             _q("Domain", "0x0000", 2), _q("Bus Id", f"00000000:{GPU_BUSES[i].upper()}:00.0", 2),
             "        GPU Link Info", "            PCIe Generation", _q("Max", 5, 4), _q("Current", 5, 4),
             "            Link Width", _q("Max", "16x", 4), _q("Current", "16x", 4),
             _q("Replays Since Reset", 0, 2),
             _q("Fan Speed", "N/A"), _q("Performance State", "P0"),
             "    Clocks Event Reasons", _q("Idle", "Not Active", 2), _q("Applications Clocks Setting", "Not Active", 2),
             _q("SW Power Cap", "Not Active", 2), _q("HW Slowdown", active, 2),
             _q("HW Thermal Slowdown", active, 3), _q("HW Power Brake Slowdown", "Not Active", 3),
             _q("Sync Boost", "Not Active", 2), _q("SW Thermal Slowdown", active, 2),
             _q("Display Clock Setting", "Not Active", 2),
             "    Clocks Event Reasons Counters", _q("SW Power Capping", "0 us", 2), _q("Sync Boost", "0 us", 2),
             _q("SW Thermal Slowdown", f"{412000000 if hot else 0} us", 2),
             _q("HW Thermal Slowdown", f"{388000000 if hot else 0} us", 2), _q("HW Power Braking", "0 us", 2),
             "    FB Memory Usage", _q("Total", "81559 MiB", 2), _q("Reserved", "479 MiB", 2),
             _q("Used", "0 MiB", 2), _q("Free", "81080 MiB", 2),
             _q("Compute Mode", "Default"),
             "    Utilization", _q("GPU", "0 %", 2), _q("Memory", "0 %", 2),
             "    ECC Mode", _q("Current", "Enabled", 2), _q("Pending", "Enabled", 2),
             "    ECC Errors", "        Volatile", _q("SRAM Correctable", 0, 3), _q("SRAM Uncorrectable Parity", 0, 3),
             _q("SRAM Uncorrectable SEC-DED", 0, 3), _q("DRAM Correctable", 3 if dbe else 0, 3),
             _q("DRAM Uncorrectable", dbe, 3), "        Aggregate", _q("SRAM Correctable", 0, 3),
             _q("SRAM Uncorrectable Parity", 0, 3), _q("SRAM Uncorrectable SEC-DED", 0, 3),
             _q("DRAM Correctable", 17 if dbe else 0, 3), _q("DRAM Uncorrectable", dbe, 3),
             "    Retired Pages", _q("Single Bit ECC", "N/A", 2), _q("Double Bit ECC", "N/A", 2),
             _q("Pending Page Blacklist", "N/A", 2),
             "    Remapped Rows", _q("Correctable Error", 0, 2), _q("Uncorrectable Error", 1 if dbe else 0, 2),
             _q("Pending", "Yes" if dbe else "No", 2), _q("Remapping Failure Occurred", "No", 2),
             "    Temperature", _q("GPU Current Temp", f"{temp} C", 2),
             _q("GPU T.Limit Temp", f"{-1 if hot else 87 - temp} C", 2),
             _q("GPU Shutdown T.Limit Temp", "-8 C", 2), _q("GPU Slowdown T.Limit Temp", "-2 C", 2),
             _q("GPU Max Operating T.Limit Temp", "0 C", 2), _q("Memory Current Temp", f"{temp - 4} C", 2),
             "    GPU Power Readings", _q("Average Power Draw", f"{(180 if hot else 68) + rng.randrange(9)}.00 W", 2),
             _q("Current Power Limit", "700.00 W", 2), _q("Default Power Limit", "700.00 W", 2),
             "    Clocks", _q("Graphics", f"{sm} MHz", 2), _q("SM", f"{sm} MHz", 2), _q("Memory", "2619 MHz", 2),
             "    Max Clocks", _q("Graphics", "1980 MHz", 2), _q("SM", "1980 MHz", 2), _q("Memory", "2619 MHz", 2),
             _q("Processes", "None")]  # captured after the job died: nothing holds the GPU any more
    return lines


_CSV_HEADER = ("timestamp, index, pci.bus_id, temperature.gpu, clocks.sm [MHz], clocks.max.sm [MHz], power.draw [W], "
               "utilization.gpu [%], memory.used [MiB], clocks_event_reasons.active, "
               "clocks_event_reasons.sw_thermal_slowdown, clocks_event_reasons.hw_thermal_slowdown, "
               "clocks_event_reasons.hw_slowdown")


def _gpu_stats_csv(job: _Job, fault: str | None, bad: int, rng: random.Random, samples: int = 20) -> str:
    """The node's ``nvidia-smi --query-gpu=... --format=csv -l 60`` monitoring log for the last minutes
    of the job; on a thermal fault the bad GPU heats up and throttles 8 minutes before the timeout."""
    rows = [_CSV_HEADER]
    for k in range(samples):
        t = (T_FAIL - timedelta(minutes=samples - 1 - k)).astimezone()
        for i in range(job.gpus):
            hot = fault == "thermal" and i == bad and k >= samples - 9
            temp = 88 + min(k - (samples - 9), 4) if hot else 55 + rng.randrange(12)
            mask, sw, hw = ("0x0000000000000068", "Active", "Active") if hot else ("0x0000000000000000",
                                                                                  "Not Active", "Not Active")
            rows.append(f"{t:%Y/%m/%d %H:%M:%S}.{100 + i:03d}, {i}, 00000000:{GPU_BUSES[i].upper()}:00.0, {temp}, "
                        f"{1035 if hot else 1980} MHz, 1980 MHz, {(400 if hot else 640) + rng.randrange(40)}.12 W, "
                        f"100 %, 71023 MiB, {mask}, {sw}, {hw}, {hw}")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------------------------ kernel log
_NOISE = (
    "IPv4: martian source 10.42.17.255 from 10.42.16.{a}, on dev bond0",
    "perf: interrupt took too long ({a}15 > {a}10), lowering kernel.perf_event_max_sample_rate to 62750",
    'audit: type=1400 audit(1770680000.{a}:811): apparmor="DENIED" operation="capable" class="cap" '
    'profile="/usr/sbin/cups-browsed" pid=2{a} comm="cups-browsed" capability=23  capname="sys_nice"',
    "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing",
)


def _dmesg(job: _Job, n: int, config: dict, fault: str | None, bad: int, rng: random.Random,
           noise_lines: int) -> str:
    lines: list[tuple[datetime, str]] = [
        (T_START - timedelta(hours=30), f"Linux version {config['kernel']} (buildd@lcy02-amd64-058) "
                                        "(gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0) #136-Ubuntu SMP"),
        (T_START - timedelta(hours=30), "nvidia-nvlink: Nvlink Core is being initialized, major device number 510"),
        (T_START - timedelta(hours=30), f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {config['driver']}  "
                                        "Wed Jun  5 19:17:25 UTC 2024"),
    ]
    for k in range(noise_lines):
        t = T_START - timedelta(hours=8) + timedelta(seconds=k * 29000 // max(noise_lines, 1) + rng.randrange(60))
        lines.append((t, rng.choice(_NOISE).format(a=rng.randrange(10, 250))))
    bus = GPU_BUSES[bad]
    pid = job.pids[n] + bad
    if fault == "xid79":
        lines += [
            (T_FAIL - timedelta(seconds=1), "pcieport 0000:a8:02.0: AER: Uncorrected (Fatal) error received: "
                                            "0000:a8:02.0"),
            (T_FAIL, f"NVRM: Xid (PCI:0000:{bus}:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
            (T_FAIL, f"NVRM: GPU 0000:{bus}:00.0: GPU has fallen off the bus."),
            (T_FAIL + timedelta(seconds=122), f"INFO: task pt_main_thread:{pid} blocked for more than 120 seconds."),
        ]
    elif fault == "ecc_dbe":
        lines += [
            (T_FAIL, f"NVRM: Xid (PCI:0000:{bus}:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double "
                     "bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x2c79f1a3c0 "
                     "partition 3, subpartition 0."),
            (T_FAIL, f"NVRM: Xid (PCI:0000:{bus}:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row "
                     "(0x0000002c79f1a3c0) marked for remapping, reset gpu to activate."),
            (T_FAIL, f"NVRM: Xid (PCI:0000:{bus}:00): 94, pid={pid}, name=pt_main_thread, Ch 00000010"),
        ]
    elif fault == "host_oom":
        lines += [
            (T_FAIL, "python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, "
                     "oom_score_adj=0"),
            (T_FAIL, f"oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,"
                     f"task_memcg=/user.slice,task=python,pid={pid},uid=1003"),
            (T_FAIL, f"Out of memory: Killed process {pid} (python) total-vm:312499040kB, anon-rss:190233412kB, "
                     "file-rss:112216kB, shmem-rss:4356012kB, UID:1003 pgtables:376832kB oom_score_adj:0"),
        ]
    elif fault == "ib_down":
        lines += [
            (T_FAIL, f"mlx5_core 0000:{IB_BUSES[0]}:00.0: Port module event: module 0, Cable unplugged"),
            (T_FAIL + timedelta(seconds=1), "mlx5_core 0000:0c:00.0 ibp12s0: Link down"),
        ]
    lines.sort(key=lambda item: item[0])
    return "".join(f"{_dmesg_stamp(t)} {text}\n" for t, text in lines)


def _ibstat(n: int, config: dict, fault: str | None) -> str:
    out = []
    for k, _bus in enumerate(IB_BUSES):
        down = fault == "ib_down" and k == 0
        guid = f"0x{0xa088c2030000000 + n * 16 + k:016x}"
        out += [f"CA 'mlx5_{k}'", "\tCA type: MT4129", "\tNumber of ports: 1", "\tFirmware version: 28.39.1002",
                "\tHardware version: 0", f"\tNode GUID: {guid}", f"\tSystem image GUID: {guid}", "\tPort 1:",
                f"\t\tState: {'Down' if down else 'Active'}", f"\t\tPhysical state: {'Polling' if down else 'LinkUp'}",
                f"\t\tRate: {10 if down else config['ib_rate_gbps']}", f"\t\tBase lid: {65535 if down else 100 + n}",
                "\t\tLMC: 0", "\t\tSM lid: 1", "\t\tCapability mask: 0xa751e848", f"\t\tPort GUID: {guid}",
                "\t\tLink layer: InfiniBand"]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------ job log
def _job_log(job: _Job, kind: str, culprit: int, bad: int, drift: dict, progress_every_s: float, *,
             dated_header: bool = True, glog_digits: int = 9) -> str:
    start = f", start {T_START.isoformat()}" if dated_header else ""
    out = ["+ export NCCL_DEBUG=INFO", f"Job 771234 on synth-gpu-[0000-{job.nodes - 1:04d}], {job.nodes} nodes x "
           f"{job.gpus} GPUs{start}",
           f"+ srun --kill-on-bad-exit=0 torchrun --nnodes {job.nodes} --nproc_per_node {job.gpus} --rdzv_backend c10d "
           "pretrain_gpt.py --distributed-timeout-minutes 10  # SYNTHETIC incident (gpulib.fleet.simulate)"]
    comm = "0x8669191b0d662029"
    for n in range(job.nodes):
        host = host_name(n)
        nccl = drift.get(host, {}).get("nccl", BASELINE["nccl"])
        for g in range(job.gpus):
            pid = job.pids[n] + g
            prefix = f"{host}:{pid}:{pid}"
            if n == 0 and g == 0:
                out.append(f"{prefix} [0] NCCL INFO NCCL version {nccl}+cuda12.4")
            out.append(f"{prefix} [{g}] NCCL INFO Bootstrap : Using bond0:{job.addr[n]}<0>")
            out.append(f"{prefix} [{g}] NCCL INFO NET/IB : Using [0]mlx5_{g}:1/IB ; OOB bond0:{job.addr[n]}<0>")
            out.append(f"{prefix} [{g}] NCCL INFO Using network IB")
            out.append(f"{host}:{pid}:{pid + 137} [{g}] NCCL INFO comm 0x55d6{n:04x}{g:02x}a40 rank {job.rank(n, g)} "
                       f"nranks {job.world} cudaDev {g} nvmlDev {g} busId {GPU_BUSES[g]}000 commId {comm} - Init "
                       "COMPLETE")
    t = T_START + timedelta(minutes=2)
    step = 240000
    while t < T_FAIL - timedelta(seconds=progress_every_s):
        out.append(f" [{t:%Y-%m-%d %H:%M:%S}] iteration {step:>8}/  500000 | consumed samples: {step * 512:>12} | "
                   "elapsed time per iteration (ms): 1894.1 | lm loss: 1.989340E+00 | loss scale: 1.0 |")
        t += timedelta(seconds=progress_every_s)
        step += 10
    culprit_rank = job.rank(culprit, bad)
    t_timeout = T_FAIL + timedelta(seconds=TIMEOUT_S + 1)
    if kind == "host_oom":
        host = host_name(culprit)
        stamp = f"[{T_FAIL + timedelta(seconds=2):%Y-%m-%d %H:%M:%S},899]"
        out.append(f"{stamp} torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: "
                   f"{bad} (pid: {job.pids[culprit] + bad}) of binary: /opt/conda/envs/train/bin/python")
        out += [f"[{host}]:", f"  time      : {T_FAIL:%Y-%m-%d_%H:%M:%S}", f"  host      : {host}",
                f"  rank      : {culprit_rank} (local_rank: {bad})", f"  exitcode  : -9 (pid: {job.pids[culprit] + bad})",
                "  error_file: <N/A>", f"  traceback : Signal 9 (SIGKILL) received by PID {job.pids[culprit] + bad}"]
    silent = {culprit_rank} if kind in ("xid79", "ecc_dbe", "thermal", "host_oom") else set()
    if kind == "ecc_dbe":
        out.append(f"[rank{culprit_rank}]: RuntimeError: CUDA error: uncorrectable ECC error encountered")
    if kind == "ib_down":  # an HCA of the culprit lost its link: its ring neighbours' sends to it fail
        for n, op in (((culprit + 1) % job.nodes, "Send"), ((culprit - 1) % job.nodes, "Recv")):
            pid = job.pids[n]
            out.append(f"{host_name(n)}:{pid}:{pid + 201} [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got "
                       f"completion from peer {job.addr[culprit]}<54572> with error 12, opcode 0, len 0, vendor err "
                       f"129 ({op})")
    for r in range(job.world):
        if r in silent:
            continue
        stamp = _torch_stamp(t_timeout + timedelta(microseconds=r * 37), glog_digits)
        work = (f"WorkNCCL(SeqNum={SEQ}, OpType=_REDUCE_SCATTER_BASE, NumelIn=805306368, NumelOut=50331648, "
                f"Timeout(ms)={TIMEOUT_S * 1000})")
        out += [f"[rank{r}]:[E{stamp} ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
                f"timeout: {work} ran for {TIMEOUT_S * 1000 + 300 + r % 997} milliseconds before timing out.",
                f"[rank{r}]:[E{stamp} ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] Exception (either an "
                f"error or timeout) detected by watchdog at work: {SEQ}, last enqueued NCCL work: {SEQ + 1}, "
                f"last completed NCCL work: {SEQ - 1}."]
    return "\n".join(out) + "\n"
