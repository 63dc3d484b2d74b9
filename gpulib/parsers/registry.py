"""The parsers gpulib knows, in the order detection tries them: an explicit list, not discovery.

Why a list: the order decides what a file is (an ``nvidia-smi -q`` file also looks like a log;
specific formats must be tried before the two catch-all log kinds), and a reader should see
every format in one place. Adding a parser means adding one :class:`ParserSpec` here; the
corpus contract test and the random-bytes robustness test iterate :data:`SPECS`.

Every spec is called the same way, ``spec.parse(src, opts)``: ``src`` says where the content is
(the path for the parsers that stream a large file, the text for the others, the bytes for
binary pickles), ``opts`` carries the reading options a format needs (the zone of stamps printed
without one, the year of syslog stamps, the boot time of raw ``dmesg``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from gpulib.parsers import (
    dcgmi_diag,
    df,
    flight_recorder,
    fuser,
    gpu_query_time,
    host_memory,
    infiniband,
    ip_link,
    ipmi,
    ipmi_chassis,
    ipmi_sel,
    ipmi_sel_time,
    ipmi_sensor,
    journal_boots,
    kernel_log,
    kubectl_pods,
    nccl_tests,
    nvml_samples,
    nvml_snapshot,
    nvsmi_csv,
    nvsmi_dmon,
    nvsmi_nvlink,
    nvsmi_query,
    nvsmi_table,
    nvsmi_topo,
    nvsmi_xml,
    prom_text,
    sacct,
    slurm,
    slurm_job,
    statfs,
    torchrun_error,
    training_log,
    wtmp,
)
from gpulib.parsers.base import ParseResult


@dataclass(frozen=True)
class Source:
    """Where a parser reads from: ``text`` when given (a pasted file is parsed from its unwrapped
    text), else ``data`` (bytes), else the file at ``path``. ``name`` is what problems cite.
    ``readers``: other readers of the same file's lines (:class:`~gpulib.parsers.linescan.ChunkReader`,
    the signature scan), fed from the parser's own read by a spec that ``shares_read``."""

    name: str
    path: Path | None = None
    text: str | None = None
    data: bytes | None = None
    readers: tuple = ()


@dataclass(frozen=True)
class Options:
    """Reading options; a parser uses the ones its spec names, the others are ignored."""

    tz: str | None = None
    year: int | None = None
    boot_time: str | None = None

    def given(self, names: tuple[str, ...]) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in names and getattr(self, f.name)}


@dataclass(frozen=True)
class ParserSpec:
    """One format: its ``kind``, a cheap ``looks_like(head)`` on the first 8 KiB, ``parse(src,
    opts)``, what it reads (``text``, ``file``: streams the path itself, ``bytes``) and which
    :class:`Options` it takes."""

    kind: str
    looks_like: Callable[[str], bool]
    parse: Callable[[Source, Options], ParseResult]
    input: str = "text"
    options: tuple[str, ...] = ()
    shares_read: bool = False  # streams the file through Source.readers too (one read, not two)


def _text(parse: Callable[..., ParseResult], *options: str) -> Callable[[Source, Options], ParseResult]:
    def run(src: Source, opts: Options) -> ParseResult:
        return parse(src.text or "", src.name, **opts.given(options))
    return run


def _kernel(src: Source, opts: Options) -> ParseResult:
    if src.text is not None:
        return kernel_log.parse(src.text, src.name, **opts.given(("tz", "year", "boot_time")))
    return kernel_log.parse_file(src.path, **opts.given(("tz", "year", "boot_time")))


def _training(src: Source, opts: Options) -> ParseResult:
    if src.text is not None:
        return training_log.parse(src.text, src.name, **opts.given(("tz", "year")))
    return training_log.parse_file(src.path, source=src.name, also=src.readers, **opts.given(("tz",)))


def _flight(src: Source, opts: Options) -> ParseResult:
    if src.data is not None and src.data[:1] == b"\x80":  # pickle protocol 2+
        return flight_recorder.parse_bytes(src.data, src.name)
    text = src.text if src.text is not None else (src.data or b"").decode("utf-8", "replace")
    return flight_recorder.parse(text, src.name)


def _spec(module, *options: str) -> ParserSpec:
    return ParserSpec(module.KIND, module.looks_like, _text(module.parse, *options), "text", options)


#: Detection order: specific formats first, the two catch-all log kinds last.
SPECS: tuple[ParserSpec, ...] = (
    _spec(nvml_snapshot),
    _spec(nvml_samples),
    _spec(nvsmi_xml, "tz"),
    ParserSpec(flight_recorder.KIND, flight_recorder.looks_like, _flight, "bytes"),
    _spec(torchrun_error),
    _spec(nvsmi_query, "tz"),
    _spec(nvsmi_csv, "tz"),
    _spec(nvsmi_dmon, "tz"),
    _spec(nvsmi_table, "tz"),
    _spec(nvsmi_topo),
    _spec(nvsmi_nvlink),
    _spec(dcgmi_diag),
    _spec(slurm, "tz"),
    _spec(slurm_job, "tz"),
    _spec(sacct, "tz"),
    _spec(fuser),
    _spec(infiniband),
    _spec(ipmi),
    _spec(prom_text),
    _spec(nccl_tests),
    _spec(df),
    _spec(ip_link),
    _spec(kubectl_pods),
    _spec(ipmi_chassis),
    _spec(ipmi_sel),
    _spec(ipmi_sel_time),
    _spec(ipmi_sensor),
    _spec(statfs),
    _spec(wtmp, "year"),
    _spec(journal_boots),
    _spec(gpu_query_time),
    _spec(host_memory, "tz"),
    ParserSpec(training_log.KIND, training_log.looks_like, _training, "file", ("tz", "year"), shares_read=True),
    ParserSpec(kernel_log.KIND, kernel_log.looks_like, _kernel, "file", ("tz", "year", "boot_time")),
)
BY_KIND: dict[str, ParserSpec] = {spec.kind: spec for spec in SPECS}
#: The binary format detected from the head's bytes before any text is decoded.
looks_like_bytes = flight_recorder.looks_like_bytes
