"""What a diagnosis of a many-node incident adds: the per-node summary and the config diff.

Called once by :func:`gpulib.diagnose.diagnose` after the root cause is chosen, so that a drift
finding can say whether it explains the failure:

* a *software/firmware* field (driver, CUDA, NCCL, torch, kernel, OS, VBIOS, persistence, ECC,
  MIG) on which the culprit node is the odd one, or any such drift when the cause is unknown,
  is an ``error`` - it may be why the job died there;
* otherwise a drift is a ``warning``: fix it before the relaunch, it did not cause this one;
* a *state* field (GPU count, IB ports, IB rate) that is odd on the culprit node is the root
  cause seen from the inventory (the lost GPU, the Down port): ``info``, chained to the root.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from gpulib.diagnose.drift import WHY, FieldDrift, config_drift, odd_nodes
from gpulib.diagnose.node_facts import NodeConfig, node_configs
from gpulib.findings import Finding, Quote
from gpulib.logs import get_logger

log = get_logger(__name__)

#: Finding ids of config drift: ours, and the diagnosis rules' version skew.
DRIFT_IDS = ("config-drift-", "version-skew-")
STATE_FIELDS = frozenset({"gpu_count", "ib_ports_active", "ib_rate_gbps"})
#: Nodes listed by name in the text summary (the rest are counted).
TEXT_NODES = 12


def drift_findings(drifts: list[FieldDrift], configs: dict[str, NodeConfig], root: Finding | None,
                   failed: bool = True) -> list[Finding]:
    """One ``driver_mismatch`` finding per drifting field; ``failed`` = the job was interrupted
    (without a failure, e.g. in a health report, drift is never more than a warning)."""
    culprit = root.host if root is not None else None
    out = []
    for d in drifts:
        explains = d.field not in STATE_FIELDS and (culprit in d.odd if culprit else failed)
        state_of_culprit = d.field in STATE_FIELDS and culprit in d.odd
        severity = "error" if explains else ("info" if state_of_culprit else "warning")
        odd = sorted(d.odd)
        first = odd[0]
        source = configs[first].sources.get(d.field, "")
        f = Finding(
            id=f"config-drift-{d.field}", severity=severity, category="driver_mismatch", role="context",
            title=f"Config drift: {d.describe()}" + (" - the culprit node is the odd one" if explains and culprit
                                                      else ""),
            host=first if len(odd) == 1 else None,
            quotes=[Quote(configs[h].sources.get(d.field, source), None, f"{h}: {d.label} {v}")
                      for h, v in sorted(d.odd.items())[:12]],
            actions=[_action(d, odd, culprit)],
            caused_by=root.id if state_of_culprit else None,
        )
        out.append(f)
    return out


def _action(d: FieldDrift, odd: list[str], culprit: str | None = None) -> str:
    if d.majority is None:
        return _split_action(d, culprit)
    names = ", ".join(odd[:6]) + (" ..." if len(odd) > 6 else "")
    target = d.majority
    if d.field in STATE_FIELDS:
        return f"Exclude {names} (srun --exclude) until its {d.label} is back to {target}: {WHY.get(d.field, '')}"
    return (f"Bring {names} to {target} before the relaunch, or exclude {'it' if len(odd) == 1 else 'them'} "
            f"(srun --exclude): {WHY.get(d.field, '')}")


def _split_action(d: FieldDrift, culprit: str | None) -> str:
    """No value has a majority (two nodes, one each): excluding every "odd" node would empty the
    job. Name the node the other evidence points at - the one with fewer GPUs, active ports or
    link rate (a state can only be degraded downwards), else the root cause's node - or say that
    gpulib cannot tell."""
    why = WHY.get(d.field, "")
    if d.field in STATE_FIELDS:
        numeric = {h: float(v) for h, v in d.odd.items() if isinstance(v, (int, float)) or str(v).replace(".", "", 1).isdigit()}
        if len(numeric) == len(d.odd) and len(set(numeric.values())) > 1:
            low = min(numeric.values())
            worse = sorted(h for h, v in numeric.items() if v == low)
            best = max(numeric.values())
            return (f"No majority, but {', '.join(worse)} has the lower {d.label} ({low:g} vs {best:g}): a state only "
                    f"degrades downwards, so exclude {'it' if len(worse) == 1 else 'them'} (srun --exclude) until "
                    f"it is back: {why}")
    if culprit and culprit in d.odd:
        others = sorted({str(v) for h, v in d.odd.items() if h != culprit})
        return (f"No majority among {d.known} nodes; the root cause is on {culprit} ({d.label} {d.odd[culprit]}): "
                f"bring it to {' / '.join(others)} as the others run, or exclude it (srun --exclude): {why}")
    return (f"No majority among {d.known} nodes, so gpulib cannot tell which one is off: install one {d.label} on "
            f"every node before the relaunch (excluding every differing node would empty the job): {why}")


def node_summary(inputs, findings: list[Finding], root: Finding | None,
                 configs: dict[str, NodeConfig], drifts: list[FieldDrift]) -> list[dict]:
    """One entry per host: files and kinds read, GPUs seen, findings by severity, odd config,
    and its role (``culprit`` / ``odd`` / ``findings`` / ``ok``), culprit first."""
    files: Counter = Counter()
    kinds: dict[str, set] = {}
    for f in inputs.files:
        if f.host:
            files[f.host] += 1
            kinds.setdefault(f.host, set()).add(f.kind)
    severities: dict[str, Counter] = {}
    for f in findings:
        if f.host and not f.id.startswith(DRIFT_IDS):
            severities.setdefault(f.host, Counter())[f.severity] += 1
    odd = odd_nodes(drifts)
    minority = odd_nodes([d for d in drifts if not d.split])  # with no majority, no side is "the odd one"
    out = []
    for host in sorted(set(files) | set(configs)):
        role = ("culprit" if root is not None and host == root.host else "odd" if host in minority
                else "findings" if severities.get(host, Counter())["critical"] + severities.get(host, Counter())[
                    "error"] else "ok")
        cfg = configs.get(host)
        out.append({"host": host, "role": role, "files": files[host], "kinds": sorted(kinds.get(host, ())),
                    "gpus": cfg.gpu_count if cfg else None, "findings": dict(severities.get(host, {})),
                    "odd_config": odd.get(host, {})})
    order = {"culprit": 0, "odd": 1, "findings": 2, "ok": 3}
    return sorted(out, key=lambda n: (order[n["role"]], n["host"]))


def attach(diagnosis, inputs, configs: Callable[[], dict[str, NodeConfig]] | None = None) -> None:
    """Add the config-drift findings and ``nodes`` to a diagnosis of more than one node (``configs``:
    what reads the hosts' :func:`~gpulib.diagnose.node_facts.node_configs`, where a caller keeps
    them). Never raises: a bug here must not cost the diagnosis it decorates. Idempotent:
    :func:`gpulib.diagnose.diagnose` calls it, a second call changes nothing."""
    if getattr(diagnosis, "nodes", None):
        return
    try:
        configs = configs() if configs is not None else node_configs(inputs)
        hosts = {f.host for f in inputs.files if f.host}
        if len(hosts | set(configs)) < 2:
            return  # one node: nothing to compare, no summary to make
        drifts = config_drift(configs)
        # the diagnosis's own rules already judged version skew (``version-skew-<field>-N``): not twice
        judged = {f.id.split("-")[2] for f in diagnosis.findings if f.id.startswith("version-skew-")}
        diagnosis.findings.extend(drift_findings([d for d in drifts if d.field not in judged], configs,
                                                 diagnosis.root_cause, failed=diagnosis.interruption != "none"))
        diagnosis.nodes = node_summary(inputs, diagnosis.findings, diagnosis.root_cause, configs, drifts)
    except Exception:  # noqa: BLE001
        log.exception("per-node summary / config diff failed; the diagnosis is reported without them")


def nodes_text(nodes: list[dict], findings: list[Finding] = ()) -> list[str]:
    """The NODES section of the text report: counts, the nodes that matter by name, then the
    config diff (the drift findings among ``findings``)."""
    if not nodes:
        return []
    roles = Counter(n["role"] for n in nodes)
    head = f"NODES: {len(nodes)} ({roles['culprit']} culprit, {roles['odd']} odd config, {roles['findings']} " \
           f"with errors, {roles['ok']} clean)"
    lines = ["", head]
    for n in [n for n in nodes if n["role"] != "ok"][:TEXT_NODES]:
        found = ", ".join(f"{k} {v}" for k, v in sorted(n["findings"].items())) or "no findings"
        odd = "; ".join(f"{k}={v}" for k, v in n["odd_config"].items())
        lines.append(f"  {n['role']:8} {n['host']:20} {n['files']} files, {n['gpus'] if n['gpus'] is not None else '?'}"
                     f" GPUs, {found}" + (f"; odd: {odd}" if odd else ""))
    rest = sum(1 for n in nodes if n["role"] != "ok") - TEXT_NODES
    if rest > 0:
        lines.append(f"  ... {rest} more (see --format json)")
    drift = [f for f in findings if f.id.startswith(DRIFT_IDS)]
    if drift:
        lines += ["", "CONFIG DIFF (odd nodes)"]
        lines += [f"  [{f.severity}] {_clip(_drift_line(f), 200)}" for f in drift]
    return lines


def _drift_line(f: Finding) -> str:
    """One line per drifting field naming the odd nodes (a version-skew title lists every node;
    its quotes without a line number are the odd nodes' values)."""
    if f.id.startswith("version-skew-"):
        odd = ", ".join(e.text for e in f.quotes if e.line is None)
        return f"{f.title.split(': ', 1)[0]}; odd: {odd}"
    return f.title.removeprefix("Config drift: ")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
