"""Every kind of evidence file, by name, and the groups of kinds read together.

Why one module: a kind is the word detection gives a file (:mod:`gpulib.parsers.registry`) and
every rule, table and face picks files by it. Written as bare strings in each place, the "GPU
state" files had become seven lists with different members, so a rule, the notebooks and the
Slurm check could read different files for the same question. The groups below are the answers;
a new parser's kind is added here (``tests/test_kinds.py`` keeps this list and the parser registry
in step).
"""

from __future__ import annotations

# ---- what the parsers detect (one per parser; see gpulib.parsers.registry) ----
NVIDIA_SMI_XML = "nvidia_smi_xml"  # nvidia-smi -q -x
NVIDIA_SMI_Q = "nvidia_smi_q"  # nvidia-smi -q
NVIDIA_SMI_TABLE = "nvidia_smi_table"  # plain nvidia-smi
NVIDIA_SMI_CSV = "nvidia_smi_csv"  # nvidia-smi --query-gpu=... --format=csv (one row per GPU: a snapshot; many: a series)
NVIDIA_SMI_DMON = "nvidia_smi_dmon"
NVIDIA_SMI_NVLINK = "nvidia_smi_nvlink"
NVIDIA_SMI_TOPO = "nvidia_smi_topo"
NVML_SNAPSHOT = "nvml_snapshot"  # gpulib collect: nvml/snapshot.json
NVML_SAMPLES = "nvml_samples"  # gpulib collect: nvml/samples.csv
GPU_QUERY_TIME = "gpu_query_time"
DCGM_EXPORTER = "dcgm_exporter"
DCGMI_DIAG = "dcgmi_diag"
KERNEL_LOG = "kernel_log"
JOURNAL_BOOTS = "journal_boots"
WTMP = "wtmp"
TRAINING_LOG = "training_log"
TORCHRUN_ERROR_FILE = "torchrun_error_file"
FLIGHT_RECORDER = "flight_recorder"
NCCL_TESTS = "nccl_tests"
SLURM_JOB = "slurm_job"
SLURM_SINFO = "slurm_sinfo"
SACCT = "sacct"
IBSTAT = "ibstat"  # ibstat and ibstatus: one port record each, whichever tool printed it
IP_LINK = "ip_link"
KUBECTL_PODS = "kubectl_pods"  # kubectl get pods -o wide / describe pod: the node each pod ran on
IPMITOOL_SEL = "ipmitool_sel"
IPMITOOL_SEL_TIME = "ipmitool_sel_time"
IPMITOOL_SDR = "ipmitool_sdr"
IPMITOOL_SENSOR = "ipmitool_sensor"
IPMITOOL_CHASSIS = "ipmitool_chassis"
DF = "df"
STATFS = "statfs"
FUSER = "fuser"
HOST_MEMORY = "host_memory"  # /proc/meminfo samples, sar -r, free: a host's available memory over time
#: Every kind a parser detects.
PARSED = (NVIDIA_SMI_XML, NVIDIA_SMI_Q, NVIDIA_SMI_TABLE, NVIDIA_SMI_CSV, NVIDIA_SMI_DMON, NVIDIA_SMI_NVLINK,
          NVIDIA_SMI_TOPO, NVML_SNAPSHOT, NVML_SAMPLES, GPU_QUERY_TIME, DCGM_EXPORTER, DCGMI_DIAG, KERNEL_LOG,
          JOURNAL_BOOTS, WTMP, TRAINING_LOG, TORCHRUN_ERROR_FILE, FLIGHT_RECORDER, NCCL_TESTS, SLURM_JOB, SLURM_SINFO,
          SACCT, IBSTAT, IP_LINK, KUBECTL_PODS, IPMITOOL_SEL, IPMITOOL_SEL_TIME, IPMITOOL_SDR, IPMITOOL_SENSOR,
          IPMITOOL_CHASSIS, DF, STATFS, FUSER, HOST_MEMORY)

# ---- what gathering says of a file no parser takes (gpulib.evidence.gather) ----
BUNDLE_METADATA = "bundle_metadata"
VERSIONS = "versions"
COLLECTOR_STDERR = "collector_stderr"
CHECKPOINT = "checkpoint"
DOCUMENTATION = "documentation"
TEXT = "text"  # readable lines of no known structure: only the signature catalogue reads them
EMPTY = "empty"
UNREADABLE = "unreadable"
UNKNOWN = "unknown"

# ---- groups ----
#: nvidia-smi's one-moment snapshot formats, richest first (a node's facts take the first present).
SMI_SNAPSHOTS = (NVIDIA_SMI_XML, NVIDIA_SMI_Q, NVIDIA_SMI_TABLE)
#: Every one-moment GPU snapshot: nvidia-smi's and gpulib collect's NVML snapshot.
GPU_SNAPSHOTS = (*SMI_SNAPSHOTS, NVML_SNAPSHOT)
#: GPU time series: samples of a GPU over time, not its state at one moment.
GPU_SERIES = (NVIDIA_SMI_CSV, NVIDIA_SMI_DMON, NVML_SAMPLES)
#: Every file that tells a GPU's state: snapshots, series and DCGM's exporter scrape. A GPU step
#: shows the findings quoting these; the rules join their records by host.
GPU_STATE = (*GPU_SNAPSHOTS, *GPU_SERIES, DCGM_EXPORTER)
#: Every file whose records are GPUs as seen at one moment: the snapshots, and nvidia-smi's CSV query
#: (each row one GPU at one moment, also when many rows make a series).
GPU_SNAPSHOT_ROWS = (*GPU_SNAPSHOTS, NVIDIA_SMI_CSV)
#: The kernel's own log (dmesg, journalctl -k, syslog, kern.log).
KERNEL = (KERNEL_LOG,)
#: What the job's processes printed: their console log and torchrun's per-rank error files.
JOB_LOGS = (TRAINING_LOG, TORCHRUN_ERROR_FILE)
#: What the job, its launcher and its scheduler wrote.
JOB = (*JOB_LOGS, FLIGHT_RECORDER, SLURM_JOB, SACCT)
#: A filesystem's size and use (``df``, ``stat -f``): the shared-memory rule and the storage table.
FILESYSTEM_USAGE = (DF, STATFS)
#: Files of which nothing was read: not readable, empty, or binary data of no known format. A
#: verdict on evidence of only these would be a verdict on nothing.
NOTHING_READ = (UNREADABLE, EMPTY, UNKNOWN)
