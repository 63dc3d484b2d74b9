"""Who printed a line, and when: identity and time from any launcher, logger or shell prefix.

A line of evidence reaches the on-call engineer wrapped in whatever captured it. The same NCCL
warning can arrive as::

    > [1,12]<stdout>:node7:1793:1842 [0] transport/net_ib.cc:80 NCCL WARN ...    (markdown quote, mpirun)
    2026-03-10T04:11:02.118Z: [1,12]<stdout>:...                                  (mpirun --timestamp-output)
    node7: [rank12]:[E0310 04:11:02.118 ProcessGroupNCCL.cpp:616] ...              (pdsh, torchrun, c10 glog)
    [default4]:...  /  12: ...  /  Mar 10 04:11:02 node7 kernel: ...               (torchrun --tee, srun --label, syslog)

:class:`LineReader` peels these layers off one line at a time and keeps what each said: the host
(pdsh/clush/DeepSpeed prefix, a Ray worker's ``(Actor pid=N, ip=A)``, NCCL ``host:pid:tid``,
syslog/journal host field, the shell prompt of a pasted session), the rank (mpirun ``[1,N]``,
srun ``N:``, torchrun ``[rankN]:``, in-text ``[Rank N]``), the local rank (torchrun
``[defaultN]:``, ``--local_rank=N``), the CUDA device and the time (ISO with or without zone,
c10/glog with the year taken from the file, ``dmesg -T``, syslog). Colour escapes a terminal
capture kept are dropped first. A line without a stamp gets no time: it keeps its place in its file, and never borrows
a stamp that could put an effect before its cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, tzinfo

from gpulib.identity import normalize_pci, to_utc_iso
from gpulib.parsers.kernel_prefix import MARKDOWN_QUOTE, split_prefix
from gpulib.parsers.logtime import stamp_in
from gpulib.parsers.training_log import strip_prefixes

#: ``root@node1:~# cmd``, ``user@node1:/data$ cmd``, ``[root@node1 ~]# cmd``, ``(env) user@host:~$ cmd``,
#: ``[user@node1:~]$ cmd`` (NixOS), ``user@node1 ~ % cmd`` (zsh's default, macOS)
PROMPT = re.compile(r"^(?:\([\w.-]+\) )?(?:(?:\[[\w.-]+@(?P<h1>[\w.-]+)[ :][^\]]*\]|[\w.-]+@(?P<h2>[\w.-]+)"
                    r":[^\s$#]*)\s?[#$]|[\w.-]+@(?P<h3>[\w.-]+) (?![\d.]+ )[^\s%#$]+ %)(?: |$)")
#: ``2019-06-02T16:13:44.884Z: ``, ``[2023-11-13 16:59:54,760] ``, ``2026-09-18 19:29:24 `` before a launcher prefix.
_OUTER_STAMP = re.compile(r"^\[?(?P<stamp>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\]?:? ")
#: ``grep -r`` / ``grep -H`` output: ``path/to/node3.log:1234:`` before the line it found.
_GREP_FILE = re.compile(r"^(?P<path>[\w./-]+\.(?:log|txt|out|err))(?::\d+)?:(?=\S)")
#: What a ``grep -H`` prefix ends with (its file's extension, then ':'): looked for before _GREP_FILE.
_GREP_TAIL = re.compile(r"\.(?:log|txt|out|err):")
#: Colour and cursor escapes (``ESC[36m``) a terminal capture keeps around launcher prefixes.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_DEFAULT = re.compile(r"^\[default(?P<lrank>\d+)\]:\s?")
_NCCL_ID = re.compile(r"^(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
_RANK_TEXT = re.compile(r"\[(?:PG [^\]]*?)?Rank (?P<r1>\d+)\]|\brank[ =:](?P<r2>\d+)\b|\bfrom rank (?P<r3>\d+)\b")
_LOCAL_RANK = re.compile(r"--local[_-]rank[= ](?P<lr>\d+)|\blocal_rank[:=] ?(?P<lr2>\d+)")
_GPU_TEXT = re.compile(r"\bGPU ?(?P<gpu>\d{1,2})\b(?! ?has a total)|\bcuda:(?P<cuda>\d{1,2})\b")
#: The end every PCI id has, as a pattern that starts with a literal (fast): tested before _PCI_TEXT,
#: which tries every position of a line.
_PCI_TAIL = re.compile(r":[0-9a-fA-F]{2}\.\d")
_PCI_TEXT = re.compile(r"\b(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)\b")


@dataclass
class LineFacts:
    """What one line said about itself once its wrapping is peeled off."""

    message: str
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    pid: int | None = None
    device: int | None = None  # CUDA device of the process (NCCL ``[dev]``), or a GPU index in the text
    pci: str | None = None
    time_utc: str | None = None
    command: bool = False  # a shell prompt line: what the user typed, never evidence of a fault


def names_a_port(text: str, pci: str | None) -> bool:
    """Whether ``text`` is a PCIe port's own line about ``pci`` (``pcieport 0000:00:02.0: AER: ...``):
    the kernel's port driver names a root or switch port there, never a GPU."""
    if not pci or "pcieport " not in text:
        return False
    short = pci.lower()[5:] if len(pci) > 7 and pci[4] == ":" else pci.lower()
    return re.search(r"\bpcieport (?:[0-9a-f]{4}:)?" + re.escape(short) + r"\b", text, re.I) is not None


class LineReader:
    """Reads the lines of one file in order; remembers the host of a pasted shell session."""

    def __init__(self, *, tz: tzinfo, year: int | None = None, glog_year: int | None = None) -> None:
        self.tz = tz
        self.year = year
        #: completes glog stamps (``E0905 17:34:36.549117``) when no date in the file gives a year: the
        #: year the file was written (a syslog stamp keeps needing a year the evidence gives)
        self.glog_year = glog_year
        self.session_host: str | None = None

    def read(self, raw: str) -> LineFacts:
        line = raw.rstrip("\r\n")
        if "\x1b" in line:  # a terminal capture keeps colours: Ray and DeepSpeed colour their prefixes
            line = _ANSI.sub("", line)
        if "\r" in line:  # a progress bar redrawn on one line: the last segment was printed last
            segments = [s for s in line.split("\r") if s.strip()]
            line = segments[-1] if segments else ""
        line = MARKDOWN_QUOTE.sub("", line, count=1) if line.lstrip().startswith(">") else line
        m = PROMPT.match(line) if "@" in line else None  # every prompt names user@host
        if m:
            self.session_host = m["h1"] or m["h2"] or m["h3"]
            return LineFacts(line[m.end():], host=self.session_host, command=True)
        facts = LineFacts("")
        stamp, body = None, line
        for _ in range(6):  # layers in any order: pdsh, then mpirun's stamp, then its [1,N] tag, ...
            before = body
            # each layer is tried only where its first characters are (a console has 100,000s of lines)
            m = _GREP_FILE.match(body) if _GREP_TAIL.search(body) else None
            if m:
                body = body[m.end():]
            first = body[:1]
            m = _OUTER_STAMP.match(body) if first == "[" or first.isdigit() else None
            if m:
                stamp, body = stamp or m["stamp"], body[m.end():]
            body, hints = strip_prefixes(body)
            stamp = stamp or hints.get("stamp")  # mpirun --timestamp-output, split off with its tag
            if facts.rank is None:
                facts.rank = hints.get("rank", hints.get("task"))
            facts.host = facts.host or hints.get("prefix_host") or hints.get("ray_ip")
            m = _DEFAULT.match(body) if body.startswith("[default") else None
            if m:
                facts.local_rank, body = int(m["lrank"]), body[m.end():]
            if body == before:
                break
        prefix = split_prefix(body)
        if prefix.clock != "none" or prefix.host:
            body = prefix.message
            facts.host = prefix.host or facts.host
            facts.time_utc = self._kernel_time(prefix)
        m = _NCCL_ID.match(body)
        if m:
            facts.host, facts.pid, facts.device = m["host"], int(m["pid"]), int(m["dev"])
        facts.message = body
        facts.time_utc = facts.time_utc or stamp_in(stamp or body, year=self.year or self.glog_year, tz=self.tz)
        # each pattern runs only where the words it needs are (a regex pass costs ~5 us a line)
        if facts.rank is None and "ank" in body:
            m = _RANK_TEXT.search(body)
            if m:
                facts.rank = int(m["r1"] or m["r2"] or m["r3"])
        if facts.local_rank is None and "local" in body:
            m = _LOCAL_RANK.search(body)
            if m:
                facts.local_rank = int(m["lr"] or m["lr2"])
        if facts.device is None and ("GPU" in body or "cuda:" in body):
            m = _GPU_TEXT.search(body)
            if m:
                facts.device = int(m["gpu"] or m["cuda"])
        m = _PCI_TEXT.search(body) if _PCI_TAIL.search(body) else None
        if m and not names_a_port(body, m["pci"]):
            facts.pci = normalize_pci(m["pci"])
        facts.host = facts.host or self.session_host
        return facts

    def _kernel_time(self, prefix) -> str | None:
        if prefix.clock == "wall" and prefix.wall is not None:
            return to_utc_iso(prefix.wall)
        if prefix.clock == "local" and prefix.wall is not None:
            return to_utc_iso(prefix.wall.replace(tzinfo=self.tz))
        if prefix.clock == "syslog" and self.year:
            try:
                when = datetime(self.year, prefix.month, prefix.day, *prefix.hms, tzinfo=self.tz)
            except ValueError:
                return None
            return to_utc_iso(when)
        return None


__all__ = ["PROMPT", "LineFacts", "LineReader"]
