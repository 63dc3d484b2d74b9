"""Slurm accounting: ``sacct`` output, as ``--parsable2`` (``|``-separated) or the default table.

Why it matters: ``scontrol show job`` forgets a job minutes after it ended (``MinJobAge``);
the accounting database keeps it, with one row per *step*. The step rows say what the job
record cannot: which ``srun`` step failed, with which exit code, on which nodes
(``4242.0  python  NODE_FAIL  0:0  gpu-[01-04]``), and that the batch step was still running
when a node died. ``State`` may read ``CANCELLED by 1000`` (who cancelled); the default table
cuts long values to the column width and marks the cut with ``+`` (``OUT_OF_ME+``), which
:func:`~gpulib.parsers.slurm_job.normalise_state` undoes for states. Without ``--format``
the table has no NodeList: ``sacct -j ID --parsable2 --format=JobID,JobName,State,ExitCode,
NodeList,Start,End,Elapsed`` is what ``gpulib collect --slurm-job`` records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.logtime import stamp_in, zone_of
from gpulib.parsers.slurm import expand_nodelist
from gpulib.parsers.slurm_job import duration_s, normalise_state, split_exit

KIND = "sacct"

_PIPE_HEADER = re.compile(r"^JobID(?:Raw)?\|(?:[\w]+\|?)+$")
_DASHES = re.compile(r"^-+(?: +-+)+ *$")
_TABLE_HEADER = re.compile(r"^\s*JobID(?:Raw)?\s+\w+")
_JOB_ID = re.compile(r"^(?P<job>\d+(?:[_+][\w\[\]-]+)?)(?:\.(?P<step>[\w-]+))?$")
_NULLS = ("", "Unknown", "None", "(null)")


@dataclass
class SacctRow:
    """One job or step row. ``step`` is None for the job's own row, else ``batch``, ``extern``,
    ``interactive`` or the srun step number. ``state_truncated``: the table cut the state."""

    job_id: str
    step: str | None = None
    job_name: str | None = None
    state: str | None = None
    state_truncated: bool = False
    cancelled_by: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    node_list: str | None = None
    nodes: list[str] = field(default_factory=list)
    partition: str | None = None
    alloc_cpus: int | None = None
    start_utc: str | None = None
    end_utc: str | None = None
    elapsed_s: float | None = None
    fields: dict[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def is_job(self) -> bool:
        return self.step is None


def looks_like(head: str) -> bool:
    lines = [line.rstrip("\n") for line in head.splitlines()[:6]]
    if any(_PIPE_HEADER.match(line.strip()) and "State" in line.split("|") for line in lines):
        return True
    return any(_TABLE_HEADER.match(a) and "State" in a.split() and _DASHES.match(b)
               for a, b in zip(lines, lines[1:], strict=False))


def _columns(dash_line: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"-+", dash_line)]


def _split_table(header: str, dashes: str, line: str) -> dict[str, str]:
    starts = [a for a, _ in _columns(dashes)]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return {header[a:b].strip(): line[a:b].strip() for a, b in bounds}


def _row(values: dict[str, str], number: int, zone, source: str, result: ParseResult) -> None:
    raw_id = values.get("JobID") or values.get("JobIDRaw") or ""
    m = _JOB_ID.match(raw_id.rstrip("+"))
    if not m:
        result.problems.append(Problem(source, f"not a job id: {raw_id!r}", number))
        return
    state_text = values.get("State", "")
    state, cut = normalise_state(state_text)
    by = re.search(r"\bby (\S+)", state_text)
    code, signal = split_exit(values.get("ExitCode"))
    node_list = values.get("NodeList") or None
    if node_list in _NULLS or node_list == "None assigned":
        node_list = None

    def when(key: str) -> str | None:
        text = values.get(key) or ""
        return stamp_in(text, year=None, tz=zone) if text not in _NULLS else None

    try:
        cpus = int(values["AllocCPUS"]) if values.get("AllocCPUS", "").isdigit() else None
    except ValueError:
        cpus = None
    result.records.append(SacctRow(
        job_id=m["job"], step=m["step"], job_name=values.get("JobName") or None, state=state, state_truncated=cut,
        cancelled_by=by.group(1) if by else None, exit_code=code, exit_signal=signal, node_list=node_list,
        nodes=expand_nodelist(node_list.rstrip("+")) if node_list else [], partition=values.get("Partition") or None,
        alloc_cpus=cpus, start_utc=when("Start"), end_utc=when("End"), elapsed_s=duration_s(values.get("Elapsed")),
        fields=values, line=number))


def parse(text: str, source: str = "<text>", *, tz: str | None = None, **_opts) -> ParseResult[SacctRow]:
    """Rows of one or more ``sacct`` outputs (``-P``/``--parsable2``, ``-p``, or the default table).
    A row that cannot be read is a problem naming its line; the others are still returned."""
    result: ParseResult[SacctRow] = ParseResult(KIND)
    zone = zone_of(tz)
    lines = text.splitlines()
    header: list[str] | None = None  # pipe layout
    table: tuple[str, str] | None = None  # (header, dashes) of the table layout
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if _PIPE_HEADER.match(stripped):
            header, table = stripped.rstrip("|").split("|"), None
            continue
        if _DASHES.match(line) and number >= 2 and _TABLE_HEADER.match(lines[number - 2]):
            table, header = (lines[number - 2], line), None
            continue
        if _TABLE_HEADER.match(line) and number < len(lines) and _DASHES.match(lines[number]):
            continue  # the header above a dash line: read with it
        if header is not None and "|" in line:
            cells = line.rstrip("\n").split("|")
            if len(cells) == len(header) + 1 and cells[-1] == "":  # --parsable ends rows with '|'
                cells = cells[:-1]
            if len(cells) != len(header):
                result.problems.append(Problem(source, f"{len(cells)} fields where the header has {len(header)}",
                                               number))
                continue
            _row(dict(zip(header, (c.strip() for c in cells), strict=True)), number, zone, source, result)
        elif table is not None:
            _row(_split_table(*table, line), number, zone, source, result)
        else:
            result.problems.append(Problem(source, "row before any sacct header (use sacct without --noheader): "
                                                   f"{line[:80]!r}", number))
    if not result.records and not result.problems and text.strip():
        result.problems.append(Problem(source, "sacct header without rows: no job in the accounting window"))
    return result
