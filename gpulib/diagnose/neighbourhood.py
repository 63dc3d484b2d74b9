"""The culprit's names from the root cause's neighbourhood: its own line, its file, its folder.

The rules place a finding from the line they read (an NCCL prefix, an Xid's PCI id, the identity
map's joins). Often the culprit's other names are printed nearby, not on that line: the rank in the
watchdog line under the traceback (``[Rank 1] NCCL watchdog thread terminated``), the GPU in the
Xid's own text (``RPC response from GPU3 GSP``), the GPU under the failing PCIe root port (``nvidia
0000:03:00.0: AER: can't recover``), the node in the shell prompt of the pasted session
(``root@node-7:~#``). Once the root cause is chosen, every name it lacks is looked for here, nearest
first, and taken only when the place names exactly one value (two ranks in a file name neither).
Each name taken says where it came from (``identified_by`` in the root cause's JSON), so an
operator can check it before draining a node on its word.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gpulib.diagnose.bisected_gpu import bisected_gpu
from gpulib.diagnose.context import Context, place
from gpulib.diagnose.stated_hosts import ray_task_host, session_host, srun_host_of_rank, stated_host
from gpulib.evidence.gather import GUESSED_FROM_FOLDER, InputFile
from gpulib.findings import Finding
from gpulib.identity import normalize_pci
from gpulib.parsers.kernel_prefix import MARKDOWN_QUOTE
from gpulib.parsers.logtime import seconds_between, stamp_in, zone_of
from gpulib.vocabulary import GPU_CATEGORIES

#: Files larger than this are not re-read for names (a job console's names come from its parser).
MAX_BYTES = 1 << 20
#: More files than this beside the root cause's: the folder holds many nodes, not one node's evidence.
MAX_NEIGHBOURS = 32

#: A rank by name, or by its launcher's number for it: torch.multiprocessing.spawn's process index
#: (``process 3 terminated with signal SIGKILL``, ``-- Process 0 terminated with the following error:``
#: above the traceback it raised) and srun's task id (``srun: error: NODE: task 13: ...``).
_RANK = re.compile(r"\[Rank (?P<a>\d+)\]|\[rank(?P<b>\d+)\]|\bGLOBAL_RANK:? ?(?P<c>\d+)\b|\brank[ =](?P<d>\d+)\b"
                   r"|\b[Pp]rocess (?P<e>\d+) terminated with (?:signal|exit code|the following error)\b"
                   r"|\bsrun: error: [\w.-]+: task (?P<f>\d+): ")
#: srun --label prefixes (``10: ``), also when a paste joined the lines: a value repeated several times.
_SRUN_LABEL = re.compile(r"(?:^|(?<=\s))(?P<n>\d{1,5}): (?=\S)", re.M)
_SRUN_LABELS_NEEDED = 3
#: A GPU by its index: ``GPU3``, ``cuda:3``, ``CUDA_VISIBLE_DEVICES=3``, and the CUDA ordinal a framework's
#: context-creation error names (TensorFlow's ``failed initializing StreamExecutor for CUDA device ordinal 3``).
_GPU_INDEX = re.compile(r"\bGPU ?(?P<a>\d{1,2})\b(?![:.]\w)|\bcuda:(?P<b>\d{1,2})\b"
                        r"|\bCUDA_VISIBLE_DEVICES=(?P<c>\d{1,2})(?![,\d])|\bCUDA device ordinal (?P<d>\d{1,2})\b")
#: A GPU's PCI id where the GPU's own driver, or an Xid, prints it (a root port's or a NIC's id is not a GPU's).
_GPU_PCI = re.compile(r"(?:\bnvidia |NVRM: GPU (?:at )?|\bXid \(|\bXID \d+.*?detected on |PCI:)(?:PCI:)?"
                      r"(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
#: ``lspci``'s line of an NVIDIA GPU (``4c:00.0 3D controller: NVIDIA Corporation ...``).
_LSPCI = re.compile(r"^(?P<pci>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (?:3D|VGA compatible|Display) "
                    r"controller: NVIDIA", re.M)
_FENCE = re.compile(r"^\s*(?:```|~~~)")


def _one(values: list) -> object | None:
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _ranks(text: str) -> int | None:
    rank = _one([int(next(g for g in m.groups() if g is not None)) for m in _RANK.finditer(text)])
    if rank is not None:
        return rank
    labels = [int(m["n"]) for m in _SRUN_LABEL.finditer(text)]
    return _one(labels) if len(labels) >= _SRUN_LABELS_NEEDED else None


def _gpu_index(text: str) -> int | None:
    named = [int(next(g for g in m.groups() if g is not None)) for m in _GPU_INDEX.finditer(text)]
    return _one(named) if named else _inventory_index(text)


def _gpu_pci(text: str) -> str | None:
    named = [normalize_pci(m["pci"]) for m in _GPU_PCI.finditer(text)]
    return _one(named) if named else _inventory_pci(text)


#: name -> (reader of a text, whether it names a GPU only for GPU causes)
READERS: dict[str, tuple[Callable[[str], object | None], bool]] = {
    "rank": (_ranks, False), "gpu_index": (_gpu_index, True), "gpu_pci": (_gpu_pci, True), "host": (stated_host, False)}


def _inventory_pci(text: str) -> str | None:
    """The one GPU an inventory of the node (``lspci``) lists: a node with one GPU has no other."""
    return _one([normalize_pci(m["pci"]) for m in _LSPCI.finditer(text)] or [None])


#: A device count a CUDA tool prints for the machine (numba's ``cuda.detect()``: ``Found 1 CUDA devices``; the
#: CUDA samples' deviceQuery: ``Detected 1 CUDA Capable device(s)``) and its line for each device (``id 0  b'NVIDIA
#: ...'``, ``Device 0: "NVIDIA ..."``).
_DEVICE_COUNT = re.compile(r"^\s*(?:Found (?P<a>\d+) CUDA devices|Detected (?P<b>\d+) CUDA Capable device\(s\))\s*$", re.M)
_DEVICE_ROW = re.compile(r"^\s*(?:id (?P<a>\d{1,2}) +b?['\"]|Device (?P<b>\d{1,2}): \")", re.M)
#: The cause's own lines are an error of a CUDA call (not a Python error that merely ran beside CUDA).
_CUDA_CALL_ERROR = re.compile(r"\bCUDA_ERROR_[A-Z_]+|\bCUDA error\b|\bcudaError\w+")


def _inventory_index(text: str) -> int | None:
    """The index of the one GPU a CUDA tool counts on the machine (``Found 1 CUDA devices`` / ``id 0``):
    a machine with one GPU has no other for a CUDA error to be on."""
    counts = {int(m["a"] or m["b"]) for m in _DEVICE_COUNT.finditer(text)}
    if counts != {1}:
        return None
    return _one([int(m["a"] or m["b"]) for m in _DEVICE_ROW.finditer(text)] or [None])


#: Names a file beside the root cause's may give: they belong to the node, not to one process.
NODE_WIDE: dict[str, Callable[[str], object | None]] = {"host": stated_host, "gpu_pci": _inventory_pci,
                                                         "gpu_index": _inventory_index}


def fill(ctx: Context, root: Finding) -> None:
    """Give ``root`` the names it lacks from its lines, their files and the files beside them. A cause
    shared by several nodes (``extra["hosts"]``: nodes lost together) has no single host, rank or GPU to
    find: a name its lines carry is one of the nodes it struck."""
    if root.host is None and root.extra.get("hosts"):
        return
    # a GPU is looked for when the cause is a GPU's; for another cause only when its own lines are a
    # CUDA call's error on a machine whose inventory counts one GPU (a display watchdog's launch timeout)
    cuda_call = root.category not in GPU_CATEGORIES and any(_CUDA_CALL_ERROR.search(e.text) for e in root.quotes)
    files = {f.display: f for f in ctx.inputs.files}
    own = {e.file: files[e.file] for e in root.quotes if e.file in files}
    # a host guessed from a host-like folder name is read again: a node the lines state wins over it
    guessed = root.host is not None and any(f.host == root.host and f.host_basis == GUESSED_FROM_FOLDER
                                            for f in own.values())
    missing = [name for name in READERS if (getattr(root, name) is None or (name == "host" and guessed))
               and (root.category in GPU_CATEGORIES or not READERS[name][1] or (cuda_call and name == "gpu_index"))]
    if not missing or not root.quotes:
        return
    # its own lines read together: two ranks in them (the two sides of a desync) name neither
    where = ", ".join(f"{e.file}:{e.line}" for e in root.quotes)
    places: list[tuple[str, str, bool | str]] = [(where, "\n".join(e.text for e in root.quotes), True)]
    texts = {name: _text(f) for name, f in own.items()}
    places += [(f"{e.file}:{e.line} (its table column)", _table_column(texts.get(e.file, ""), e.line), True)
               for e in root.quotes if e.line and e.text.lstrip().startswith("|")]
    for name, text in texts.items():  # the lines around the root cause's, at its time: not the whole file's past
        near = _near(text, [e.line for e in root.quotes if e.file == name and e.line], root.time, ctx)
        places.append((f"{name} (lines near it)", near, True))
        places.append((name, text, "host"))  # the node a file names holds all of it
    folders = {f.path.parent for f in own.values()}
    beside = [f for f in ctx.inputs.files if f.path.parent in folders and f.display not in own]
    if len(beside) <= MAX_NEIGHBOURS:  # a folder of a thousand nodes' files is not one node's neighbourhood
        places += [(f.display, _text(f), False) for f in beside]
    found: dict[str, object] = {}
    sources = root.extra.setdefault("identified_by", {})
    waited = _waiters(ctx)
    for name in missing:
        read, gpu_only = READERS[name]
        if gpu_only and root.category not in GPU_CATEGORIES:
            read = NODE_WIDE[name]  # only the machine's one GPU: a GPU merely named near it is not the cause's
        if name == "host":
            said = _host_of_lines(root, texts, found.get("rank", root.rank))
            if said and read(places[0][1]) is None:  # the cause's own lines name no host: the session's does
                found[name], sources[name] = said
                continue
        for where, text, mine in places:
            if mine == "host" and name != "host":
                continue  # a rank or GPU named hours before the fault in the same log is not its
            if not mine and name not in NODE_WIDE:
                continue  # a neighbour file names the node; its ranks and GPUs may be another process's
            if not mine and name == "host" and guessed:
                continue  # over a folder's guess only the cause's own file speaks; a neighbour may name a peer
            value = (NODE_WIDE[name] if not mine else read)(text) if text else None
            if name == "rank" and value in waited:
                break  # the rank beside the cause is one that waited for the culprit: not the culprit's
            if value is not None:
                found[name] = value
                sources[name] = where
                break
    if "gpu_index" in missing and "gpu_index" not in found and root.category in GPU_CATEGORIES:
        for name, text in texts.items():  # the session that narrowed the fault down to one GPU
            value = bisected_gpu(text)
            if value is not None:
                found["gpu_index"], sources["gpu_index"] = value, f"{name} (the GPU its failing test runs added)"
                break
    if not found:
        if not sources:
            root.extra.pop("identified_by", None)
        return
    for name, value in found.items():
        setattr(root, name, value)
    place(ctx, root, host=root.host, rank=root.rank, pci=root.gpu_pci)


def _host_of_lines(root: Finding, texts: dict[str, str], rank: int | None) -> tuple[str, str] | None:
    """(host, where) from how the cause's lines were printed: the command of the pasted session that
    printed them (a prompt, or ``ssh node cmd``), the Ray worker that raised them, else srun's line for
    the cause's rank as a task.
    Each names the node of *these* lines where the whole file may name several (a login node and two
    compute nodes; srun's verdict on every node of the job)."""
    for e in root.quotes:
        said = session_host(texts.get(e.file, ""), e.line) if e.line else None
        if said:
            return said[0], f"{e.file}:{said[1]} (the command that printed {e.file}:{e.line})"
        said = ray_task_host(texts.get(e.file, ""), e.line) if e.line else None
        if said:
            return said[0], f"{e.file}:{said[1]} (the Ray worker that raised {e.file}:{e.line})"
    if rank is not None:
        for name, text in texts.items():
            host = srun_host_of_rank(text, rank)
            if host:
                return host, f"{name} (srun's line for task {rank})"
    return None


def _waiters(ctx: Context) -> set[int]:
    """Ranks that a time-out shows waiting while the others never arrived: a rank named next to the
    cause (the watchdog line under a data-preparation bar in one console) that waited is not the
    rank the cause is on."""
    out: set[int] = set()
    for f in ctx.findings:
        absent = set(f.extra.get("never_arrived") or ())
        if f.role == "symptom" and absent and f.rank is not None and f.rank not in absent:
            out.add(f.rank)
    return out


_CELL_WORDS = re.compile(r"[A-Za-z]{3,}")
_UNITS = re.compile(r"°C|MHz|GHz|MiB|GiB|\b[WCs]\b|%")


def _table_column(text: str, line: int) -> str:
    """In a pasted table (markdown ``| a | b |``) whose columns are GPUs (``| GPU0 | GPU1 |``), the GPU
    whose cell on ``line`` *says* something (``**thermal slowdown active**``) where the others hold
    readings (``87 °C``): returned as ``GPU n`` for the GPU reader, or "" when not exactly one."""
    lines = text.splitlines()
    if not 0 < line <= len(lines):
        return ""
    row = _cells(lines[line - 1])
    header = next((_cells(lines[k]) for k in range(line - 2, -1, -1)
                   if lines[k].lstrip().startswith("|") and not set(lines[k]) <= set("|-: ")
                   and (k == 0 or not lines[k - 1].lstrip().startswith("|"))), [])
    if len(header) != len(row):
        return ""
    said = [m[0] for head, cell in zip(header, row, strict=True) if (m := _GPU_INDEX.search(head))
            and _CELL_WORDS.search(_UNITS.sub("", cell))]
    return said[0] if len(said) == 1 else ""


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


#: Lines this far from the root cause's, or stamped this far from its time, are another event's.
NEAR_LINES = 20
NEAR_S = 60


def _near(text: str, lines: list[int], when: str | None, ctx: Context) -> str:
    """The lines of ``text`` within NEAR_LINES of ``lines`` whose own stamp (if any) is within NEAR_S of
    ``when``: a GPU named by an Xid half an hour before a hang is not the hang's GPU."""
    rows = text.splitlines()
    keep = sorted({k for n in lines for k in range(max(1, n - NEAR_LINES), min(len(rows), n + NEAR_LINES) + 1)})
    zone = zone_of(ctx.tz)
    out = []
    for k in keep:
        stamp = stamp_in(rows[k - 1], year=int(when[:4]), tz=zone) if when else None
        if stamp is None or abs(seconds_between(stamp, when)) <= NEAR_S:
            out.append(rows[k - 1])
    return "\n".join(out)


def _text(f: InputFile) -> str:
    text = f.text(MAX_BYTES)
    return "" if text is None else _unquoted(text)


def _unquoted(text: str) -> str:
    """The text without a paste's markdown quote and code fences, line for line (quotes keep their line
    numbers): a quoted NCCL line names its host as the bare one does. Prompts stay: they name the host."""
    if ">" not in text and "```" not in text and "~~~" not in text:
        return text
    return "\n".join("" if _FENCE.match(line) else MARKDOWN_QUOTE.sub("", line, count=1)
                     if line.lstrip().startswith(">") else line for line in text.splitlines())
