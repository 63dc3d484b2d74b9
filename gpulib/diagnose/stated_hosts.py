"""Every common way a log states the node it ran on, read as one host per place.

The on-call engineer drains a *node*; the line that names the fault rarely says which. The log
around it usually does, in one of a few shapes, each printed by a tool or a job script:

* a shell prompt (``user@node-7:~$``, ``[user@node-7 dir]$``), and, in a pasted session, the
  command that printed a block: ``ssh node-7 nvidia-smi`` ran on node-7, not on the login node
  whose prompt typed it (:func:`session_host`);
* an echoed variable or job-script banner line (``SLURMD_NODENAME=node-7``, ``Running on host
  node-7``, ``Hostname: node-7``) and ``hostname``'s own output after the command (``+ hostname``);
* a framework's start banner, a list of ``key: value`` fields one of which names the machine
  (mmengine/mmcv ``Start running, host: user@node-7, work_dir: ...``, ``hostname: node-7``,
  ``Hostname = node-7``, ``node: node-7``): the value, without the user before its ``@``; a value
  that is an address, ``localhost`` or a URL names no node of the job (:data:`_BANNER_FIELD`); and
  the same field of a structured log export (Loki's or a log shipper's JSON labels: ``"host": "node-7"``);
* a batch job's banner (``== job 2369 started on node-7 at ...``, ``=== job 4471902 on node-7
  (partition ...) ===``, ``Job 88 is running on node node-7``) and PBS/Torque's ``exec_host =
  node-7/0+node-7/1``; a command that reports on one node (``kubectl describe node node-7``,
  ``scontrol show node node-7``, ``pbsnodes node-7``); a log's own ``host=node-7`` field;
* Kubernetes' Scheduled event (``Successfully assigned ns/pod to node-7``);
* a PMIx / Open MPI message prefix (``[node-7:2214763] PMIX ERROR: ...``) and NCCL's
  ``node-7:pid:tid [dev]`` prefix;
* srun's verdict on a node's tasks (``srun: error: node-7: task 13: Exited``); when the rank is
  known, the node whose task list holds it (:func:`srun_host_of_rank`);
* a table row the writer marked with an arrow (``node-12   11760  <--``);
* Ray's word for the worker that raised an error, given as an IP: the ``ray::Actor.method() (pid=N,
  ip=10.1.2.3, ...)`` header of a RayTaskError and the ``(Actor pid=N, ip=10.1.2.3)`` prefix of a
  worker's forwarded line (:func:`ray_task_host`);
* last, the writer's own sentence about one of the nodes the log's scheduler table lists (``squeue``'s
  or ``sinfo``'s NODELIST column): "node-7 has been up for weeks and now new jobs cannot get a GPU"
  (:func:`prose_named_node`). The table alone lists every busy node; the sentence says which one.

Words in those places that are not hosts (``Running on cpu``, ``job 5 on node 2 of 4``, ``on the
GPU``, ``[trainer.py:1018]``, ``localhost``) are refused: a host name starts with a letter, is not
one of :data:`NOT_HOSTS` and does not end like a source file.
"""

from __future__ import annotations

import re

from gpulib.parsers.line_identity import PROMPT

_NAME = r"[A-Za-z][\w-]*(?:\.[\w-]+)*"
#: Words that stand where a banner puts its node but name no node.
NOT_HOSTS = frozenset({"cpu", "cpus", "gpu", "gpus", "cuda", "device", "devices", "node", "nodes", "host", "hosts",
                       "localhost", "the", "a", "an", "all", "this", "each", "every", "rank", "ranks", "worker",
                       "workers", "mps", "xla", "tpu", "cluster", "partition", "queue", "none", "null", "unknown"})
#: How a source file's name ends (``[trainer.py:1018]`` is a logger's place, not ``[host:pid]``).
_SOURCE_FILE = re.compile(r"\.(?:py|pyx|cpp|cc|cxx|c|h|hpp|cu|cuh|rs|go|java|js|ts|f90|fpp|f|sh|rb|lua|scala)$", re.I)

_ECHO = re.compile(r"^\s*(?:SLURMD_NODENAME|SLURM_NODELIST|SLURM_JOB_NODELIST|NodeList|HOSTNAME|Running on(?: host| node)?"
                   rf"|Hostname|Node ?name)\s*[:=]?\s*(?P<host>{_NAME})\s*$", re.M)
#: ``hostname`` typed (``$ hostname``, bash -x's ``+ hostname``) and its answer on the next line.
_HOSTNAME_OUTPUT = re.compile(rf"^\s*(?:[$#+] |\S+[$#] )hostname(?: -[sf])?\s*\n\s*(?P<host>{_NAME})\s*$", re.M)
#: A job banner: ``job <id> [started|running|...] on [node|host] <name>``.
_BANNER = re.compile(r"\b[Jj]ob(?: ?id)?[ :#]+[\w.\[\]-]+(?: has| is)?(?: (?:started|starting|running|began|begun"
                     rf"|executing|runs?|scheduled|allocated))? on (?:(?:host|node) )?(?P<host>{_NAME})\b(?! of \d)")
#: A command that reports on one named node: ``kubectl describe node N``, ``scontrol show node N``, ``pbsnodes N``.
_NODE_QUERY = re.compile(rf"\b(?:kubectl (?:describe|get) nodes? |scontrol show nodes? |pbsnodes (?:-\w+ )*)"
                         rf"(?P<host>{_NAME})(?=\s|$)", re.M)
#: A log's own ``host=N`` / ``hostname=N`` field (``[rank3] local_rank=3 ib_dev=mlx5_3 host=node-7``).
_HOST_FIELD = re.compile(rf"(?:^|[\s,;(\[])(?:host|hostname|node)=(?P<host>{_NAME})(?=[\s,;)\]]|$)", re.M)
#: A start banner's ``key: value`` field naming the machine: the key starts the line or follows a field
#: separator (``, `` ``; `` ``| `` or a logger's `` - ``: "Connecting to host: x" is a peer, not a field), an
#: optional ``user@`` before the name, and the field ends there (``host: db:5432`` and ``host: http://...``
#: name a service, not the node; ``0.0.0.0`` does not start with a letter).
_BANNER_FIELD = re.compile(rf"(?:^|[,;|]|\s-)[ \t]*(?i:host(?:[ _]?name)?|node(?:[ _]?name)?)[ \t]*[:=][ \t]*"
                           rf"(?:[\w.-]+@)?(?P<host>{_NAME})(?=[ \t]*(?:[,;|]|$))", re.M)
#: A JSON log record's host label (Loki / Fluent Bit / Vector exports: ``"labels": {"host": "node-7", ...}``).
_JSON_HOST = re.compile(rf'"(?:host|hostname|host_name|node|nodename|node_name)"\s*:\s*"(?P<host>{_NAME})"')
_EXEC_HOST = re.compile(rf"\bexec_host\s*[=:]\s*(?P<host>{_NAME})/\d")
_K8S_SCHEDULED = re.compile(rf"\bScheduled\b.*\bSuccessfully assigned (?:[\w.-]+/)?[\w.-]+ to (?P<host>{_NAME})\s*$",
                            re.M)
#: PMIx / Open MPI / PRRTE prefix: ``[node-7:2214763] PMIX ERROR``, ``[node-7:12345] *** Process received signal``.
_MPI_PREFIX = re.compile(rf"(?:^|\s)\[(?P<host>{_NAME}):(?P<pid>\d+)\] (?=\S)", re.M)
_NCCL_PREFIX = re.compile(r"^(?P<host>[A-Za-z][\w.-]*):\d+:\d+ \[\d+\]", re.M)
#: srun's verdict on a node's tasks (``srun: error: NODE: task 0: Aborted (core dumped)``).
_SRUN = re.compile(rf"\bsrun: error: (?P<host>{_NAME}): tasks? (?P<tasks>[\d,-]+): ")
#: A table row the writer marked with an arrow (``node-12   11760  <--``): the host that starts the marked
#: cell, followed by one to three values (not code: ``r2 <- f(x)``); a name with a digit (node names have them,
#: words of prose do not).
_MARKED_HOST = re.compile(r"(?:^|(?<=\s\s)|(?<=\|))[ \t]*(?!(?:GPU|gpu|rank|Rank|cuda)\d)"
                          r"(?P<host>[A-Za-z][\w-]*\d[\w-]*(?:\.[\w-]+)*)(?:[ \t|]+[^\s<|=(]+){1,3}[ \t|]*"
                          r"(?:<-{1,3}|<={1,3}|\u2190)(?=\s|$)", re.M)
#: ``ssh [options] [user@]host command``: the command's output is that host's.
_SSH = re.compile(rf"^\s*ssh(?: -[BbcDEeFIiJLlmOoPpQRSWw] ?\S+| -\w+)* (?:[\w.-]+@)?(?P<host>{_NAME}) \S")
#: Commands whose output comes from other nodes than the prompt's.
_REMOTE = re.compile(r"^\s*(?:sudo )?(?:srun|salloc|sbatch|mpirun|mpiexec|prterun|pdsh|clush|kubectl|oc|ansible|deepspeed)\b")

#: In the order they are believed: a prompt or an echo is the shell's own word; a message prefix
#: may be another node's (a multi-node job's PMIx lines name every node).
PATTERNS = (_ECHO, _HOSTNAME_OUTPUT, _BANNER, _BANNER_FIELD, _JSON_HOST, _EXEC_HOST, _NODE_QUERY, _K8S_SCHEDULED,
            _HOST_FIELD, _MPI_PREFIX, _NCCL_PREFIX, _SRUN, _MARKED_HOST)


def is_host(name: str | None) -> bool:
    """Whether ``name``, found where a node's name stands, can be one."""
    return bool(name) and name[0].isalpha() and name.lower() not in NOT_HOSTS and not _SOURCE_FILE.search(name)


def _one(names: list[str]) -> str | None:
    distinct = {n for n in names if is_host(n)}
    return distinct.pop() if len(distinct) == 1 else None


def _ran_on(line: str) -> str | None:
    """The node a prompt line's command ran on: the ``ssh`` target, the prompt's host for a local
    command, None for a launcher that runs it elsewhere (``srun``, ``mpirun``, ``kubectl``, ...)."""
    m = PROMPT.match(line) if "@" in line else None
    if m is None:
        return None
    typed = line[m.end():]
    ssh = _SSH.match(typed)
    if ssh:
        return ssh["host"]
    return None if _REMOTE.match(typed) else (m["h1"] or m["h2"] or m["h3"])


def prompt_hosts(text: str) -> list[str]:
    """The nodes the commands of a pasted session ran on (:func:`_ran_on`), one per prompt line."""
    return [host for line in text.splitlines() if (host := _ran_on(line))]


def stated_host(text: str) -> str | None:
    """The one node ``text`` says it ran on, by the first shape that names exactly one, or None."""
    host = _one(prompt_hosts(text))
    if host:
        return host
    for pattern in PATTERNS:
        host = _one([m["host"] for m in pattern.finditer(text)])
        if host:
            return host
    return prose_named_node(text)


#: A scheduler table's header whose last column lists nodes (``squeue``: ``... NODES NODELIST(REASON)``,
#: ``sinfo``: ``... STATE NODELIST``), and a plain node list in that column (``node-7,node-9``).
_NODELIST_HEADER = re.compile(r"^\s*(?:JOBID|PARTITION)\b.*\bNODELIST(?:\(REASON\))?\s*$")
_NODE_LIST = re.compile(rf"^{_NAME}(?:,{_NAME})*$")
#: A sentence: six or more words of letters in a row (not a table row, a command or a log line).
_SENTENCE = re.compile(r"[A-Za-z][a-z']*(?:,? [A-Za-z][a-z']*){5,}")


def prose_named_node(text: str) -> str | None:
    """The one node of the log's scheduler table (its NODELIST column) that the writer's sentences name;
    None without such a table, or when the sentences name none or several of its nodes."""
    lines = text.splitlines()
    nodes: set[str] = set()
    table_rows: set[int] = set()
    for k, line in enumerate(lines):
        if not _NODELIST_HEADER.match(line):
            continue
        for j in range(k + 1, len(lines)):
            cells = lines[j].split()
            if len(cells) < 3 or not _NODE_LIST.match(cells[-1]):
                break
            table_rows.add(j)
            nodes.update(n for n in cells[-1].split(",") if is_host(n))
    if not nodes:
        return None
    named = {word for k, line in enumerate(lines) if k not in table_rows and _SENTENCE.search(line)
             for word in re.findall(r"[\w.-]+", line) if word in nodes}
    return named.pop() if len(named) == 1 else None


def session_host(text: str, line: int) -> tuple[str, int] | None:
    """The node whose command printed ``line`` (1-based) of a pasted session, and the command's line:
    the nearest prompt above it (:func:`_ran_on`). None outside a session or after a launcher."""
    rows = text.splitlines()
    for k in range(min(line, len(rows)) - 1, -1, -1):
        if "@" in rows[k] and PROMPT.match(rows[k]):
            host = _ran_on(rows[k])
            return (host, k + 1) if host and is_host(host) else None
    return None


#: Ray's name for the process that printed or raised: a RayTaskError's ``ray::Actor.method() (pid=N, ip=A, ...)``
#: header and a forwarded line's ``(Actor pid=N, ip=A)`` prefix. The driver's own lines carry no ip.
_RAY_TASK = re.compile(r"(?:\bray::[\w.]+\(\) \(|^\((?:[\w.:]+ )?)pid=\d+, ip=(?P<ip>\d{1,3}(?:\.\d{1,3}){3})\b", re.M)
#: How far above a traceback line its RayTaskError header may stand (the worker's frames are few).
RAY_HEADER_LINES = 20


def ray_task_host(text: str, line: int) -> tuple[str, int] | None:
    """The worker (by the IP Ray names it with) whose error printed ``line`` (1-based), and the line
    that names it: the line's own ``(Actor pid=N, ip=A)`` prefix, else the nearest RayTaskError header
    above it. Ray nests the errors of a call chain outermost first (the driver's task, then the
    actor it called), so the nearest header is the worker that raised; the others only passed it on."""
    rows = text.splitlines()
    for k in range(min(line, len(rows)) - 1, max(-1, line - 1 - RAY_HEADER_LINES), -1):
        m = _RAY_TASK.search(rows[k])
        if m:
            return m["ip"], k + 1
    return None


def _tasks(spec: str) -> set[int]:
    out: set[int] = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        if a.isdigit() and (not b or b.isdigit()):
            out.update(range(int(a), int(b or a) + 1))
    return out


def srun_host_of_rank(text: str, rank: int) -> str | None:
    """The node srun says ran task ``rank``, when the srun lines count ranks: one task per GPU puts
    several tasks on a node; srun launching one torchrun per node puts one, and then a task id is a
    node's number, not a rank."""
    by_host: dict[str, set[int]] = {}
    for m in _SRUN.finditer(text):
        if is_host(m["host"]):
            by_host.setdefault(m["host"], set()).update(_tasks(m["tasks"]))
    if not any(len(tasks) > 1 for tasks in by_host.values()):
        return None
    holding = [host for host, tasks in by_host.items() if rank in tasks]
    return holding[0] if len(holding) == 1 else None
