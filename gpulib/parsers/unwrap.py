"""Evidence pasted rather than captured: peel a whole file's wrapping before its structure is read.

An ``ibstat`` table pasted into an issue arrives as a markdown quote, inside a code fence, after
the shell prompt that ran it, or with ``pdsh``'s ``host: `` in front of every line. The signature
scan reads such lines one by one (:mod:`gpulib.parsers.line_identity`); the *structured* parsers
(nvidia-smi, dcgmi, ibstat tables) need the tool's own layout back, so :func:`unwrap` removes the
wrapping from the whole text and says which host the session or the prefix named.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from gpulib.parsers.kernel_prefix import MARKDOWN_QUOTE
from gpulib.parsers.line_identity import PROMPT

_FENCE = re.compile(r"^\s*(?:```|~~~)")
_FANOUT = re.compile(r"^(?P<host>[A-Za-z][\w.-]*): ")
#: Words that start many lines of a tool's own output and are not hosts.
_NOT_HOSTS = {"error", "warning", "warn", "info", "debug", "note", "port", "state", "caused", "ca", "gpu"}
FANOUT_SHARE = 0.9
#: A prompt that names no user: ``gpu-a $ nvidia-smi``, ``$ mpirun ...``, ``node3 # dmesg -T`` at the
#: start of a line. Only what reads as an invocation counts (:func:`_invocation`): ``# Title``, a
#: script's ``# set the interface``, ``$ 12.50 per hour`` or a regex's ``$`` are not prompts.
_BARE_PROMPT = re.compile(r"^(?:(?P<host>[A-Za-z][\w.-]*) )?(?P<sign>[$#]) (?P<typed>\S.*)$")
#: The first word of an invocation: a program's lower-case name or a path to it (``./run.sh``).
_PROGRAM = re.compile(r"^(?:sudo )?(?:\.{0,2}/)?[a-z][\w.+/-]*(?: |$)")
#: What a command line has and a sentence has not: an option, a pipe, a redirect, a path, an assignment.
_INVOCATION_MARK = re.compile(r" -{1,2}\w| [|<>] | /|\w=")


@dataclass
class Unwrapped:
    """``commands``: (0-based line, host, what was typed) of every shell prompt line, in order."""

    text: str
    host: str | None = None
    changed: bool = False
    commands: list[tuple[int, str | None, str]] = field(default_factory=list)


#: A distributed launch typed at a prompt keeps its text: its arguments (the rendezvous endpoint,
#: the node count) say where the job's store lives, which the job's own lines rarely repeat.
LAUNCH_COMMAND = re.compile(r"\b(?:torchrun|torch\.distributed\.(?:run|launch))\b.*--(?:rdzv|master)[-_](?:endpoint|addr)")


#: The programs a job is launched with, as typed (after ``VAR=value`` assignments): an ``echo $?`` typed
#: right after one asks for the job's exit status, and is kept in the text with its answer below it
#: (the job log parser reads ``0`` as a normal end); after ``tail log`` or ``grep`` it says nothing.
JOB_LAUNCH = re.compile(r"(?:\w+=\S* )*(?:sudo )?(?:python[\d.]*|torchrun|deepspeed|accelerate|srun|mpirun|mpiexec|"
                        r"horovodrun|colossalai|pytest|bash|sh|\./\S+|\S+\.sh)(?: |$)")
EXIT_STATUS = "echo $?"


def unwrap(text: str) -> Unwrapped:
    """The text without quotes, fences, a common fan-out host prefix and prompt lines (line for
    line). The prefix goes first: ``pdsh`` in front of a pasted session puts it before every prompt."""
    out = []
    for line in text.splitlines():  # a removed line leaves an empty one: quotes keep their line numbers
        if _FENCE.match(line):
            out.append("")
            continue
        if line.lstrip().startswith(">"):
            line = MARKDOWN_QUOTE.sub("", line, count=1)
        out.append(line)
    fanout = _fanout_host(out)
    if fanout:
        cut = len(fanout) + 2
        out = [x[cut:] if x.startswith(fanout + ": ") else x for x in out]
    commands = []
    script = bool(out) and out[0].startswith("#!")  # its ``# ...`` lines are comments
    for i, line in enumerate(out):
        m = PROMPT.match(line)
        if m:
            typed, host = line[m.end():].strip(), m["h1"] or m["h2"] or m["h3"]
        elif (b := _BARE_PROMPT.match(line)) and not (script and b["sign"] == "#") and _invocation(
                b["typed"], alone=bool(b["host"]) or b["sign"] == "$"):
            typed, host = b["typed"].strip(), b["host"]
        else:
            continue
        launched = bool(commands) and JOB_LAUNCH.match(commands[-1][2]) is not None
        commands.append((i, remote_host(typed) or host, typed))
        out[i] = typed if LAUNCH_COMMAND.search(typed) or launched and typed == EXIT_STATUS else ""
    new = "\n".join(out) + "\n"
    # the text's kind is read from its head: the first command's output, so its host is that one's
    first = commands[0][1] if commands and not any(x.strip() for x in out[:commands[0][0]]) else None
    host = first or (commands[-1][1] if commands else None)
    return Unwrapped(new, fanout or host, new.strip() != text.strip(), commands)


def _invocation(typed: str, *, alone: bool) -> bool:
    """Whether the text after a bare ``$`` or ``#`` is a command typed, not prose: a program's name
    followed by what only command lines carry (``-q``, ``| awk``, ``> out``, ``/path``, ``X=1``), or,
    where ``alone``, the name by itself (``$ nvidia-smi``; a lone ``# notes`` is a markdown heading)."""
    if not _PROGRAM.match(typed):
        return False
    return bool(_INVOCATION_MARK.search(typed)) or alone and " " not in typed.strip()


#: ssh options that take an argument (``ssh -p 2222 -o X=Y node cmd``): the host is the word after them.
_SSH_ARG_OPTIONS = frozenset("bcDEeFIiJLlmOopQRSWw")


def remote_host(command: str) -> str | None:
    """The host a command ran on when it was typed as ``ssh HOST cmd`` from a login node: its output
    is that host's, not the prompt's (``ssh gpu-3-7 nvidia-smi`` lists gpu-3-7's GPUs)."""
    words = command.split()
    if words[:1] == ["sudo"]:
        words = words[1:]
    if not words or words[0] != "ssh":
        return None
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if len(words[i]) == 2 and words[i][1] in _SSH_ARG_OPTIONS else 1
    if i + 1 >= len(words):  # an interactive login: the next prompt names the host
        return None
    return words[i].rsplit("@", 1)[-1] or None


def _fanout_host(lines: list[str]) -> str | None:
    """The host a fan-out tool (``pdsh``, ``clush``) put in front of nearly every line, if one did."""
    prefixes = Counter(m["host"] for m in map(_FANOUT.match, lines) if m)
    filled = [x for x in lines if x.strip()]
    if not prefixes or len(filled) < 3:
        return None
    name, count = prefixes.most_common(1)[0]
    if count >= FANOUT_SHARE * len(filled) and name.lower() not in _NOT_HOSTS and not name.isupper():
        return name
    return None


__all__ = ["Unwrapped", "remote_host", "unwrap"]
