"""Destructive remediation: commands that change a machine, shown always, run only on purpose.

:func:`remediation_commands` turns findings into argument lists (never shell strings) from the
Xid catalog's actions; :class:`Remediation` shows them and runs them only interactively, after
the engineer confirms, and only for commands meant for this very host.

Which host a command is for comes from the evidence, and evidence can lie or be unclear. A
command whose host is unknown (no host in the finding) or not a plain host name (``gx-103;
reboot``) is *shown, never runnable*: evidence is often read on another machine than the one it
came from, and a ``kill -TERM 4242`` without a host would otherwise run on the analyst's own. The
suggestion itself stays (an Xid 79 still asks for a drain and a power-cycle), with the host
quoted and marked unverified, for the engineer to check and run by hand.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import pandas as pd
from IPython.display import display

from gpulib.catalog import load_catalog, xid_info
from gpulib.errors import GpulibError
from gpulib.identity import normalize_pci
from gpulib.terminal import safe


@dataclass(frozen=True)
class Command:
    """A remediation command for ``host``: an argument list (never a shell string) and why.
    ``host`` None: the evidence does not say where it belongs; ``verified`` False: the host as
    the evidence spelt it failed the host-name check. Either way it is shown, never run."""

    argv: tuple[str, ...]
    why: str
    host: str | None = None
    verified: bool = True

    @property
    def located(self) -> bool:
        """The command names a host that passed the name check (the only kind that may run)."""
        return self.host is not None and self.verified

    def text(self) -> str:
        if self.host is None:
            where = "[host unknown: shown only] "
        elif not self.verified:
            where = f"[on {shlex.quote(self.host)}: unverified host name, shown only] "
        else:
            where = f"[on {self.host}] "
        return safe(f"{where}{shlex.join(self.argv)}    # {self.why}")


#: The verbs of a catalog action, in the order they are looked for: the *first* machine step the
#: action names is the one to take now (``reset it; if it persists reboot the node`` -> reset).
#: Draining is not in the list: every hard failure drains the node first.
_RECOVERY_VERBS = (("power_cycle", re.compile(r"\bpower[- ]cycle", re.I)),
                   ("reboot", re.compile(r"\breboot|\brestart the (?:vm|instance|node)", re.I)),
                   ("reset_gpu", re.compile(r"\breset\b", re.I)))
_RECOVERY_RANK = {"drain": 0, "reset_gpu": 1, "reboot": 2, "power_cycle": 3}


def recovery_from_action(action: str) -> str:
    """``power_cycle``, ``reboot``, ``reset_gpu`` or ``drain``: the first machine step a catalog
    action names (``Power-cycle the node (a GPU reset cannot reach it)`` -> ``power_cycle``;
    ``Stop the GPU's processes and reset it; if it persists reboot`` -> ``reset_gpu``; ``Drain the
    GPU, contact NVIDIA`` -> ``drain``)."""
    hits = [(m.start(), name) for name, pattern in _RECOVERY_VERBS if (m := pattern.search(action or ""))]
    return min(hits)[1] if hits else "drain"


def xid_recovery(code: int) -> tuple[str, str] | None:
    """(recovery, the catalog's action) for a hard Xid; None when the catalog calls the code soft
    or informational (restart the job: nothing to do to the machine) or does not know it."""
    info = xid_info(code)
    if info is None or not info.hard:
        return None
    return recovery_from_action(info.action), info.action


def category_recovery(category: str) -> tuple[str, str] | None:
    """(recovery, why) for a hard finding that carries no Xid code (a "fallen off the bus" line,
    a GPU nvidia-smi calls lost, a pending row remap): the most disruptive first step the
    catalog's hard codes of the same category ask for (``gpu_fell_off_bus`` -> power-cycle, as
    Xid 79 says; ``gpu_memory_error`` -> GPU reset). None when the catalog has no hard code there."""
    steps = [(recovery_from_action(i.action), i.code, i.action) for i in load_catalog().values()
             if i.hard and i.category == category]
    if not steps:
        return None
    recovery, code, action = max(steps, key=lambda s: (_RECOVERY_RANK[s[0]], -s[1]))
    return recovery, f"as for Xid {code}: {action}"


def finding_recovery(f: dict) -> tuple[str, str] | None:
    """What a finding asks of the machine, from the Xid catalog (see :func:`xid_recovery`)."""
    if f.get("xid") is not None:
        return xid_recovery(int(f["xid"]))
    if f["severity"] == "critical" and f["category"] not in ("none", "application_error"):
        return category_recovery(f["category"])
    return None


def remediation_commands(items: Sequence[dict], states: pd.DataFrame | None = None) -> list[Command]:
    """Commands that address findings, as the Xid catalog says: drain the node of every hard
    failure (so the scheduler places nothing new on it), then power-cycle or reboot it, or reset
    the GPU only where the catalog's action says reset (a GPU that fell off the bus cannot be
    reset); stop leftover processes; cap power of a throttled GPU.

    Built as argument lists from parsed values only (a PID is an int, a PCI id is normalised, a
    host a plain name), so no evidence text can inject a shell command. Machine-wide commands
    need the host (which node to drain); a host that fails the name check keeps its commands,
    marked unverified (:class:`Command`), so they are shown but never run. ``states`` supplies the power limit of a throttled GPU
    when the finding does not carry it.
    """
    limits = {}
    if states is not None and not states.empty and "power_limit_w" in states.columns:
        for _, s in states.dropna(subset=["power_limit_w", "gpu_index"]).iterrows():
            limits[(s["host"] if isinstance(s["host"], str) else None, int(s["gpu_index"]))] = float(s["power_limit_w"])
    drains: list[Command] = []
    out: list[Command] = []
    for f in items:
        host = f.get("host") if isinstance(f.get("host"), str) and f["host"] else None
        verified = host is None or bool(_HOST.fullmatch(host))
        pci = f.get("pci_bus_id") or f.get("gpu_pci")
        target = (normalize_pci(pci) if isinstance(pci, str) else None) or (
            str(int(f["gpu_index"])) if f.get("gpu_index") is not None else None)
        recovery = finding_recovery(f)
        if recovery:
            step, action = recovery
            what = f"Xid {int(f['xid'])}" if f.get("xid") is not None else f["category"]
            if host:
                drains.append(Command(("scontrol", "update", f"nodename={host}", "state=drain",
                                       f"reason=gpulib: {what}" + (f" on GPU {target}" if target else "")),
                                      f"drain the node first: {what} is a hard failure", host, verified))
            if step == "reset_gpu" and target:
                out.append(Command(("nvidia-smi", "-r", "-i", target),
                                   f"Xid catalog: {_clause(action)} (stop the GPU's processes first)", host, verified))
            elif step == "power_cycle" and host:
                out.append(Command(("ipmitool", "chassis", "power", "cycle"),
                                   f"Xid catalog: {_clause(action)}", host, verified))
            elif step == "reboot" and host:
                out.append(Command(("systemctl", "reboot"), f"Xid catalog: {_clause(action)}", host, verified))
        for pid in f.get("pids") or []:
            out.append(Command(("kill", "-TERM", str(int(pid))), f"leftover process on GPU {f.get('gpu_index')}", host,
                               verified))
        limit = f.get("power_limit_w") or (limits.get((host, int(f["gpu_index"])))
                                           if f.get("gpu_index") is not None else None)
        if f["category"] == "thermal_throttling" and f["severity"] == "error" and f.get("gpu_index") is not None \
                and limit and not f.get("caused_by"):
            watts = str(int(float(limit) * 0.85))
            out.append(Command(("nvidia-smi", "-i", str(int(f["gpu_index"])), "-pl", watts),
                               "temporary 15% lower power cap until cooling is fixed", host, verified))
    # one drain per node and each command once (two findings of one failure ask for the same
    # power-cycle), the first reason kept
    once: dict[tuple, Command] = {}
    for command in drains:
        once.setdefault(("drain", command.host), command)
    for command in out:
        once.setdefault((command.argv, command.host), command)
    return list(once.values())


_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _clause(action: str) -> str:
    """The catalog action up to its first ``.`` or ``;`` outside parentheses (the comment after a
    command stays short, and keeps a parenthesised reason whole)."""
    depth = 0
    for n, char in enumerate(action):
        depth += (char == "(") - (char == ")")
        if depth == 0 and char in ".;" and action[n + 1:n + 2] in ("", " "):
            return action[:n]
    return action


class Remediation:
    """Commands that change a machine (kill PIDs, ``nvidia-smi -r``, power limits, reboot).

    They are always *shown*. They can only run when ``interactive`` is true, after the engineer
    ticks the confirmation box and presses the button, and only for commands meant for this very
    host by a checked host name (evidence is often analysed on another machine than the one it
    came from; a command of unknown or unverified host is never run). Headless runs (papermill
    passes ``interactive=False``) and evidence with nothing runnable here never create the button.
    """

    def __init__(self, commands: Sequence[Command], interactive: bool, *, timeout_s: float = 60.0):
        self.commands = list(commands)
        self.interactive = bool(interactive)
        self.timeout_s = timeout_s
        self.results: list[tuple[Command, str]] = []
        self.here = socket.gethostname()
        self.runnable = [c for c in self.commands if self._why_not(c) is None]
        self.confirm: widgets.Checkbox | None = None
        self.button: widgets.Button | None = None
        self.log = widgets.Output() if self.interactive and self.runnable else None
        if self.log is not None:
            self.confirm = widgets.Checkbox(
                value=False, description="I have read these commands and want to run them on this host",
                layout=widgets.Layout(width="auto"), indent=False,
            )
            self.button = widgets.Button(description="Run commands", button_style="danger", disabled=True)
            self.confirm.observe(lambda change: setattr(self.button, "disabled", not change["new"]), "value")
            self.button.on_click(self._clicked)

    def text(self) -> str:
        if not self.commands:
            return "No remediation command is suggested by this evidence."
        lines = ["Remediation commands (review them; they change the machine):"]
        lines += [f"  {c.text()}" for c in self.commands]
        if not self.interactive:
            lines.append("Headless run: nothing was executed. Run them by hand, or open the notebook "
                         "interactively and confirm.")
        elif len(self.runnable) < len(self.commands):
            lines.append(f"{len(self.runnable)} of {len(self.commands)} can run here ({self.here}) after "
                         "confirmation; the others belong to another, unknown or unverified host: run them "
                         "there by hand after checking the host.")
        return "\n".join(lines)

    def _why_not(self, command: Command) -> str | None:
        """Why ``command`` may not run on this machine (None: it may, after confirmation)."""
        if command.host is None:
            return "not run: the evidence does not say which host it is for"
        if not command.verified:
            return f"not run: {shlex.quote(command.host)} is not a checked host name"
        if command.host != self.here:
            return f"skipped: meant for {command.host}, this is {self.here}"
        return None

    def display(self) -> None:
        display({"text/plain": self.text()}, raw=True)
        if self.log is not None:
            display(widgets.VBox([self.confirm, self.button, self.log]))

    def run_confirmed(self) -> list[tuple[Command, str]]:
        """Run every command for this host; refuses unless interactive and confirmed."""
        if not self.interactive or self.confirm is None or not self.confirm.value:
            raise GpulibError("remediation refused: it runs only interactively after confirmation")
        done = []
        for command in self.commands:
            if (why := self._why_not(command)) is not None:
                done.append((command, safe(why)))
                continue
            try:
                proc = subprocess.run(list(command.argv), capture_output=True, text=True,
                                      timeout=self.timeout_s, check=False)
                done.append((command, f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}".rstrip()))
            except FileNotFoundError:
                done.append((command, f"not run: {command.argv[0]} is not installed here"))
            except subprocess.TimeoutExpired:
                done.append((command, f"timed out after {self.timeout_s:.0f} s"))
        self.results.extend(done)
        return done

    def _clicked(self, _button: widgets.Button) -> None:
        if not self.confirm.value:
            with self.log:
                print("Tick the confirmation box first; nothing was run.")
            return
        self.button.disabled = True
        with self.log:
            for command, outcome in self.run_confirmed():
                print(safe(f"$ {shlex.join(command.argv)}\n{outcome}"))
        self.confirm.value = False


