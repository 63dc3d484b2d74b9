"""Kernel logs (dmesg in every format, journal, syslog, /dev/kmsg, pstore) -> typed events.

Why the kernel log first: when a GPU job dies, the kernel saw it before the job did. An Xid line
names the GPU (by PCI bus id), the error class and often the process; a PCIe AER report just
before it says the link dropped; a hung task in D state after it is the rank that never came
back; an oom-killer dump names the PID torchrun later reports as "exitcode -9". Everything the
job prints afterwards (NCCL watchdog timeouts on every rank) is usually the cascade.

Speed: diagnosis scans big logs, and almost every line is noise. One combined regex finds the
few interesting lines in C (``finditer`` over the whole text); only those lines get their prefix
parsed and their specific pattern applied. Uninteresting lines cost nothing in Python.

Event kinds (``KernelEvent.kind``):

- ``xid`` (NVRM Xid; ``xid``, ``pci_bus_id``, ``pid``, ``process``; ``details``: ``message``,
  ``xid_name``, ``caused_by_xid`` for "caused by previous Xid N", ``recovery_action`` /
  ``recovery_action_code`` / ``recovery_action_from`` for Xid 154, ``nvlink_unit`` / ``severity`` /
  ``link`` for NVLink5 Xid 144-150)
- ``fell_off_bus`` ("GPU has fallen off the bus" without or beside an Xid; ``details['xid_logged']``)
- ``sxid`` (NVSwitch SXid from the kernel or nv-fabricmanager; ``details``: ``sxid``, ``severity``)
- ``aer`` (PCIe AER; ``details``: ``severity`` fatal|non_fatal|corrected, ``gpu`` (the GPU on the
  link, when its driver's line follows the port's report), ``errors``,
  ``surprise_down``, ``recovery``)
- ``pcie_link_degraded`` ("limited by ... x8 link"; ``details``: widths, speeds, Gb/s)
- ``oom_invoked``, ``oom_constraint``, ``oom_kill`` (``pid``, ``process``, ``details['anon_rss_kib']``,
  ``constraint``), ``memory_pressure`` (TCP out of memory, page allocation failure)
- ``hung_task`` (D state; ``pid``, ``process``, ``details['blocked_s']``, ``in_nvidia_driver``)
- ``ib_link_down`` / ``ib_link_up`` / ``eth_link_down`` / ``eth_link_up`` (carrier, Link down/up,
  cable unplugged/plugged, PORT_ERR; ``details['iface']``, ``reason``), ``ib_module_error``
- ``nccl_segfault`` / ``segfault`` (``pid``, ``process``, ``details['library']``)
- ``gpu_reset_required``, ``gpu_init_failed``, ``gpu_identity`` (PCI -> UUID/serial),
  ``driver_loaded`` (``details['driver_version']``), ``driver_mismatch``
- ``mce`` (machine check / APEI / EDAC CE-UE), ``kernel_panic``, ``kernel_oops``, ``soft_lockup``
- ``io_error``, ``resource_limit`` (file-max), ``cpu_thermal_throttle``, ``pcie_slot_power``, ``boot``
- ``benign``: lines that look alarming but are known noise (nvidia-peermem "invalid context",
  carrier changes of veth/cali/docker interfaces); diagnosis should ignore them.

Times: see :mod:`gpulib.parsers.kernel_prefix`. Zone-less clocks use ``tz`` (default UTC, said in
``details['time_assumption']``); seconds-since-boot clocks need ``boot_time`` (else ``time_utc``
is None and ``details['uptime_s']`` keeps the raw value).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gpulib.catalog import xid_info
from gpulib.identity import normalize_pci, to_utc_iso
from gpulib.logs import get_logger
from gpulib.parsers.base import DEFAULT_READ_CAP_BYTES, ParseResult, Problem, line_chunks, looks_binary
from gpulib.parsers.kernel_prefix import HUMAN_STAMP, MONTHS, Prefix, journal_header, parse_instant, split_prefix
from gpulib.parsers.logtime import parse_zone
from gpulib.parsers.prefilter import KeywordLines

log = get_logger(__name__)

KIND = "kernel_log"

#: Kinds that are context, not trouble: diagnosis may show them but never blames them.
INFO_KINDS = frozenset({"benign", "driver_loaded", "gpu_identity", "boot", "ib_link_up", "eth_link_up",
                        "oom_constraint"})

_MAX_MESSAGE = 4096  # a 10 MB line is cut before any pattern sees it
_CHUNK_BYTES = 32 * 1024 * 1024


@dataclass
class KernelEvent:
    """One kernel-log event. ``line`` is 1-based in the source file; ``text`` is the raw line."""

    line: int
    time_utc: str | None
    host: str | None
    kind: str
    text: str
    xid: int | None = None
    pci_bus_id: str | None = None
    pid: int | None = None
    process: str | None = None
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


# --- the pre-filter ------------------------------------------------------------------------------
# Every line that holds an anchor is classified by _TRIGGER, which only sees candidate lines. ASCII
# text (nearly every kernel log) is searched as bytes by the shared keyword prefilter (one Hyperscan
# pass for all anchors); other text by Python's regex engine, which skips fast only when every
# alternative starts with a rare character: one alternation of the literals that start with an
# upper-case letter (one C-speed pass), plus a few lower-case literals found with str.find.
UPPER_ANCHORS = (
    "NVRM", "SXid", "NVSwitch", "AER", "PCIe Bus Error", "Surprise Down", "DPC: containment", "API mismatch",
    "RmInitAdapter", "GPU Reset", "Kill process", "Killed process", "TCP: out of memory", "INFO: task",
    "Link ", "Port module event", "PORT_", "GT/s PCIe", "Hardware Error", "Machine ", "EDAC MC",
    "Kernel panic", "BUG: ", "Oops: ", "LOCKUP", "I/O error", "VFS: file-max", "Core temperature",
    "Package temperature", "Detected insufficient", "Linux version", "Journal begins", "Logs begin",
    "Boot ", "Reboot",
)


def _first_letter_alternation(literals: tuple[str, ...]) -> re.Pattern:
    """``N(?:VRM|VSwitch)|S(?:Xid|...)|...``: one branch per first letter is ~20% faster than a flat list."""
    groups: dict[str, list[str]] = {}
    for literal in literals:
        groups.setdefault(literal[0], []).append(re.escape(literal[1:]))
    return re.compile("|".join(f"{re.escape(first)}(?:{'|'.join(rest)})" for first, rest in groups.items()))


_UPPER_ANCHORS = _first_letter_alternation(UPPER_ANCHORS)
LOWER_ANCHORS = ("oom-kill", "carrier", "segfault", "general protection", "peermem", "allocation failure",
                  "not responding", "fallen off")

_TRIGGER = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in (
    ("xid", r"NVRM: Xid"),
    ("sxid", r"SXid \(|detected NVSwitch (?:non-)?fatal error"),
    ("nvrm", r"fallen off the bus|NVRM: GPU at PCI:|NVRM: loading NVIDIA|API mismatch|RmInitAdapter failed"
             r"|needs to be reset|requires? (?:a )?reset|GPU Reset Required"),
    ("aer", r"AER: |PCIe Bus Error|Surprise Down|DPC: containment"),
    ("oom", r"invoked oom-killer|oom-kill:|Kill(?:ed)? process \d|TCP: out of memory|page allocation failure"),
    ("hung", r"blocked for more than \d+ seconds"),
    ("link", r"[Ll]ost carrier|Gained carrier|: (?:NIC )?Link (?:is )?(?:[Dd]own|[Uu]p)\b|Port module event"
             r"|PORT_ERR|PORT_ACTIVE"),
    ("pcie", r"limited by [\d.]+ GT/s"),
    ("segv", r"\]: segfault at |general protection fault ip"),
    ("peermem", r"nvidia-peermem"),
    ("mce", r"\[Hardware Error\]|Machine [Cc]heck(?: Exception| events)|EDAC MC\d+: \d+ [CU]E"),
    ("panic", r"Kernel panic|BUG: |Oops: |soft lockup|hard LOCKUP"),
    ("io", r"I/O error|not responding, still trying|file-max limit"),
    ("misc", r"(?:Core|Package) temperature above threshold|Detected insufficient power|Linux version \d"
             r"|^-- (?:Boot|Reboot|Journal begins|Logs begin)"),
)), re.M)


_ANCHOR_LINES = KeywordLines(tuple(a.encode() for a in UPPER_ANCHORS + LOWER_ANCHORS))


def candidate_offsets(text: str) -> list[int]:
    """Sorted offsets in ``text`` from which the lines holding an anchor are found (the cheap pass
    over the whole text): the line starts when the text is ASCII (byte and character offsets are
    then the same), else every anchor hit."""
    if text.isascii():  # a flag of the str object: O(1)
        return _ANCHOR_LINES.line_starts(text.encode("ascii"))
    hits = {m.start() for m in _UPPER_ANCHORS.finditer(text)}
    for literal in LOWER_ANCHORS:
        pos = text.find(literal)
        while pos >= 0:
            hits.add(pos)
            pos = text.find(literal, pos + 1)
    return sorted(hits)


_DEVICE = re.compile(r"(?:[\w.-]+) ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])[: ]")
#: A line the NVIDIA driver prints about its device (``nvidia 0000:04:00.0: AER: can't recover``).
_GPU_DRIVER_LINE = re.compile(r"\bnvidia ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): ")
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+)(?:, ?(.*))?")
_XID_PID = re.compile(r"pid=(?:'?<unknown>'?|(\d+))(?:, name=([^,]*))?, ?")
_XID_CAUSE = re.compile(r"(?:caused by|due to) previous Xid\s*(\d+)", re.I)
_XID_154 = re.compile(r"recovery action changed from 0x([0-9a-fA-F]+) \(([^)]*)\) to 0x([0-9a-fA-F]+) \(([^)]*)\)")
_NVL5 = re.compile(r"^(\w+)\s+(Fatal|Nonfatal|Non-fatal)\b(?:.*?\bLink (\d+))?(?:.*?\((0x[0-9a-fA-F]+))?")
_PCI_ANY = re.compile(r"(?:PCI:)?((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\b")
_SXID = re.compile(r"(?:nvidia-nvswitch(\d+): )?SXid \(PCI:([0-9a-fA-F:.]+)\): (\d+), (Non-fatal|Fatal|[^,]*)(?:, (.*))?")
_FM_SXID = re.compile(r"detected NVSwitch (non-fatal|fatal) error (\d+).*?pci bus id ([0-9a-fA-F:.]+)"
                      r"(?: physical id (\d+))?(?: port (\d+))?")
_UUID = re.compile(r"GPU at PCI:([0-9a-fA-F:.]+): (GPU-[0-9a-fA-F-]+)")
_SERIAL = re.compile(r"GPU Board Serial Number: (\S+)")
_DRIVER = re.compile(r"NVRM: loading NVIDIA .*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")
_MISMATCH = re.compile(r"client has the version (\d+(?:\.\d+)+)(?:.*?kernel module has the version (\d+(?:\.\d+)+))?")
_AER_RECV = re.compile(r"AER: (?:Multiple )?(Corrected|Uncorrected|Uncorrectable)(?: \((Fatal|Non-Fatal)\))? error"
                       r"(?: message)? received:? (?:from )?([0-9a-fA-F:.]+)?")
_AER_SEV = re.compile(r"PCIe Bus Error: severity=([^,]+), type=([^,]+)")
_AER_BIT = re.compile(r"\[\s*\d+\]\s+([A-Za-z][\w ]*?)\s*(?:\(First\))?$")
_OOM_INVOKED = re.compile(r"(\S+) invoked oom-killer: gfp_mask=([^,\s]+),?(?: .*?order=(-?\d+))?(?:, oom_score_adj=(-?\d+))?")
_OOM_PID = re.compile(r"PID: (\d+) Comm: (\S+)")
_OOM_KILL = re.compile(r"Kill(?:ed)? process (\d+),? (?:UID \d+, )?\(([^)]*)\)(.*)")
_KIB = re.compile(r"(total-vm|anon-rss|file-rss|shmem-rss):(\d+)kB")
_KV = re.compile(r"(\w+)=([^,\s]*)")
_HUNG = re.compile(r"INFO: task (.+?):(\d+) blocked for more than (\d+) seconds")
_CARRIER = re.compile(r"([\w.@-]+): ([Ll]ost|Gained) carrier")
_LINK = re.compile(r"([\w.@-]+): (?:NIC )?Link (?:is )?([Dd]own|[Uu]p)\b")
_MODULE = re.compile(r"Port module event(?:\[error\])?: module (\d+), (.*)")
_PCIE = re.compile(r"([\d.]+) Gb/s available PCIe bandwidth, limited by ([\d.]+) GT/s PCIe x(\d+) link at "
                   r"([0-9a-fA-F:.]+) \(capable of ([\d.]+) Gb/s with ([\d.]+) GT/s PCIe x(\d+) link\)")
_SEGV = re.compile(r"([^\s\[]+)\[(\d+)\]: segfault at (\S+) ip (\S+) sp \S+ error (\d+)(?: in ([^\[\s]+))?")
_GPF = re.compile(r"traps: ([^\s\[]+)\[(\d+)\] general protection fault.*?(?: in ([^\[\s]+))?$")
_VIRTUAL_IFACE = re.compile(r"^(?:veth|cali|docker|br-|cni|flannel|tunl|vxlan|lo$|virbr|kube|weave|tap)")
_IB_IFACE = re.compile(r"^(?:ib|mlx\d_|hfi|qib)")
_SXID_LINK = re.compile(r"\bLink (\d+)")
_FELL_OFF_GPU = re.compile(r"GPU (?:at )?(?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
_AER_STATUS = re.compile(r"error status/mask=([0-9a-fA-F]+)/([0-9a-fA-F]+)")
_TASK_STATE = re.compile(r"state:(\w)")
_EDAC = re.compile(r"EDAC MC(\d+): (\d+) ([CU]E)")
_MCE_SEVERITY = re.compile(r"event severity: (\w+)")
_MCE_UNCORRECTED = re.compile(r"[Uu]ncorrect|Fatal|fatal")
_IO_DEVICE = re.compile(r"dev (\w+)|\((\w+)\): .*I/O error|server (\S+) not responding")
_LINUX_VERSION = re.compile(r"Linux version (\S+)")


class _Scanner:
    """Stateful scan over one file, fed in chunks (state: year, zone, pending OOM constraint...)."""

    def __init__(self, source: str, tz: str | None, boot_time: str | None, year: int | None,
                 written_at: datetime | None = None) -> None:
        self.source = source
        # a syslog line has no year: the file's modification time (else now) bounds it from above
        self.written_at = written_at or datetime.now(timezone.utc)
        self.written_source = "file modification time" if written_at else "current year"
        self.events: list[KernelEvent] = []
        self.problems: list[Problem] = []
        self.recognised = 0
        self.zone = parse_zone(tz) if tz else timezone.utc
        self.zone_name = tz or "UTC"
        self.zone_assumed = tz is None
        if tz and self.zone is None:
            self.problems.append(Problem(source, f"unknown time zone {tz!r}; zone-less times taken as UTC"))
            self.zone, self.zone_name = timezone.utc, "UTC"
        self.boot = parse_instant(boot_time)
        if boot_time and self.boot is None:
            self.problems.append(Problem(source, f"boot_time {boot_time!r} is not ISO-8601 or epoch seconds"))
        self.year = year
        self.year_source = "given" if year else None
        self.last_month = 0
        self.zone_hint = ""  # zone abbreviation printed by journalctl's header, when not UTC
        self.pending_constraint: KernelEvent | None = None
        self.xid_pcis: set[str] = set()
        # dmesg -H, per host (pdsh interleaves nodes; None: no host prefix): (month, day, (h, m, 0)) of the
        # last minute header and the deltas summed since it; the offset in the current chunk up to which
        # they are summed (all only once such a stamp was seen)
        self.human_clock: dict[str | None, tuple[tuple[int, int, tuple[int, int, int]], float]] = {}
        self.human_pos = 0
        self.human_seen = False

    # --- time -------------------------------------------------------------------------------
    def _time(self, p: Prefix, details: dict) -> str | None:
        if p.clock == "wall":
            return to_utc_iso(p.wall)
        if p.clock == "local":
            if self.zone_assumed:
                details["time_assumption"] = f"{p.fmt} carries no zone; {self._zone_note()}"
            return to_utc_iso(p.wall.replace(tzinfo=self.zone))
        if p.clock == "boot":
            details["uptime_s"] = p.uptime_s
            if self.boot is None:
                details["time_assumption"] = f"{p.fmt} counts seconds since boot; no boot_time given"
                return None
            return to_utc_iso(self.boot + timedelta(seconds=p.uptime_s))
        if p.clock in ("syslog", "human", "delta"):
            human = self.human_clock.get(p.host) if p.clock != "syslog" else None
            if p.clock == "delta":  # dmesg -H: the last minute header plus the deltas printed since
                if human is None:
                    details["time_assumption"] = "dmesg -H delta with no [MonDD HH:MM] line before it"
                    return None
                p.month, p.day, p.hms = human[0]
            if self.year is None:
                self.year, self.year_source = self.written_at.year, f"assumed from {self.written_source}"
                first = datetime(self.year, p.month, min(p.day, 28), *p.hms, tzinfo=self.zone)
                if first > self.written_at + timedelta(days=1):  # a log cannot come from the future
                    self.year -= 1
            if self.last_month and p.month < self.last_month - 6:  # Dec -> Jan: the year rolled over
                self.year += 1
            self.last_month = p.month
            notes = []
            if p.clock != "syslog":
                notes.append("dmesg -H prints the minute only: seconds counted from the minute's start "
                             "plus the deltas printed since")
            if self.year_source != "given" and self.year_source != "journal header":
                notes.append(f"{p.fmt} timestamp has no year; year {self.year} {self.year_source}")
            if self.zone_assumed:
                notes.append(f"{p.fmt} timestamp carries no zone; {self._zone_note()}")
            if notes:
                details["time_assumption"] = "; ".join(notes)
            try:
                moment = datetime(self.year, p.month, p.day, *p.hms, tzinfo=self.zone)
            except ValueError:  # Feb 29 in an assumed non-leap year
                return None
            if human is not None:
                moment += timedelta(seconds=human[1])
            return to_utc_iso(moment)
        return None

    def _zone_note(self) -> str:
        if self.zone_hint:
            return f"the journal header says {self.zone_hint}, which is ambiguous; assumed UTC (pass tz=)"
        return "assumed UTC (pass tz=)"

    # --- scanning ---------------------------------------------------------------------------
    def feed(self, text: str, first_line: int = 1, hits: list[int] | None = None) -> None:
        """Read the events of ``text`` (whole lines); ``hits``: its candidate offsets when already known."""
        if not text:
            return
        self._count_recognised(text)
        self.human_pos = 0
        line_no, counted_to, skip_to = first_line, 0, 0
        for hit in candidate_offsets(text) if hits is None else hits:
            start = text.rfind("\n", 0, hit) + 1
            if start < skip_to:
                continue
            end = text.find("\n", hit)
            end = len(text) if end < 0 else end
            skip_to = end + 1  # one event per line at most
            m = _TRIGGER.search(text, start, min(end, start + _MAX_MESSAGE))
            if not m:
                continue
            line_no += text.count("\n", counted_to, start)
            counted_to = start
            try:
                consumed = self._handle(m.lastgroup, text, start, end, line_no)
            except Exception as exc:  # a parser never raises: record and go on
                log.debug("kernel_log handler failed on %s:%d", self.source, line_no, exc_info=True)
                self.problems.append(Problem(self.source, f"could not read line: {exc}", line_no))
                consumed = end
            skip_to = max(skip_to, consumed + 1)
        self.follow_human_stamps(text, len(text))

    def follow_human_stamps(self, text: str, upto: int) -> None:
        """Sum the ``dmesg -H`` stamps of ``text`` up to offset ``upto`` (a line end): a new minute
        header restarts the sum. Costs nothing until a candidate line carried such a stamp."""
        if not self.human_seen or upto <= self.human_pos:
            return
        clock = self.human_clock
        for m in HUMAN_STAMP.finditer(text, self.human_pos, upto):
            if m["delta"] is None:
                clock[m["host"]] = ((MONTHS[m["mon"]], int(m["day"]), (int(m["h"]), int(m["mi"]), 0)), 0.0)
            elif m["host"] in clock:
                minute, offset_s = clock[m["host"]]
                clock[m["host"]] = (minute, offset_s + float(m["delta"]))
        self.human_pos = upto

    def _count_recognised(self, text: str) -> None:
        """Whether one of the first 200 lines carries a kernel clock (only that is asked of
        :attr:`recognised`: the first such line ends the search, not 200 prefixes a file)."""
        if self.recognised:
            return
        for raw in text[:65536].splitlines()[:200]:
            if raw.strip() and split_prefix(raw).clock != "none":
                self.recognised = 1
                return

    def _lines_after(self, text: str, end: int, count: int) -> list[tuple[int, str]]:
        """Up to ``count`` following lines as (end offset, line)."""
        out = []
        pos = end + 1
        while len(out) < count and pos < len(text):
            nxt = text.find("\n", pos)
            nxt = len(text) if nxt < 0 else nxt
            out.append((nxt, text[pos:nxt].rstrip("\r")))
            pos = nxt + 1
        return out

    def _lines_before(self, text: str, start: int, count: int) -> list[str]:
        out = []
        end = start - 1
        while len(out) < count and end > 0:
            begin = text.rfind("\n", 0, end) + 1
            out.append(text[begin:end].rstrip("\r"))
            end = begin - 1
        return out

    def _emit(self, p: Prefix, raw: str, line_no: int, kind: str, **fields) -> KernelEvent:
        details = fields.pop("details", {})
        event = KernelEvent(line=line_no, time_utc=self._time(p, details), host=p.host, kind=kind,
                            text=raw[:_MAX_MESSAGE], details=details, **fields)
        self.events.append(event)
        return event

    def _handle(self, family: str, text: str, start: int, end: int, line_no: int) -> int:
        raw = text[start:end].rstrip("\r")
        p = split_prefix(raw)
        msg = p.message[:_MAX_MESSAGE]
        if p.clock == "none" and not raw[:1].isspace() and family != "misc":
            # continuation line of a multi-line message: borrow the clock of the line above
            for above in self._lines_before(text, start, 3):
                q = split_prefix(above)
                if q.clock != "none":
                    q.message = msg
                    p = q
                    break
        if p.clock in ("human", "delta"):  # the time is the sum of every stamp up to this line
            self.human_seen = True
            self.follow_human_stamps(text, end)
        handler = getattr(self, f"_on_{family}")
        return handler(p, msg, raw, text, start, end, line_no) or end

    # --- handlers: each returns the offset of the last line it consumed (or None) ------------
    def _device(self, msg: str) -> str | None:
        m = _DEVICE.match(msg)
        return normalize_pci(m[1]) if m else None

    def _on_xid(self, p, msg, raw, text, start, end, line_no):
        m = _XID.search(msg)
        if not m:
            return None
        code, rest = int(m[2]), m[3] or ""
        pid = process = None
        pm = _XID_PID.match(rest)
        if pm:
            pid = int(pm[1]) if pm[1] else None
            name = (pm[2] or "").strip()
            process = None if not name or "unknown" in name else name
            rest = rest[pm.end():]
        details: dict = {"message": rest.strip()}
        info = xid_info(code)
        if info:
            details["xid_name"] = info.name
        cause = _XID_CAUSE.search(rest)
        if cause:
            details["caused_by_xid"] = int(cause[1])
        if code == 154:
            r = _XID_154.search(rest)
            if r:
                details.update(recovery_action_from=r[2], recovery_action=r[4],
                               recovery_action_code=int(r[3], 16))
        n = _NVL5.match(rest.strip()) if 144 <= code <= 150 else None
        if n:
            details.update(nvlink_unit=n[1], severity="fatal" if n[2] == "Fatal" else "non_fatal")
            if n[3]:
                details["link"] = int(n[3])
            if n[4]:
                details["intrinfo"] = n[4]
        pci = normalize_pci(m[1])
        if pci:
            self.xid_pcis.add(pci)
        self._emit(p, raw, line_no, "xid", xid=code, pci_bus_id=pci, pid=pid, process=process, details=details)
        return None

    def _on_sxid(self, p, msg, raw, text, start, end, line_no):
        m = _SXID.search(msg)
        if m:
            details = {"sxid": int(m[3]), "severity": "fatal" if m[4] == "Fatal" else "non_fatal",
                       "message": (m[5] or "").strip()}
            if m[1]:
                details["nvswitch"] = int(m[1])
            link = _SXID_LINK.search(m[5] or "")
            if link:
                details["link"] = int(link[1])
            self._emit(p, raw, line_no, "sxid", pci_bus_id=normalize_pci(m[2]), details=details)
            last = end  # the same SXid continues on the next lines ("Severity 1 Engine ...", "Data {...}")
            for off, nxt in self._lines_after(text, end, 4):
                if f"SXid (PCI:{m[2]}): {m[3]}," not in nxt:
                    break
                last = off
            return last
        m = _FM_SXID.search(msg)
        if m:
            details = {"sxid": int(m[2]), "severity": "fatal" if m[1] == "fatal" else "non_fatal",
                       "reporter": "nv-fabricmanager"}
            if m[4]:
                details["nvswitch_physical_id"] = int(m[4])
            if m[5]:
                details["port"] = int(m[5])
            self._emit(p, raw, line_no, "sxid", pci_bus_id=normalize_pci(m[3]), details=details)
        return None

    def _on_nvrm(self, p, msg, raw, text, start, end, line_no):
        if "fallen off the bus" in msg:
            pci, first_line, first_raw = None, line_no, raw
            lines = [raw, *self._lines_before(text, start, 2)]
            for back, candidate in enumerate(lines):
                found = _FELL_OFF_GPU.search(msg if back == 0 else candidate)
                if found:
                    pci = normalize_pci(found[1])
                    if all(line[:1].isspace() for line in lines[:back]):  # a message wrapped over lines:
                        first_line, first_raw = line_no - back, candidate  # it starts where it names the GPU
                    break
            self._emit(p, first_raw, first_line, "fell_off_bus", pci_bus_id=pci,
                       details={"xid_logged": pci in self.xid_pcis})
            return None
        m = _UUID.search(msg)
        if m:
            details = {"uuid": m[2]}
            for off, nxt in self._lines_after(text, end, 1):
                s = _SERIAL.search(nxt)
                if s:
                    details["serial"] = s[1]
                    end = off
            self._emit(p, raw, line_no, "gpu_identity", pci_bus_id=normalize_pci(m[1]), details=details)
            return end
        m = _DRIVER.search(msg)
        if m:
            self._emit(p, raw, line_no, "driver_loaded", details={"driver_version": m[1]})
            return None
        if "API mismatch" in msg:
            m = _MISMATCH.search(" ".join([msg] + [line for _off, line in self._lines_after(text, end, 1)]))
            details = {"client_version": m[1], "module_version": m[2]} if m else {}
            self._emit(p, raw, line_no, "driver_mismatch", details=details)
            return None
        pci_match = _PCI_ANY.search(msg.split("NVRM:", 1)[-1])
        pci = self._device(msg) or (normalize_pci(pci_match[1]) if pci_match else None)
        kind = "gpu_init_failed" if "RmInitAdapter failed" in msg else "gpu_reset_required"
        self._emit(p, raw, line_no, kind, pci_bus_id=pci)
        return None

    def _on_aer(self, p, msg, raw, text, start, end, line_no):
        device = self._device(msg)
        details: dict = {"errors": []}
        m = _AER_RECV.search(msg)
        last = end
        if m:
            details["severity"] = _severity(m[1], m[2])
            if m[3]:
                details["source_device"] = normalize_pci(m[3])
            # the report continues: "PCIe Bus Error: severity=...", "device [...] error status/mask", "[ 5] SDES"
            for off, nxt in self._lines_after(text, end, 8):
                q = split_prefix(nxt).message
                if device and self._device(q) != device:
                    break
                if "AER: " in q and "error received" in q:
                    break
                self._aer_detail(q, details)
                gpu = _GPU_DRIVER_LINE.search(q)
                if gpu:  # the port reports the error; the GPU on that link says it cannot recover
                    details.setdefault("gpu", normalize_pci(gpu[1]))
                last = off
        elif "can't recover" in msg or "recovery failed" in msg:
            details["recovery"] = "failed"
        else:
            self._aer_detail(msg, details)
        details["surprise_down"] = any(e in ("SDES", "Surprise Down Error") for e in details["errors"]) \
            or "Surprise Down" in msg
        self._emit(p, raw, line_no, "aer", pci_bus_id=device, details=details)
        return last

    @staticmethod
    def _aer_detail(message: str, details: dict) -> None:
        sev = _AER_SEV.search(message)
        if sev:
            details["severity"] = _severity(*sev[1].split(" (", 1)) if " (" in sev[1] else _severity(sev[1], None)
            details["type"] = sev[2].strip()
            return
        bit = _AER_BIT.search(message)
        if bit:
            details["errors"].append(bit[1].strip())
        status = _AER_STATUS.search(message)
        if status:
            details["status"], details["mask"] = status[1], status[2]

    def _on_oom(self, p, msg, raw, text, start, end, line_no):
        m = _OOM_INVOKED.search(msg)
        if m:
            details = {"gfp_mask": m[2]}
            if m[3]:
                details["order"] = int(m[3])
            if m[4]:
                details["oom_score_adj"] = int(m[4])
            pid = None
            for _off, nxt in self._lines_after(text, end, 2):
                who = _OOM_PID.search(nxt)
                if who:
                    pid = int(who[1])
                    break
            self._emit(p, raw, line_no, "oom_invoked", pid=pid, process=m[1], details=details)
            return None
        if "oom-kill:" in msg:
            details = dict(_KV.findall(msg.split("oom-kill:", 1)[1]))
            details["global_oom"] = "global_oom" in msg
            pid = int(details["pid"]) if details.get("pid", "").isdigit() else None
            self.pending_constraint = self._emit(p, raw, line_no, "oom_constraint", pid=pid,
                                                 process=details.get("task"), details=details)
            return None
        m = _OOM_KILL.search(msg)
        if m:
            pid = int(m[1])
            details = {f"{k.replace('-', '_')}_kib": int(v) for k, v in _KIB.findall(m[3])}
            details["memcg"] = "cgroup" in msg
            pc = self.pending_constraint
            if pc is not None and pc.pid in (pid, None) and line_no - pc.line < 500:
                details["constraint"] = pc.details.get("constraint")
                details["global_oom"] = pc.details.get("global_oom")
                self.pending_constraint = None
            self._emit(p, raw, line_no, "oom_kill", pid=pid, process=m[2], details=details)
            return None
        reason = "tcp_mem" if "TCP: out of memory" in msg else "page_allocation_failure"
        self._emit(p, raw, line_no, "memory_pressure", details={"reason": reason})
        return None

    def _on_hung(self, p, msg, raw, text, start, end, line_no):
        m = _HUNG.search(msg)
        if not m:
            return None
        details: dict = {"blocked_s": int(m[3])}
        for _off, nxt in self._lines_after(text, end, 40):
            if "blocked for more than" in nxt:
                break
            state = _TASK_STATE.search(nxt)
            if state and "state" not in details:
                details["state"] = state[1]
            if "[nvidia]" in nxt:
                details["in_nvidia_driver"] = True
                break
        self._emit(p, raw, line_no, "hung_task", pid=int(m[2]), process=m[1], details=details)
        return None

    def _on_link(self, p, msg, raw, text, start, end, line_no):
        device = self._device(msg)
        m = _MODULE.search(msg)
        if m:
            event = m[2].strip()
            details = {"module": int(m[1]), "reason": event}
            if event.lower().startswith("cable unplugged"):
                kind = "ib_link_down"
            elif event.lower().startswith("cable plugged"):
                kind = "ib_link_up"
            else:
                kind = "ib_module_error"
            self._emit(p, raw, line_no, kind, pci_bus_id=device, details=details)
            return None
        if "PORT_ERR" in msg or "PORT_ACTIVE" in msg:
            kind = "ib_link_down" if "PORT_ERR" in msg else "ib_link_up"
            self._emit(p, raw, line_no, kind, pci_bus_id=device,
                       details={"reason": "PORT_ERR" if kind == "ib_link_down" else "PORT_ACTIVE"})
            return None
        m = _CARRIER.search(msg)
        up = m[2] == "Gained" if m else None
        if not m:
            m = _LINK.search(msg)
            if not m:
                return None
            up = m[2].lower() == "up"
        iface = m[1]
        details = {"iface": iface, "reason": m.group(0)}
        if p.ident:
            details["reporter"] = p.ident
        if _VIRTUAL_IFACE.match(iface):
            details["benign_reason"] = "virtual interface (container/bridge) carrier change"
            kind = "benign"
        else:
            layer = "ib" if _IB_IFACE.match(iface) else "eth"
            kind = f"{layer}_link_{'up' if up else 'down'}"
        self._emit(p, raw, line_no, kind, pci_bus_id=device, details=details)
        return None

    def _on_pcie(self, p, msg, raw, text, start, end, line_no):
        m = _PCIE.search(msg)
        if not m:
            return None
        details = {"available_gbps": float(m[1]), "speed_gts": float(m[2]), "width": int(m[3]),
                   "limited_at": normalize_pci(m[4]), "capable_gbps": float(m[5]),
                   "capable_speed_gts": float(m[6]), "capable_width": int(m[7])}
        self._emit(p, raw, line_no, "pcie_link_degraded", pci_bus_id=self._device(msg), details=details)
        return None

    def _on_segv(self, p, msg, raw, text, start, end, line_no):
        m = _SEGV.search(msg)
        if m:
            process, pid, library = m[1], int(m[2]), m[6]
            details = {"address": m[3], "ip": m[4], "error": int(m[5])}
        else:
            m = _GPF.search(msg)
            if not m:
                return None
            process, pid, library, details = m[1], int(m[2]), m[3], {"fault": "general protection"}
        details["library"] = library
        kind = "nccl_segfault" if library and library.startswith("libnccl") else "segfault"
        self._emit(p, raw, line_no, kind, pid=pid, process=process, details=details)
        return None

    def _on_peermem(self, p, msg, raw, text, start, end, line_no):
        self._emit(p, raw, line_no, "benign", details={
            "benign_reason": "nvidia-peermem message (the 'invalid context' error is known noise when "
                             "GPUDirect RDMA memory is freed; not a GPU or fabric fault)"})
        return None

    def _on_mce(self, p, msg, raw, text, start, end, line_no):
        details: dict = {}
        edac = _EDAC.search(msg)
        if edac:
            details.update(memory_controller=int(edac[1]), count=int(edac[2]),
                           severity="corrected" if edac[3] == "CE" else "uncorrected")
        last = end
        lines = [msg]
        if "[Hardware Error]" in msg:  # one report spans many lines: keep them in one event
            for off, nxt in self._lines_after(text, end, 30):
                if "[Hardware Error]" not in nxt:
                    break
                lines.append(nxt)
                last = off
        joined = " ".join(lines)
        sev = _MCE_SEVERITY.search(joined)
        if sev:
            details["severity"] = sev[1]
        elif "severity" not in details:
            details["severity"] = "uncorrected" if _MCE_UNCORRECTED.search(joined) else "unknown"
        self._emit(p, raw, line_no, "mce", details=details)
        return last

    def _on_panic(self, p, msg, raw, text, start, end, line_no):
        if "Kernel panic" in msg:
            kind = "kernel_panic"
        elif "soft lockup" in msg or "hard LOCKUP" in msg:
            kind = "soft_lockup"
        else:
            kind = "kernel_oops"
        self._emit(p, raw, line_no, kind, details={"message": msg.strip()})
        return None

    def _on_io(self, p, msg, raw, text, start, end, line_no):
        if "file-max limit" in msg:
            self._emit(p, raw, line_no, "resource_limit", details={"limit": "file-max"})
            return None
        dev = _IO_DEVICE.search(msg)
        details = {"device": next((g for g in dev.groups() if g), None)} if dev else {}
        self._emit(p, raw, line_no, "io_error", details=details)
        return None

    def _on_misc(self, p, msg, raw, text, start, end, line_no):
        if raw.startswith("-- "):
            header = journal_header(raw)
            if header:
                if self.year_source != "given":
                    self.year, self.year_source = header[0], "journal header"
                if header[1] in ("UTC", "GMT") and self.zone_assumed:
                    self.zone_assumed = False  # the journal printed its times in UTC
                elif self.zone_assumed:
                    self.zone_hint = header[1]
            elif raw.startswith(("-- Boot", "-- Reboot")):
                self.events.append(KernelEvent(line=line_no, time_utc=None, host=None, kind="boot",
                                               text=raw, details={"marker": raw.strip("- ")}))
            return None
        if "Linux version" in msg:
            version = _LINUX_VERSION.search(msg)
            self._emit(p, raw, line_no, "boot", details={"kernel_version": version[1] if version else None})
        elif "temperature above threshold" in msg:
            self._emit(p, raw, line_no, "cpu_thermal_throttle")
        elif "insufficient power" in msg:
            self._emit(p, raw, line_no, "pcie_slot_power", pci_bus_id=self._device(msg))
        return None


def _severity(kind: str, fatality: str | None) -> str:
    if kind.strip().lower().startswith("corrected"):
        return "corrected"
    return "fatal" if (fatality or "").strip().lower().rstrip(")") == "fatal" else "non_fatal"


#: ``dmesg -H`` (human): a minute stamp when the minute changes, else the delta to the previous line.
_DMESG_HUMAN = re.compile(r"^\[(?:[A-Z][a-z]{2}\s?\d{1,2} \d\d:\d\d|\s*\+\d+\.\d{6})\] ")


def looks_like(head: str) -> bool:
    """True when the head of a file reads as a kernel log (most lines carry a kernel-log prefix),
    whatever the file is called (``dmesg -H`` output pasted as ``notes`` reads as ``dmesg-H.txt``)."""
    lines = [line for line in head.splitlines()[:200] if line.strip()]
    if not lines:
        return False
    need, known = max(1, len(lines) // 2), 0
    for i, line in enumerate(lines):
        p = split_prefix(line)
        if (p.clock != "none" and (p.fmt != "iso" or p.ident)) or line.startswith(("NVRM: ", "nvidia-nvswitch")) \
                or line.startswith("[") and _DMESG_HUMAN.match(line):
            known += 1  # the latter: `dmesg -t | grep NVRM` output, kernel lines without a clock; dmesg -H
            if known >= need:
                return True  # decided: every file's head is asked, a kernel log's half suffices
        elif known + len(lines) - 1 - i < need:
            return False  # the lines left cannot make half
    return False


def parse(text: str, source: str = "<text>", *, tz: str | None = None, boot_time: str | None = None,
          year: int | None = None) -> ParseResult[KernelEvent]:
    """Read every kernel event of ``text``; never raises.

    ``tz``: zone of zone-less clocks (``dmesg -T``, syslog), default UTC (said in each event's
    ``details['time_assumption']``). ``boot_time``: ISO-8601 or epoch seconds of the boot, for raw
    ``dmesg``/kmsg/pstore clocks. ``year``: year of syslog timestamps (otherwise taken from a
    journal header, or the current year, said in ``details``).
    """
    result: ParseResult[KernelEvent] = ParseResult(KIND)
    if not text or text.isspace():
        result.problems.append(Problem(source, "empty file: no kernel log lines"))
        return result
    if looks_binary(text[:8192].encode("utf-8", "replace")):  # NUL bytes included
        result.problems.append(Problem(source, "binary data, not a kernel log"))
        return result
    scanner = _Scanner(source, tz, boot_time, year)
    scanner.feed(text)
    return _finish(scanner, result)


def parse_file(path: str | Path, *, tz: str | None = None, boot_time: str | None = None,
               year: int | None = None, cap_bytes: int = DEFAULT_READ_CAP_BYTES) -> ParseResult[KernelEvent]:
    """Like :func:`parse` but streams the file in chunks, so memory stays flat for huge logs.

    Multi-line context (hung-task stacks, AER detail lines) is read within a chunk of 32 MiB;
    a report split exactly at a chunk edge keeps its first line's facts.
    """
    source = str(path)
    result: ParseResult[KernelEvent] = ParseResult(KIND)
    try:
        handle = open(path, "rb")
    except OSError as exc:
        reason = "permission denied" if isinstance(exc, PermissionError) else (exc.strerror or str(exc))
        result.problems.append(Problem(source, f"cannot read: {reason}"))
        return result
    try:
        written_at = datetime.fromtimestamp(Path(path).stat().st_mtime, tz=timezone.utc)
    except OSError:
        written_at = None
    scanner = _Scanner(source, tz, boot_time, year, written_at)
    with handle:
        head = handle.peek(8192)[:8192]  # not consumed: the chunks below start at byte 0
        if not head:
            result.problems.append(Problem(source, "empty file: no kernel log lines"))
            return result
        if looks_binary(head):
            result.problems.append(Problem(source, "binary data, not a kernel log"))
            return result
        line_no = 1
        for offset, buf, limit in line_chunks(handle, _CHUNK_BYTES):
            # the anchors are found in the bytes; only a chunk that holds one is decoded
            starts = _ANCHOR_LINES.line_starts(buf, limit)
            if starts or not scanner.recognised:
                text = buf[:limit].decode("utf-8", errors="replace")
                scanner.feed(text, line_no, starts if len(text) == limit else None)  # ASCII: same offsets
            elif scanner.human_seen:  # a quiet chunk still carries dmesg -H deltas
                scanner.human_pos = 0
                scanner.follow_human_stamps(buf[:limit].decode("utf-8", errors="replace"), limit)
            line_no += buf.count(b"\n", 0, limit)
            if offset + limit >= cap_bytes:
                result.problems.append(Problem(source, f"larger than {cap_bytes} bytes: only the first part was read"))
                break
    return _finish(scanner, result)


def _finish(scanner: _Scanner, result: ParseResult[KernelEvent]) -> ParseResult[KernelEvent]:
    result.records = scanner.events
    result.problems.extend(scanner.problems)
    if not scanner.recognised and not scanner.events:
        result.problems.append(Problem(
            scanner.source, "no kernel log lines recognised (expected dmesg, dmesg -T/--time-format=iso, "
                            "journalctl, syslog or /dev/kmsg format)"))
    return result


__all__ = ["INFO_KINDS", "KIND", "KernelEvent", "looks_like", "parse", "parse_file"]
